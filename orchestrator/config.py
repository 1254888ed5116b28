"""Settings and agent configuration: who may configure what, read and validated in one place.

- ``Settings``: process-wide knobs from ``JURY_*`` environment variables (``load_settings``).
- ``RepoConfig``: the agent catalog, the ``[jury]`` defaults and the ``[checks]`` commands for one run
  (``load_config``), from three layers, each later one overriding the earlier key by key:

  1. the built-in catalog, ``config/agents/*.toml``;
  2. the reviewed repository's ``jury.toml`` as the trunk side has it (a ``RepoFile``, read by
     ``orchestrator.target`` at the merge-base, never from the working tree or the PR head), cut down
     to what the repository may set (``orchestrator.trust``: untrusted, only ``[jury]``, ``[checks]``
     and ``model`` / ``expect_seconds`` of existing agents; never ``[jury] push``, trusted or not);
  3. the operator's file (``operator_config_file``: ``--config FILE``, else ``$JURY_CONFIG``, else
     ``$JURY_DIR/config.toml``), which may set everything and alone holds ``[trust]``, ``[sandbox]``,
     ``[[schedules]]`` (``load_schedules``, checked in ``orchestrator.schedules``) and ``[limits]``
     (the fleet's slots per repository and per model, ``parse_limits``).

  The operator's agents exist before the repository's file is read, so a repository may choose them in
  ``[jury]`` and tune their model. What was set aside, and whether the repository was trusted, is kept
  in ``RepoConfig.notes`` for the run's record and summary.

Every failure is a ``ConfigError`` whose message names the file, the agent and the key to fix.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Collection
from pathlib import Path
from typing import Annotated, Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from orchestrator.agent_keys import (
    Invalid,
    check_agent,
    check_checks,
    check_keys,
    string_list,
)
from orchestrator.errors import ConfigError
from orchestrator.schedules import Schedule, parse_schedules
from orchestrator.spec import AgentSpec, Limits, SandboxSettings
from orchestrator.trust import (
    HOST_RE,
    OPERATOR_ONLY_JURY_KEYS,
    OPERATOR_TABLES,
    Ignored,
    check_tables,
    filter_repo,
    is_trusted,
    parse_sandbox,
    parse_trust,
)

log = structlog.get_logger()

ENV_PREFIX = "JURY_"
REPO_CONFIG_NAME = "jury.toml"
OPERATOR_CONFIG_NAME = "config.toml"  # under JURY_DIR (default ~/.jury)
DEFAULT_REVIEWERS: tuple[str, ...] = ("codex", "claude")
DEFAULT_JUDGE = "codex"
DEFAULT_ROUNDS = 10
ALLOWED_JURY_KEYS: tuple[str, ...] = ("reviewers", "judge", "rounds", "push")
LIMITS_KEYS: tuple[str, ...] = ("per_repo", "per_model")
MAX_PATTERN = 200  # characters of a [limits] per_model pattern
LOG_LEVELS: tuple[str, ...] = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


# --- process settings -------------------------------------------------------------------------------


class Settings(BaseSettings):
    """Process-wide settings, read from ``JURY_*`` environment variables."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    # A CA file for a rediss:// URL signed by a private CA (declared before redis_url, which it checks).
    redis_tls_ca: Path | None = None
    # None: run the embedded Redis under ``dir``. It may hold the password: never in a repr or a message.
    redis_url: str | None = Field(default=None, repr=False, validate_default=True)
    dir: Path = Field(default=Path("~/.jury"), validate_default=True)
    alive_every: float = Field(default=30.0, gt=0)
    visibility_timeout: int = Field(default=6 * 3600, gt=0)
    log_level: str = "INFO"
    log_json: bool | None = None  # None: JSON logs when stderr is not a terminal
    worker_concurrency: int = Field(default=4, ge=1)
    kill_grace: float = Field(default=5.0, ge=0)
    # A dead worker's actions are handed out again within lease_ttl + reap_every (+ a quarter period):
    # under a minute with these defaults. A live worker renews its leases every lease_ttl / 3.
    lease_ttl: float = Field(default=30.0, gt=0)  # seconds a task's lease lives without a heartbeat
    reap_every: float = Field(default=15.0, gt=0)  # seconds between reaper sweeps (one worker per period)
    reap_after: float = Field(default=30.0, gt=0)  # an action unclaimed this long is handed out again
    # SIGTERM: running agents get this long to finish, then their actions are handed back to the fleet.
    shutdown_grace: float = Field(default=30.0, ge=0)
    budget: float | None = Field(default=None, ge=0)  # default USD ceiling per run
    call_ceiling: float | None = Field(default=None, ge=0)  # USD ceiling per agent call
    fleet_day_ceiling: float | None = Field(default=None, ge=0)  # USD ceiling for all runs per UTC day
    max_output: int = Field(default=8 * 1024 * 1024, gt=0)  # bytes kept per agent stream (head + tail)
    config: Path | None = None  # the operator's file; None: ``<dir>/config.toml`` when it exists
    # Enterprise forges a PR URL may name besides github.com and gitlab.com: "git.corp.example,host:8443"
    forge_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # CI configuration besides orchestrator.pushgate.DEFAULT_CI_PATHS, comma separated: "ci/,*.gitlab-ci.yml"
    # (a directory ends with "/"; a name without "/" matches at any depth). A push never adds one.
    ci_paths: Annotated[list[str], NoDecode] = Field(default_factory=list)
    retention: int = Field(default=7 * 86400, gt=0)  # seconds an ended run's Redis keys are kept
    # Seconds a scheduler's claim on a schedule's slot lives without renewal: how soon another scheduler
    # takes over the firing of one that died (workers/fleet/scheduler.py).
    schedule_claim_ttl: float = Field(default=30.0, gt=0)
    # Seconds (about: jittered, and kept under reap_after / 2) before a task that found its [limits]
    # slot full comes back; it waits in the broker, never in a worker slot.
    limit_wait: float = Field(default=5.0, gt=0)
    # Checkouts a host keeps per repository to recycle (reset to the next task's commit instead of a new
    # worktree, workers/isolation/worktree.py); 0: a fresh worktree for every task, removed after it.
    worktree_pool: int = Field(default=4, ge=0, le=64)
    worktree_idle: float = Field(default=3600.0, gt=0)  # seconds a recycled checkout waits unused, then goes
    # Celery's task events (a message per task sent, received, started, done) from the start; off, a
    # worker sends them once a monitor asks (Flower's enable_events), and costs a task none of them.
    task_events: bool = False

    @field_validator("redis_url", mode="after")
    @classmethod
    def _secure_redis(cls, value: str | None, info: Any) -> str | None:
        """A rediss:// URL verifies its server (``orchestrator.store.urls``); a CA needs a rediss:// URL; a
        URL whose password or path breaks its shape is refused before anything connects (``check_shape``)."""
        from orchestrator.store.urls import check_shape, secure_url

        ca = info.data.get("redis_tls_ca")
        if value is None:
            if ca is not None:
                raise ValueError("JURY_REDIS_TLS_CA is set but JURY_REDIS_URL is not")
            return None
        check_shape(value)
        return secure_url(value, ca)

    @field_validator("dir", mode="after")
    @classmethod
    def _expand_dir(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("config", mode="after")
    @classmethod
    def _expand_config(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("ci_paths", mode="before")
    @classmethod
    def _split_paths(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        return [p.strip() for p in value.split(",") if p.strip()]

    @field_validator("forge_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        hosts = [h.strip().lower() for h in value.split(",") if h.strip()]
        for host in hosts:
            if not HOST_RE.fullmatch(host):
                raise ValueError(f"{host!r} is not a host name (HOST or HOST:PORT, comma separated)")
        return hosts

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


# --- agent catalog and the configuration layers -----------------------------------------------------


class JuryDefaults(BaseModel):
    """The ``[jury]`` table: who reviews and judges, for how many rounds, and whether runs push their
    fixes (``push``: the operator's file alone sets it, ``orchestrator.trust.filter_repo``). Empty means
    not set."""

    model_config = ConfigDict(extra="forbid")

    reviewers: list[str] = Field(default_factory=list)
    judge: str | None = None
    rounds: int = DEFAULT_ROUNDS
    push: bool = False


class RepoFile(BaseModel):
    """The reviewed repository's ``jury.toml`` as its trunk side holds it, and who the repository is.

    ``text`` is None when the trunk side has no such file. ``identity`` is what ``[trust] repos`` is
    matched against: the repository's absolute top-level path, or ``host/owner/repo`` for a PR URL.
    ``local`` is a path given on the command line, trusted by default. ``notes`` are what the reader
    found on the way (the PR changes the file, it is not a regular file...).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str  # how messages name it, e.g. "/src/app/jury.toml at merge-base 1a2b3c4d5e6f"
    identity: str
    local: bool = False
    text: str | None = None
    notes: list[str] = Field(default_factory=list)


class RepoConfig(BaseModel):
    """The merged configuration for one run; ``source`` names the files read, in order."""

    model_config = ConfigDict(extra="forbid")

    agents: dict[str, AgentSpec]
    jury: JuryDefaults
    source: list[str]
    checks: dict[str, str] = Field(default_factory=dict)  # the ``[checks]`` table: name -> command
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)  # the operator's ``[sandbox]``
    limits: Limits = Field(default_factory=Limits)  # the operator's ``[limits]``
    repo_trusted: bool | None = None  # None: no repository file was read
    notes: list[str] = Field(default_factory=list)  # what was set aside and why, for the run's record


class _Operator(BaseModel):
    source: str
    data: dict[str, Any]  # its agents, jury and checks tables
    trust: list[str]
    sandbox: SandboxSettings
    schedules: list[Schedule]
    limits: Limits


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


def _parse_toml(source: str, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from exc
    except RecursionError:  # a repository's file nested past tomllib's reach is bad input, not a crash
        raise ConfigError(f"{source}: invalid TOML: nested too deeply") from None


def _check_jury(
    source: str,
    table: object,
    agents: dict[str, AgentSpec],
    current: JuryDefaults,
    ignored_agents: set[str],
    *,
    operator: bool,
) -> JuryDefaults:
    """``current`` with the ``[jury]`` table of ``source`` applied, its agents checked against ``agents``
    (a repository's table is cut down already: ``filter_repo`` set its operator-only keys aside)."""
    where = f"{source}: [jury]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    allowed = [k for k in ALLOWED_JURY_KEYS if operator or k not in OPERATOR_ONLY_JURY_KEYS]
    for key in table:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key {key!r} (allowed: {', '.join(allowed)})")
    merged = current.model_copy()
    if "reviewers" in table:
        try:
            reviewers = string_list(table["reviewers"], non_empty=True)
        except Invalid as exc:
            raise ConfigError(f"{where}.reviewers: {exc}") from None
        for name in reviewers:
            if name not in agents:
                raise ConfigError(f"{where}.reviewers: {_unknown(name, agents, ignored_agents)}")
        merged.reviewers = reviewers
    if "judge" in table:
        judge = table["judge"]
        if not isinstance(judge, str) or not judge:
            raise ConfigError(f"{where}.judge: must be an agent name")
        if judge not in agents:
            raise ConfigError(f"{where}.judge: {_unknown(judge, agents, ignored_agents)}")
        if not agents[judge].can_judge:
            raise ConfigError(f"{where}.judge: {_cannot_judge(agents[judge])}")
        merged.judge = judge
    if "rounds" in table:
        rounds = table["rounds"]
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise ConfigError(f"{where}.rounds: must be a whole number >= 1")
        merged.rounds = rounds
    if "push" in table:
        if not isinstance(table["push"], bool):
            raise ConfigError(f"{where}.push: must be true or false")
        merged.push = table["push"]
    return merged


def _unknown(name: str, agents: dict[str, AgentSpec], ignored: Collection[str] = ()) -> str:
    why = (
        " (its definition was ignored: the repository is not trusted; define it in the operator's "
        "config or add the repository to [trust] repos)"
        if name in ignored
        else ""
    )
    return f"unknown agent {name!r}{why} (known: {', '.join(sorted(agents))})"


def _cannot_judge(spec: AgentSpec) -> str:
    return f"agent {spec.name!r} cannot judge: {spec.judge_refusal}"


def _agent_tables(source: str, data: dict[str, Any]) -> dict[str, Any]:
    tables = data.get("agents", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{source}: agents: must be a table of [agents.NAME] tables")
    return tables


def load_catalog(directory: Path | None = None) -> dict[str, AgentSpec]:
    """The built-in agents: one ``[agents.<name>]`` table per ``<name>.toml`` in ``config/agents``."""
    folder = directory if directory is not None else config_dir() / "agents"
    catalog: dict[str, AgentSpec] = {}
    for path in sorted(folder.glob("*.toml")):
        data = _read_catalog_file(path)
        tables = _agent_tables(str(path), data)
        if set(data) - {"agents"} or list(tables) != [path.stem]:
            raise ConfigError(f"{path}: must hold exactly one table, [agents.{path.stem}]")
        catalog[path.stem] = check_agent(str(path), path.stem, tables[path.stem], None)
    return catalog


# A catalog file's parsed TOML by path, with the size and modification time it was read at. A sweep loads
# a config for every distinct merge-base of its PRs (thousands), and parsing the catalog was most of each.
_CATALOG_FILES: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}


def _read_catalog_file(path: Path) -> dict[str, Any]:
    """``_read_toml`` of a catalog file, parsed again only when its size or modification time changed;
    a copy each time (the tables are the caller's to change)."""
    st = path.stat()
    stamp = (st.st_size, st.st_mtime_ns)
    cached = _CATALOG_FILES.get(path)
    if cached is None or cached[0] != stamp:
        cached = _CATALOG_FILES[path] = (stamp, _read_toml(path))
    return copy.deepcopy(cached[1])


def operator_config_file(settings: Settings, config_file: Path | None = None) -> Path | None:
    """The operator's file: ``--config FILE``, else ``$JURY_CONFIG`` (both must exist), else
    ``$JURY_DIR/config.toml`` when there is one."""
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(f"{config_file}: config file not found")
        return config_file
    if settings.config is not None:
        if not settings.config.is_file():
            raise ConfigError(f"{settings.config}: config file not found ({ENV_PREFIX}CONFIG)")
        return settings.config
    default = settings.dir / OPERATOR_CONFIG_NAME
    return default if default.is_file() else None


def _read_operator(path: Path) -> _Operator:
    source = str(path)
    data = _read_toml(path)
    check_tables(source, data, OPERATOR_TABLES)
    return _Operator(
        source=source,
        data={k: v for k, v in data.items() if k in ("agents", "jury", "checks")},
        trust=parse_trust(source, data),
        sandbox=parse_sandbox(source, data),
        schedules=parse_schedules(source, data.get("schedules", [])),
        limits=parse_limits(source, data),
    )


def load_schedules(operator_file: Path | None) -> list[Schedule]:
    """The operator's ``[[schedules]]`` (``orchestrator.schedules``), checked with the rest of the file;
    a review schedule's reviewers and judge are checked against the agents the file defines."""
    if operator_file is None:
        return []
    schedules = _read_operator(operator_file).schedules
    if any(s.kind == "review" for s in schedules):
        cfg = load_config(None, operator_file)
        for s in schedules:
            if s.kind != "review":
                continue
            try:
                resolve_jury(cfg, list(s.reviewers) if s.reviewers else None, s.judge, s.rounds)
            except ConfigError as exc:
                raise ConfigError(f"{operator_file}: [[schedules]] {s.name!r}: {exc}") from None
    return schedules


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def parse_limits(source: str, data: dict[str, Any]) -> Limits:
    """The operator's ``[limits]`` table, checked key by key; every problem names the file and the key.

    ``per_repo = N``: at most N agent tasks of one repository at once, fleet-wide. ``per_model =
    { "PATTERN" = N }``: at most N at once of the agents whose model the pattern matches, all of them
    together (the rule: ``workers/isolation/limits.py``, ``subjects``). Absent: no limit.
    """
    table = data.get("limits", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [limits]: must be a table")
    for key in table:
        if key not in LIMITS_KEYS:
            raise ConfigError(f"{source}: [limits]: unknown key {key!r} (allowed: {', '.join(LIMITS_KEYS)})")
    per_repo = table.get("per_repo")
    if per_repo is not None and not _whole(per_repo):
        raise ConfigError(f"{source}: [limits].per_repo: must be a whole number >= 1, got {per_repo!r}")
    per_model = table.get("per_model", {})
    if not isinstance(per_model, dict):
        raise ConfigError(
            f'{source}: [limits].per_model: must be a table of "PATTERN" = N, e.g. {{ "anthropic/*" = 8 }}'
        )
    for pattern, n in per_model.items():
        where = f"{source}: [limits].per_model.{pattern!r}"
        if not pattern.strip() or len(pattern) > MAX_PATTERN:
            raise ConfigError(f"{where}: a pattern must be 1 to {MAX_PATTERN} characters, not blank")
        if not _whole(n):
            raise ConfigError(f"{where}: must be a whole number >= 1, got {n!r}")
    return Limits(per_repo=per_repo, per_model=dict(per_model))


def _set_aside(ignored: list[Ignored]) -> list[str]:
    """Each ignored key, logged as a warning and returned as a note naming file, agent and key."""
    for item in ignored:
        log.warning(
            "config.ignored",
            file=item.source,
            table=item.table,
            agent=item.agent,
            key=item.key,
            reason=item.reason,
        )
    return [item.note() for item in ignored]


def load_config(repo_file: RepoFile | None = None, operator_file: Path | None = None) -> RepoConfig:
    """The catalog, then what the repository's trunk-side ``jury.toml`` may set, then the operator's file
    (see the module docstring); ``operator_file`` comes from ``operator_config_file``."""
    folder = config_dir() / "agents"
    agents = load_catalog(folder)
    source = [str(p) for p in sorted(folder.glob("*.toml"))]
    operator = _read_operator(operator_file) if operator_file is not None else None
    op_tables = _agent_tables(operator.source, operator.data) if operator else {}
    notes: list[str] = []
    trusted: bool | None = None
    ignored_agents: set[str] = set()
    checks: dict[str, str] = {}
    jury_tables: list[tuple[str, object, bool]] = []  # (source, table, the operator's)
    if repo_file is not None:
        notes.extend(repo_file.notes)
        if repo_file.text is not None:
            data = _parse_toml(repo_file.source, repo_file.text)
            trusted, why = is_trusted(repo_file.identity, repo_file.local, operator.trust if operator else [])
            # Agents the operator defines exist for the repository too: it may choose and tune them.
            known = set(agents) | set(op_tables)
            kept, ignored = filter_repo(repo_file.source, data, known=known, trusted=trusted)
            ignored_agents = {i.agent for i in ignored if i.agent and i.key is None}
            notes.append(f"{repo_file.source}: read as {'trusted' if trusted else 'untrusted'} ({why})")
            notes.extend(_set_aside(ignored))
            for name, table in _agent_tables(repo_file.source, kept).items():
                if name not in agents and name in op_tables:  # tuning an operator's agent: goes under it
                    check_keys(repo_file.source, name, table)
                    op_tables[name] = {**table, **op_tables[name]}
                    continue
                agents[name] = check_agent(repo_file.source, name, table, agents.get(name))
            if "jury" in kept:
                jury_tables.append((repo_file.source, kept["jury"], False))
            if "checks" in kept:
                checks = check_checks(repo_file.source, kept["checks"], checks)
            source.append(repo_file.source)
    if operator is not None:  # last: the operator's keys win over the repository's
        for name, table in op_tables.items():
            agents[name] = check_agent(operator.source, name, table, agents.get(name))
        if "jury" in operator.data:
            jury_tables.append((operator.source, operator.data["jury"], True))
        if "checks" in operator.data:
            checks = check_checks(operator.source, operator.data["checks"], checks)
        source.append(operator.source)
    jury = JuryDefaults()
    for layer_source, table, by_operator in jury_tables:  # checked against every agent any layer defines
        jury = _check_jury(layer_source, table, agents, jury, ignored_agents, operator=by_operator)
    return RepoConfig(
        agents=agents,
        jury=jury,
        source=source,
        checks=checks,
        sandbox=operator.sandbox if operator else SandboxSettings(),
        limits=operator.limits if operator else Limits(),
        repo_trusted=trusted,
        notes=notes,
    )


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
