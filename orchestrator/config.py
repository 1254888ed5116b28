"""Settings and agent configuration, read and validated in one place.

Two sources, two shapes:

- ``Settings``: process-wide knobs from ``JURY_*`` environment variables (``load_settings``).
- ``RepoConfig``: the agent catalog and the ``[jury]`` defaults, merged in order from the built-in
  catalog (``config/agents/*.toml``), the repository's own ``jury.toml`` and an explicit ``--config``
  file (``load_config``). Each ``[agents.NAME]`` table adds an agent or overrides one key by key; the
  ``[checks]`` table names shell-free commands (``test = "pytest -q"``) that agents may run.

Every failure is a ``ConfigError`` whose message names the file, the agent and the key to fix.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from orchestrator.domain import AgentKind, AgentSpec, CheckParser, CheckScope, ReportFormat
from orchestrator.errors import ConfigError

ENV_PREFIX = "JURY_"
REPO_CONFIG_NAME = "jury.toml"
DEFAULT_REVIEWERS: tuple[str, ...] = ("codex", "claude")
DEFAULT_JUDGE = "codex"
DEFAULT_ROUNDS = 10

ALLOWED_AGENT_KEYS: tuple[str, ...] = (
    "argv",
    "judge_argv",
    "resume_argv",
    "session_from",
    "new_session",
    "report",
    "expect_seconds",
    "model",
    "model_args",
    "env",
    "env_pass",
    "install",
    "usd_per_minute",
    "kind",
    "base_url",
    "api_key_env",
    "family",
    "price",
    "fallback",
    "max_rounds",
    "timeout",
    "command",
    "parser",
    "scope",
)
ALLOWED_JURY_KEYS: tuple[str, ...] = ("reviewers", "judge", "rounds")
ALLOWED_TABLES: tuple[str, ...] = ("agents", "jury", "checks")
PLACEHOLDERS: frozenset[str] = frozenset(
    {"prompt", "prompt_file", "worktree", "session", "model_args", "model"}
)
REPORT_FORMATS: tuple[str, ...] = get_args(ReportFormat)
AGENT_KINDS: tuple[str, ...] = get_args(AgentKind)
CHECK_PARSERS: tuple[str, ...] = get_args(CheckParser)
CHECK_SCOPES: tuple[str, ...] = get_args(CheckScope)
PRICE_KEYS: tuple[str, ...] = ("input", "output")
LOG_LEVELS: tuple[str, ...] = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

# An environment variable name that may hold a secret: never stored in config, scrubbed from agents' env.
SECRET_NAME_RE = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH|SESSION|COOKIE|PRIVATE", re.IGNORECASE
)

_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_AGENT_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


# --- process settings -------------------------------------------------------------------------------


class Settings(BaseSettings):
    """Process-wide settings, read from ``JURY_*`` environment variables."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    redis_url: str | None = None  # None: run the embedded Redis under ``dir``
    dir: Path = Field(default=Path("~/.jury"), validate_default=True)
    alive_every: float = Field(default=30.0, gt=0)
    visibility_timeout: int = Field(default=6 * 3600, gt=0)
    log_level: str = "INFO"
    log_json: bool | None = None  # None: JSON logs when stderr is not a terminal
    worker_concurrency: int = Field(default=4, ge=1)
    kill_grace: float = Field(default=5.0, ge=0)
    lease_ttl: float = Field(default=60.0, gt=0)  # seconds a task's lease lives without a heartbeat
    reap_every: float = Field(default=60.0, gt=0)  # seconds between reaper sweeps (beat)
    reap_after: float = Field(default=120.0, gt=0)  # an action unclaimed this long is handed out again
    budget: float | None = Field(default=None, ge=0)  # default USD ceiling per run
    call_ceiling: float | None = Field(default=None, ge=0)  # USD ceiling per agent call
    fleet_day_ceiling: float | None = Field(default=None, ge=0)  # USD ceiling for all runs per UTC day
    max_output: int = Field(default=8 * 1024 * 1024, gt=0)  # bytes kept per agent stream (head + tail)

    @field_validator("dir", mode="after")
    @classmethod
    def _expand_dir(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("log_level", mode="after")
    @classmethod
    def _check_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return level

    @field_validator("log_json", mode="before")
    @classmethod
    def _auto_json(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "auto"):
            return None
        return value


def load_settings() -> Settings:
    """The settings from the environment; a bad value raises ``ConfigError`` naming its variable."""
    try:
        return Settings()
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False, include_input=False):
            field = str(err["loc"][0]) if err["loc"] else "?"
            problems.append(f"{ENV_PREFIX}{field.upper()}: {err['msg']}")
        raise ConfigError("invalid setting: " + "; ".join(problems)) from exc


# --- agent catalog and jury.toml --------------------------------------------------------------------


class JuryDefaults(BaseModel):
    """The ``[jury]`` table: who reviews and judges, and for how many rounds. Empty means not set."""

    model_config = ConfigDict(extra="forbid")

    reviewers: list[str] = Field(default_factory=list)
    judge: str | None = None
    rounds: int = DEFAULT_ROUNDS


class RepoConfig(BaseModel):
    """The merged configuration for one repository; ``source`` lists the files read, in order."""

    model_config = ConfigDict(extra="forbid")

    agents: dict[str, AgentSpec]
    jury: JuryDefaults
    source: list[Path]
    checks: dict[str, str] = Field(default_factory=dict)  # the ``[checks]`` table: name -> command


class _Invalid(Exception):
    """A value failed its check; the caller prefixes where it was found."""


def config_dir() -> Path:
    """The built-in config folder: the checkout's ``config/``, else the copy inside the wheel."""
    here = Path(__file__).resolve().parent
    checkout = here.parent / "config"
    return checkout if checkout.is_dir() else here / "_config"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _placeholders(text: str) -> set[str]:
    return set(_PLACEHOLDER_RE.findall(text))


def _string_list(value: object, *, non_empty: bool) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Invalid("must be a non-empty list of strings" if non_empty else "must be a list of strings")
    if non_empty and (not value or not value[0].strip()):
        raise _Invalid("must be a non-empty list of strings")
    return list(value)


def _check_placeholders(args: list[str], *, allow_model_args: bool) -> set[str]:
    found: set[str] = set()
    for arg in args:
        names = _placeholders(arg)
        unknown = sorted(names - PLACEHOLDERS)
        if unknown:
            allowed = " ".join(f"{{{p}}}" for p in sorted(PLACEHOLDERS))
            raise _Invalid(f"unknown placeholder '{{{unknown[0]}}}' (allowed: {allowed})")
        if "model_args" in names:
            if not allow_model_args:
                raise _Invalid("cannot contain '{model_args}'")
            if arg != "{model_args}":
                raise _Invalid(f"'{{model_args}}' must be a list element of its own, not in {arg!r}")
        found |= names
    return found


def _command(key: str, value: object) -> list[str]:
    args = _string_list(value, non_empty=True)
    found = _check_placeholders(args, allow_model_args=True)
    if not found & {"prompt", "prompt_file"}:
        raise _Invalid("must pass the prompt: use '{prompt}' or '{prompt_file}' (stdin is closed)")
    if key == "resume_argv" and "session" not in found:
        raise _Invalid("must pass the session: use '{session}'")
    return args


def _shell_free(value: object) -> str:
    """A command string that ``shlex`` splits into at least one word."""
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("must be a non-empty command string")
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise _Invalid(f"cannot be split into words: {exc}") from None
    if not words:
        raise _Invalid("must be a non-empty command string")
    return value


def _positive(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise _Invalid(f"must be a positive {what}")
    return float(value)


def _one_of(value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise _Invalid(f"must be one of {', '.join(allowed)}")
    return str(value)


def _base_url(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("must be a non-empty URL")
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _Invalid("must be an http:// or https:// URL")
    if parts.username or parts.password:
        raise _Invalid("must not hold credentials; name the key's variable in api_key_env")
    return value.strip().rstrip("/")


def _price(value: object) -> dict[str, float]:
    if not isinstance(value, dict):
        raise _Invalid("must be a table { input = USD, output = USD } per million tokens")
    keys = set(value)
    if keys != set(PRICE_KEYS):
        extra = sorted(keys - set(PRICE_KEYS))
        raise _Invalid(f"unknown key {extra[0]!r}" if extra else "needs both input and output")
    out: dict[str, float] = {}
    for key in PRICE_KEYS:
        v = value[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            raise _Invalid(f"{key}: must be a number >= 0 (USD per million tokens)")
        out[key] = float(v)
    return out


def _check_value(key: str, value: object) -> object:
    """The value of one agent key, checked; raises ``_Invalid`` with what is wrong."""
    if key == "kind":
        return _one_of(value, AGENT_KINDS)
    if key == "base_url":
        return _base_url(value)
    if key == "api_key_env":
        if not isinstance(value, str) or not _ENV_NAME_RE.fullmatch(value):
            raise _Invalid("must be the NAME of an environment variable (not the key itself)")
        return value
    if key == "family":
        if not isinstance(value, str) or not value.strip():
            raise _Invalid("must be a non-empty string")
        return value.strip()
    if key == "price":
        return _price(value)
    if key == "usd_per_minute":
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
            raise _Invalid("must be a number >= 0 (USD per minute of the agent's run)")
        return float(value)
    if key == "fallback":
        models = _string_list(value, non_empty=False)
        if any(not m.strip() for m in models):
            raise _Invalid("must be a list of model ids")
        return models
    if key == "max_rounds":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _Invalid("must be a whole number >= 1")
        return value
    if key == "timeout":
        return _positive(value, "number of seconds")
    if key == "command":
        return _shell_free(value)
    if key == "parser":
        return _one_of(value, CHECK_PARSERS)
    if key == "scope":
        return _one_of(value, CHECK_SCOPES)
    if key in ("argv", "judge_argv", "resume_argv"):
        return _command(key, value)
    if key == "model_args":
        args = _string_list(value, non_empty=False)
        _check_placeholders(args, allow_model_args=False)
        return args
    if key == "session_from":
        if not isinstance(value, str) or not value:
            raise _Invalid("must be a non-empty string (a regex)")
        try:
            groups = re.compile(value).groups
        except re.error as exc:
            raise _Invalid(f"invalid regex: {exc}") from exc
        if groups != 1:
            raise _Invalid(f"must have exactly one capturing group (the session id), has {groups}")
        return value
    if key == "new_session":
        if not isinstance(value, bool):
            raise _Invalid("must be true or false")
        return value
    if key == "report":
        return _one_of(value, REPORT_FORMATS)
    if key == "expect_seconds":
        return _positive(value, "number of seconds")
    if key in ("model", "install"):
        if not isinstance(value, str) or not value.strip():
            raise _Invalid("must be a non-empty string")
        return value
    if key == "env_pass":
        names = _string_list(value, non_empty=False)
        for name in names:
            if not _ENV_NAME_RE.fullmatch(name):
                raise _Invalid(f"{name!r} is not an environment variable name")
        return names
    if key == "env":
        if not isinstance(value, dict):
            raise _Invalid('must be a table of NAME = "value"')
        return value
    raise _Invalid("unchecked key")  # unreachable: keys are filtered against ALLOWED_AGENT_KEYS first


def _check_env(where: str, env: dict[str, Any]) -> dict[str, str]:
    for name, val in env.items():
        if not _ENV_NAME_RE.fullmatch(name):
            raise ConfigError(f"{where}.env: {name!r} is not an environment variable name")
        if SECRET_NAME_RE.search(name):
            raise ConfigError(
                f"{where}.env.{name}: looks like a secret; keep secrets out of jury.toml — "
                "set it in the worker's environment and list it in env_pass"
            )
        if not isinstance(val, str):
            raise ConfigError(f"{where}.env.{name}: must be a string")
    return dict(env)


def _check_agent(path: Path, name: str, table: object, base: AgentSpec | None) -> AgentSpec:
    """The agent ``name`` after applying ``table`` (from ``path``) over ``base`` (None: a new agent)."""
    where = f"{path}: agents.{name}"
    if not _AGENT_NAME_RE.fullmatch(name):
        raise ConfigError(f"{where}: bad agent name (use letters, digits, '.', '-' and '_')")
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table ([agents.{name}])")
    for key in table:
        if key not in ALLOWED_AGENT_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (allowed: {', '.join(ALLOWED_AGENT_KEYS)})")
    fields: dict[str, Any] = base.model_dump(by_alias=True) if base is not None else {"name": name}
    for key, value in table.items():
        try:
            fields[key] = _check_value(key, value)
        except _Invalid as exc:
            raise ConfigError(f"{where}.{key}: {exc}") from None
        if key == "env":
            fields[key] = _check_env(where, fields[key])
    _check_kind(where, fields, new=base is None)
    try:
        return AgentSpec.model_validate(fields)
    except ValidationError as exc:  # a check above is missing; still name the place
        raise ConfigError(f"{where}: {exc}") from exc


def _check_kind(where: str, fields: dict[str, Any], *, new: bool) -> None:
    """The keys the agent's kind needs are set (after merging over the base agent)."""
    kind = fields.get("kind", "cli")
    if kind == "cli" and not fields.get("argv"):
        raise ConfigError(f"{where}: new agent needs argv" if new else f"{where}: a cli agent needs argv")
    if kind == "http":
        for key in ("base_url", "model"):
            if not fields.get(key):
                raise ConfigError(f"{where}: an http agent needs {key}")
    if kind == "check" and not fields.get("command"):
        raise ConfigError(f"{where}: a check agent needs command")


def _check_checks(path: Path, table: object, current: dict[str, str]) -> dict[str, str]:
    """``current`` with the ``[checks]`` table of ``path`` applied (name -> shell-free command)."""
    where = f"{path}: [checks]"
    if not isinstance(table, dict):
        raise ConfigError(f'{where}: must be a table of name = "command"')
    merged = dict(current)
    for name, value in table.items():
        if not _AGENT_NAME_RE.fullmatch(name):
            raise ConfigError(f"{where}.{name}: bad check name (use letters, digits, '.', '-' and '_')")
        try:
            merged[name] = _shell_free(value)
        except _Invalid as exc:
            raise ConfigError(f"{where}.{name}: {exc}") from None
    return merged


def _check_jury(
    path: Path, table: object, agents: dict[str, AgentSpec], current: JuryDefaults
) -> JuryDefaults:
    """``current`` with the ``[jury]`` table of ``path`` applied, its agents checked against ``agents``."""
    where = f"{path}: [jury]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    for key in table:
        if key not in ALLOWED_JURY_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (allowed: {', '.join(ALLOWED_JURY_KEYS)})")
    merged = current.model_copy()
    if "reviewers" in table:
        try:
            reviewers = _string_list(table["reviewers"], non_empty=True)
        except _Invalid as exc:
            raise ConfigError(f"{where}.reviewers: {exc}") from None
        for name in reviewers:
            if name not in agents:
                raise ConfigError(f"{where}.reviewers: {_unknown(name, agents)}")
        merged.reviewers = reviewers
    if "judge" in table:
        judge = table["judge"]
        if not isinstance(judge, str) or not judge:
            raise ConfigError(f"{where}.judge: must be an agent name")
        if judge not in agents:
            raise ConfigError(f"{where}.judge: {_unknown(judge, agents)}")
        if not agents[judge].can_judge:
            raise ConfigError(f"{where}.judge: {_cannot_judge(agents[judge])}")
        merged.judge = judge
    if "rounds" in table:
        rounds = table["rounds"]
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise ConfigError(f"{where}.rounds: must be a whole number >= 1")
        merged.rounds = rounds
    return merged


def _unknown(name: str, agents: dict[str, AgentSpec]) -> str:
    return f"unknown agent {name!r} (known: {', '.join(sorted(agents))})"


def _cannot_judge(spec: AgentSpec) -> str:
    why = "it is a check agent" if spec.kind == "check" else "it has no judge_argv"
    return f"agent {spec.name!r} cannot judge: {why}"


def _agent_tables(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    for key in data:
        if key not in ALLOWED_TABLES:
            raise ConfigError(f"{path}: unknown table [{key}] (allowed: {', '.join(ALLOWED_TABLES)})")
    tables = data.get("agents", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: agents: must be a table of [agents.NAME] tables")
    return tables


def load_catalog(directory: Path | None = None) -> dict[str, AgentSpec]:
    """The built-in agents: one ``[agents.<name>]`` table per ``<name>.toml`` in ``config/agents``."""
    folder = directory if directory is not None else config_dir() / "agents"
    catalog: dict[str, AgentSpec] = {}
    for path in sorted(folder.glob("*.toml")):
        data = _read_toml(path)
        tables = _agent_tables(path, data)
        if set(data) - {"agents"} or list(tables) != [path.stem]:
            raise ConfigError(f"{path}: must hold exactly one table, [agents.{path.stem}]")
        catalog[path.stem] = _check_agent(path, path.stem, tables[path.stem], None)
    return catalog


def _apply(
    path: Path, agents: dict[str, AgentSpec], jury: JuryDefaults, checks: dict[str, str]
) -> tuple[dict[str, AgentSpec], JuryDefaults, dict[str, str]]:
    data = _read_toml(path)
    merged = dict(agents)
    for name, table in _agent_tables(path, data).items():
        merged[name] = _check_agent(path, name, table, merged.get(name))
    if "jury" in data:
        jury = _check_jury(path, data["jury"], merged, jury)
    if "checks" in data:
        checks = _check_checks(path, data["checks"], checks)
    return merged, jury, checks


def load_config(repo: Path | None, config_file: Path | None = None) -> RepoConfig:
    """The catalog, then ``<repo>/jury.toml`` if present, then ``config_file`` (which must exist)."""
    folder = config_dir() / "agents"
    agents = load_catalog(folder)
    source = sorted(folder.glob("*.toml"))
    jury = JuryDefaults()
    checks: dict[str, str] = {}
    files: list[Path] = []
    if repo is not None and (repo / REPO_CONFIG_NAME).is_file():
        files.append(repo / REPO_CONFIG_NAME)
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(f"{config_file}: config file not found")
        files.append(config_file)
    for path in files:
        agents, jury, checks = _apply(path, agents, jury, checks)
        source.append(path)
    return RepoConfig(agents=agents, jury=jury, source=source, checks=checks)


def resolve_jury(
    cfg: RepoConfig, reviewers: list[str] | None, judge: str | None, rounds: int | None
) -> tuple[list[str], str, int]:
    """The reviewers, judge and round cap for a run: flags, else ``[jury]``, else the defaults."""
    chosen = list(reviewers if reviewers is not None else cfg.jury.reviewers or DEFAULT_REVIEWERS)
    chosen_judge = judge if judge is not None else cfg.jury.judge or DEFAULT_JUDGE
    chosen_rounds = rounds if rounds is not None else cfg.jury.rounds
    if not chosen:
        raise ConfigError("no reviewers: name at least one agent")
    for name in chosen:
        if name not in cfg.agents:
            raise ConfigError(f"reviewer: {_unknown(name, cfg.agents)}")
    duplicates = sorted({name for name in chosen if chosen.count(name) > 1})
    if duplicates:
        raise ConfigError(f"reviewer {duplicates[0]!r} is listed more than once")
    if chosen_judge not in cfg.agents:
        raise ConfigError(f"judge: {_unknown(chosen_judge, cfg.agents)}")
    if not cfg.agents[chosen_judge].can_judge:
        raise ConfigError(f"judge: {_cannot_judge(cfg.agents[chosen_judge])}")
    if chosen_rounds < 1:
        raise ConfigError(f"rounds must be at least 1, got {chosen_rounds}")
    return chosen, chosen_judge, chosen_rounds
