"""Which forge a name or URL means, and a client for it built from the environment.

Names accepted wherever Jury takes a repository or PR on a forge (``jury sweep OWNER/REPO...``):

==========================================  =========================================================
``github:OWNER/REPO``                       GitHub, explicitly
``gitlab:GROUP/SUB/PROJECT``                GitLab, explicitly (any depth of subgroups)
``OWNER/REPO``                              GitHub: two segments is the common case
``GROUP/SUB/PROJECT``                       GitLab: only GitLab nests, so three or more segments
``https://github.com/OWNER/REPO[/pull/N]``  GitHub (also the host of ``JURY_GITHUB_API``)
``https://HOST/GROUP/.../PROJECT[/-/merge_requests/N]``  GitLab on gitlab.com, the host of
                                            ``JURY_GITLAB_API``, or any host when the URL has ``/-/``
==========================================  =========================================================

A two-segment GitLab project needs the ``gitlab:`` prefix (or its URL). A URL on a host Jury does not
know is refused rather than guessed, because the guess would send the token to that host's API.

Settings: ``JURY_GITHUB_API`` (default ``https://api.github.com``), ``JURY_GITLAB_API`` (default
``https://gitlab.com/api/v4``), the tokens from ``GITHUB_TOKEN`` and ``GITLAB_TOKEN``, and
``JURY_GITHUB_LOGIN`` (a GitHub App's bot account), ``JURY_GITHUB_CHECKS`` (auto | checks | statuses),
``JURY_GITLAB_AUTH`` (private-token | bearer), ``JURY_FORGE_MAX_WAIT`` (the longest rate-limit wait, in
seconds) and ``JURY_FORGE_RETRIES``.
"""

from __future__ import annotations

import re
import time
from typing import NamedTuple
from urllib.parse import urlsplit

import httpx
from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from orchestrator.cleartext import cleartext_host
from orchestrator.errors import ConfigError, UsageError
from orchestrator.forge import github, gitlab
from orchestrator.forge.base import Forge, ForgeKind
from orchestrator.forge.transport import DEFAULT_MAX_RETRIES, DEFAULT_MAX_WAIT, Clock, ETagCache, Sleep

_SEGMENT = r"[A-Za-z0-9_.][A-Za-z0-9_.-]*"
_PATH_RE = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})+")
_PREFIXED_RE = re.compile(r"^(github|gitlab):(.+)$")
_GITHUB_URL_PATH = re.compile(rf"^/(?P<repo>{_SEGMENT}/{_SEGMENT})(?:/pull/(?P<n>\d+))?/?$")
_GITLAB_URL_PATH = re.compile(rf"^/(?P<repo>{_SEGMENT}(?:/{_SEGMENT})+?)(?:/-/merge_requests/(?P<n>\d+))?/?$")


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


class ForgeRef(NamedTuple):
    """A repository on a forge, and a PR number when the text named one."""

    kind: ForgeKind
    repo: str
    number: int | None = None

    def __str__(self) -> str:
        return f"{self.kind}:{self.repo}" + (f"#{self.number}" if self.number is not None else "")


class ForgeTarget(NamedTuple):
    forge: Forge
    repo: str
    number: int | None


def _bare(repo: str) -> str:
    return repo.removesuffix(".git")


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def parse_ref(text: str, settings: ForgeSettings | None = None) -> ForgeRef:
    """The forge, repository and PR number ``text`` names (see the module's table)."""
    settings = settings or ForgeSettings.model_construct()
    text = text.strip()
    prefixed = _PREFIXED_RE.match(text)
    if prefixed:
        kind: ForgeKind = "github" if prefixed[1] == "github" else "gitlab"
        repo = prefixed[2].strip("/")
        if not _PATH_RE.fullmatch(repo) or (kind == "github" and repo.count("/") != 1):
            shape = "OWNER/REPO" if kind == "github" else "GROUP[/SUB...]/PROJECT"
            raise UsageError(f"not a repository: {text!r} (expected {kind}:{shape})")
        return ForgeRef(kind, repo)
    if re.match(r"^https?://", text):
        return _parse_url(text, settings)
    if _PATH_RE.fullmatch(text) and ".." not in text.split("/"):
        return ForgeRef("github" if text.count("/") == 1 else "gitlab", text)
    raise UsageError(
        f"not a repository or PR: {text!r} (expected OWNER/REPO, github:OWNER/REPO, "
        "gitlab:GROUP/SUB/PROJECT, or a PR/MR URL)"
    )


def _parse_url(text: str, settings: ForgeSettings) -> ForgeRef:
    split = urlsplit(text)
    host, path = (split.hostname or "").lower(), split.path
    github_api = _host(settings.github_api)
    github_hosts = {"github.com", github_api, github_api.removeprefix("api.")}
    gitlab_hosts = {"gitlab.com", _host(settings.gitlab_api)}
    if host in github_hosts and host not in gitlab_hosts:
        found = _GITHUB_URL_PATH.match(path)
        if found:
            return ForgeRef("github", _bare(found["repo"]), int(found["n"]) if found["n"] else None)
        raise UsageError(f"not a GitHub repository or pull request URL: {text}")
    if host in gitlab_hosts or "/-/" in path:
        if host not in gitlab_hosts:
            raise UsageError(f"{host} is not the GitLab Jury talks to: set JURY_GITLAB_API to its API URL")
        found = _GITLAB_URL_PATH.match(path)
        if found:
            return ForgeRef("gitlab", _bare(found["repo"]), int(found["n"]) if found["n"] else None)
        raise UsageError(f"not a GitLab project or merge request URL: {text}")
    raise UsageError(
        f"unknown forge host {host!r}: set JURY_GITHUB_API or JURY_GITLAB_API to its API URL, "
        "or name the repository as github:OWNER/REPO or gitlab:GROUP/PROJECT"
    )


def make_forge(
    kind: ForgeKind,
    settings: ForgeSettings,
    client: httpx.Client,
    *,
    sleep: Sleep = time.sleep,
    clock: Clock = time.time,
    cache: ETagCache | None = None,
) -> Forge:
    if kind == "github":
        token = settings.github_token.get_secret_value() if settings.github_token else None
        return github.GitHub(
            client,
            token=token,
            api=settings.github_api,
            login=settings.github_login,
            checks=settings.github_checks,
            sleep=sleep,
            clock=clock,
            cache=cache,
            max_retries=settings.retries,
            max_wait=settings.max_wait,
        )
    token = settings.gitlab_token.get_secret_value() if settings.gitlab_token else None
    return gitlab.GitLab(
        client,
        token=token,
        api=settings.gitlab_api,
        auth_scheme=settings.gitlab_auth,
        sleep=sleep,
        clock=clock,
        cache=cache,
        max_retries=settings.retries,
        max_wait=settings.max_wait,
    )


def forge_for(
    url_or_slug: str,
    settings: ForgeSettings | None = None,
    *,
    client: httpx.Client | None = None,
    sleep: Sleep = time.sleep,
    clock: Clock = time.time,
    cache: ETagCache | None = None,
) -> ForgeTarget:
    """The forge client for ``url_or_slug``, with the repository and PR number it names.

    Without ``client`` a new ``httpx.Client`` is made for it; pass one to share it and control its life.
    """
    settings = settings or load_forge_settings()
    ref = parse_ref(url_or_slug, settings)
    forge = make_forge(ref.kind, settings, client or httpx.Client(), sleep=sleep, clock=clock, cache=cache)
    return ForgeTarget(forge, ref.repo, ref.number)
