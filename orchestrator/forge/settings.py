"""The forge half of Jury's settings, read from the environment: each forge kind's API and token, and
the transport's limits. A bad value fails at start-up naming its variable; a token is never accepted for
a plain http:// API on another machine (``orchestrator.cleartext``)."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from orchestrator.cleartext import cleartext_host
from orchestrator.errors import ConfigError
from orchestrator.forge import github, gitlab
from orchestrator.forge.transport import DEFAULT_MAX_RETRIES, DEFAULT_MAX_WAIT


class ForgeSettings(BaseSettings):
    """The forge half of the settings; a bad value fails at start-up naming its variable."""

    model_config = SettingsConfigDict(extra="ignore")

    github_api: str = Field(default=github.DEFAULT_API, validation_alias="JURY_GITHUB_API")
    gitlab_api: str = Field(default=gitlab.DEFAULT_API, validation_alias="JURY_GITLAB_API")
    # before the tokens, which are checked against it: the operator's word that a plain http:// API may
    # carry them (every network between is theirs)
    insecure_http: bool = Field(default=False, validation_alias="JURY_FORGE_INSECURE_HTTP")
    github_token: SecretStr | None = Field(default=None, validation_alias="GITHUB_TOKEN")
    gitlab_token: SecretStr | None = Field(default=None, validation_alias="GITLAB_TOKEN")
    github_login: str | None = Field(default=None, validation_alias="JURY_GITHUB_LOGIN")
    github_checks: github.CheckMode = Field(default="auto", validation_alias="JURY_GITHUB_CHECKS")
    gitlab_auth: gitlab.AuthScheme = Field(default="private-token", validation_alias="JURY_GITLAB_AUTH")
    max_wait: float = Field(default=DEFAULT_MAX_WAIT, ge=0, validation_alias="JURY_FORGE_MAX_WAIT")
    retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=0, le=20, validation_alias="JURY_FORGE_RETRIES")

    @field_validator("github_api", "gitlab_api", mode="after")
    @classmethod
    def _http_url(cls, value: str) -> str:
        split = urlsplit(value)
        if split.scheme not in ("http", "https") or not split.netloc or split.query or split.fragment:
            raise ValueError("must be an http(s) URL without query or fragment")
        return value.rstrip("/")

    @field_validator("github_token", "gitlab_token", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("github_token", "gitlab_token", mode="after")
    @classmethod
    def _not_in_clear(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        """A token is never sent in clear to another machine (``orchestrator.cleartext``)."""
        api = "github_api" if info.field_name == "github_token" else "gitlab_api"
        host = cleartext_host(str(info.data.get(api, "")))
        if value is not None and host and not info.data.get("insecure_http"):
            raise ValueError(
                f"{_VARIABLES[api]} is plain http:// to {host}, so the token would cross the network in"
                " clear: use https://, a loopback address, or set JURY_FORGE_INSECURE_HTTP=1 if every"
                " network between is yours"
            )
        return value


_VARIABLES = {
    "github_api": "JURY_GITHUB_API",
    "gitlab_api": "JURY_GITLAB_API",
    "insecure_http": "JURY_FORGE_INSECURE_HTTP",
    "github_token": "GITHUB_TOKEN",
    "gitlab_token": "GITLAB_TOKEN",
    "github_login": "JURY_GITHUB_LOGIN",
    "github_checks": "JURY_GITHUB_CHECKS",
    "gitlab_auth": "JURY_GITLAB_AUTH",
    "max_wait": "JURY_FORGE_MAX_WAIT",
    "retries": "JURY_FORGE_RETRIES",
}


def load_forge_settings() -> ForgeSettings:
    """The forge settings from the environment; a bad value is a ``ConfigError`` naming the variable."""
    try:
        return ForgeSettings()
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False, include_input=False):
            loc = str(err["loc"][0]) if err["loc"] else "?"
            problems.append(f"{_VARIABLES.get(loc, loc)}: {err['msg'].removeprefix('Value error, ')}")
        raise ConfigError("invalid setting: " + "; ".join(problems)) from None
