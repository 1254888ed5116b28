"""What a run is asked to do, as its ``target`` and ``jury.config`` events carry it: the target, the
agents (``AgentSpec``), the sandbox and the fleet's limits it runs under, and the jury's configuration
(``JuryConfig``). The operator's and the repository's files are read into these by
``orchestrator.config``; the events that carry them are ``orchestrator.domain``'s.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from orchestrator.agent_kinds import AGENT_KINDS, AgentKind  # the agent-kind registry
from orchestrator.refute.families import spec_family

RunStateName = Literal["queued", "review", "converged", "human", "failed", "cancelled"]
TERMINAL_STATES: frozenset[str] = frozenset({"converged", "human", "failed", "cancelled"})
DEFAULT_KIND = "cli"  # the kind of an agent whose table names none
ReportFormat = Literal["whole", "tail", "result-json", "opencode-json", "stream-json", "codex-json"]


class Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    def wire(self) -> dict[str, Any]:
        """The JSON-ready dict written to logs and files (camelCase, no unset optionals)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


CheckParser = Literal["auto", "ruff", "mypy", "pytest", "flake8", "sarif", "none"]
CheckScope = Literal["changed", "all"]


class AgentSpec(BaseModel):
    """One agent of the catalog, resolved: what a worker needs to run it (travels in ``jury.config``).

    ``kind`` picks the runner: ``cli`` (a subprocess, ``argv``), ``http`` (an OpenAI-compatible chat
    endpoint with a tool loop, ``base_url`` + ``model``) or ``check`` (a deterministic checker ``command``
    whose diagnostics become findings). The family override is stored as ``family_override`` and read and
    written as ``family`` (its alias); ``spec.family`` is the effective family.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    kind: AgentKind = DEFAULT_KIND
    argv: list[str] = Field(default_factory=list)
    judge_argv: list[str] | None = None
    resume_argv: list[str] | None = None
    session_from: str | None = None
    new_session: bool = False
    report: ReportFormat = "whole"
    expect_seconds: float = 600
    model: str | None = None
    model_args: list[str] = Field(default_factory=lambda: ["--model", "{model}"])
    env: dict[str, str] = Field(default_factory=dict)
    env_pass: list[str] = Field(default_factory=list)
    # Names of passed-through variables whose values are secrets even though their names do not say so
    # (``SECRET_NAME_RE``): every spelling of them is redacted from what the agent says.
    secrets: list[str] = Field(default_factory=list)
    install: str | None = None
    # Directories (``~/`` is the worker's HOME) the agent keeps its own state in; inside the sandbox they
    # are the only parts of HOME it sees, read-write (e.g. ``["~/.codex"]``).
    state_dirs: list[str] = Field(default_factory=list)
    # The only endpoints ("host:port") a CLI agent's sandbox may reach, through Jury's proxy
    # (workers.isolation.egress).
    egress: list[str] = Field(default_factory=list)
    usd_per_minute: float | None = None  # what a minute of this agent costs when it reports no cost
    # http agents
    base_url: str | None = None
    api_key_env: str | None = None  # the NAME of the variable holding the key, never the key
    insecure_http: bool = False  # the operator's word that a plain http:// base_url may carry the key
    family_override: str | None = Field(default=None, alias="family")
    price: dict[str, float] | None = None  # USD per million tokens: {"input": ..., "output": ...}
    fallback: list[str] = Field(default_factory=list)  # models tried in order after ``model`` fails
    max_rounds: int = 30  # tool-loop turns
    timeout: float | None = None  # seconds per HTTP request
    # check agents
    command: str | None = None  # shell-free, split with shlex
    parser: CheckParser = "auto"
    scope: CheckScope = "changed"

    @property
    def family(self) -> str | None:
        """The effective model family: the explicit ``family``, else the model's (``spec_family``, the one
        resolver: ``openai/gpt-5`` -> ``openai``, routers looked through, then the agent's default)."""
        return spec_family(self)

    @property
    def judge_refusal(self) -> str | None:
        """Why this agent cannot judge, as its kind's descriptor says (a check never, a CLI agent only
        through its ``judge_argv``); None when it can."""
        return AGENT_KINDS[self.kind].judge_refusal(self)

    @property
    def can_judge(self) -> bool:
        return self.judge_refusal is None

    @property
    def gives_opinions(self) -> bool:
        """Whether the agent is a model that reasons about claims, so a candidate second opinion."""
        return AGENT_KINDS[self.kind].gives_opinions


class Target(Model):
    """What is reviewed. Merged key by key from every ``target`` event."""

    repo: str | None = None
    id: str | None = None
    url: str | None = None
    title: str | None = None
    branch: str | None = None
    trunk: str | None = None
    state: RunStateName | None = None
    state_note: str | None = None
    attempt: str | None = None
    judge: str | None = None
    reviewed_commit: str | None = None
    path: str | None = None  # the git repository Jury works in (the user's repo or a mirror)
    head: str | None = None  # PR head sha
    base: str | None = None  # merge-base of the head with the trunk
    # Why a run's fixes were not pushed to the PR's repository (orchestrator/pushgate.py): a head from a
    # fork, CI configuration changed; said in the run's end note and so on the PR.
    push_note: str | None = None
    # Unique to this run, whatever its slug (``first_events``): its checkouts and scratch folders are
    # named by it, so two runs never share one even where their slugs could meet (two state directories
    # of one host, a record put back by hand). Runs recorded before it had none: their slug stands in.
    run_id: str | None = None


class SandboxSettings(Model):
    """The operator's ``[sandbox]`` table: how Jury confines what runs the reviewed code and the agents.

    ``mode = "bwrap"`` (the default) runs every such process under bubblewrap and refuses to run where it
    cannot; ``"none"`` runs them unconfined, and every record and summary says so. ``network`` opens the
    network to code runs (checks, verification, check agents, tool commands); CLI agents always have it.
    The limits apply to code runs: address space, processes and the size of any one file written.
    """

    mode: Literal["bwrap", "none"] = "bwrap"
    network: bool = False
    memory_mb: int = Field(default=8192, ge=64)
    max_procs: int = Field(default=1024, ge=8)
    max_file_mb: int = Field(default=1024, ge=1)
    # Host paths (``~/...`` or absolute) visible read-only inside besides the read-only root, e.g. a
    # toolchain installed under HOME (``~/.pyenv``, ``~/.local/bin``), which the private HOME hides.
    ro_paths: list[str] = Field(default_factory=list)
    # When the worker runs as root, each jail runs under a uid of its own from this range (``"A-B"``, both
    # included; ids with an account are skipped), so the host's root-only files stay closed to it and
    # ``max_procs`` counts its processes; "" keeps jails running as root (``workers.isolation.jailuid``).
    uids: str = "60000-60999"
    # The group of the agents' HOME state directories (``state_dirs``), shared by the jails that bind them.
    state_gid: int = Field(default=59999, ge=1, le=2**31 - 2)
    # The size of each private tmpfs (/tmp, HOME, /run): what the jail can write outside its worktree.
    tmp_mb: int = Field(default=1024, ge=1)

    @field_validator("uids")
    @classmethod
    def _uids(cls, value: str) -> str:
        if value == "":
            return value
        first, sep, last = value.partition("-")
        if not (sep and first.isdigit() and last.isdigit()):
            raise ValueError(f'{value!r} must be a range of uids "FIRST-LAST", or "" for none')
        if not 1000 <= int(first) <= int(last) <= 2**31 - 2:
            raise ValueError(f"{value!r}: uids from 1000 up, the first not above the last")
        return f"{int(first)}-{int(last)}"

    @model_validator(mode="after")
    def _state_gid_apart(self) -> SandboxSettings:
        if self.uids:
            first, last = (int(part) for part in self.uids.split("-"))
            if first <= self.state_gid <= last:
                raise ValueError(f"state_gid {self.state_gid} lies in uids {self.uids!r}: a jail's own gid")
        return self

    @field_validator("ro_paths")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        for p in value:
            if not (p.startswith("~/") or p.startswith("/")) or ".." in p.split("/"):
                raise ValueError(f"{p!r} must start with '~/' or '/' and not contain '..'")
        return value


class Limits(Model):
    """The operator's ``[limits]`` table: how many agent tasks may run at once across the fleet.

    ``per_repo``: tasks of one repository (its forge identity for a PR URL, its path for a local one);
    None: no limit. ``per_model``: a shell-style pattern (``fnmatch``, case-insensitive) -> the tasks at
    once of every agent whose model it matches (``workers/isolation/limits.py`` says what a pattern is matched
    against). A task that finds a slot full is put back with a short countdown, never waits in its slot.
    """

    per_repo: int | None = Field(default=None, ge=1)
    per_model: dict[str, int] = Field(default_factory=dict)

    @field_validator("per_model")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        for pattern, n in value.items():
            if not pattern.strip() or n < 1:
                raise ValueError(f"{pattern!r}: a non-empty pattern and a limit >= 1")
        return value


SANDBOX_OFF_NOTE = "sandbox off: the reviewed code ran unconfined"


class JuryConfig(Model):
    reviewers: list[str]
    judge: str
    rounds: int = 10
    agents: dict[str, AgentSpec]
    timeout: float | None = None  # overrides every agent's default timeout
    push: bool = False
    # Publish the run to its PR when it ends (``jury review --publish``, ``jury sweep --publish``): a log
    # written before the option existed reads as False.
    publish: bool = False
    alive_every: float = 30.0
    max_triage: int = 2  # triage attempts per finding before it is left to a human
    max_contests: int = 3
    max_stale: int = 2  # re-triages of a patch that no longer applies before it is deferred
    max_reopens: int = 3  # reopenings (failed verification, refutation, stale patch) before deferral
    verify: bool = True  # run the judge's test_command with and without the fix before accepting
    refute: bool = False  # give settled claims a second opinion
    refuter: str | None = None  # its agent; None with refute on: recorded as asked but not run
    refuter_forced: bool = False  # chosen by the user: reported, even when not independent
    refute_rejections: bool = False
    checks: dict[str, str] = Field(default_factory=dict)  # declared commands, e.g. {"test": "pytest -q"}
    task: str | None = None  # the user's task text (--task): commands named there are signals
    budget: float | None = None  # USD ceiling for the run; None: no ceiling
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    limits: Limits = Field(default_factory=Limits)  # the operator's [limits]: fleet-wide slots
    # What the configuration loader set aside and why, shown in the record and every summary: keys of an
    # untrusted repository's jury.toml that were ignored, a PR that changed jury.toml (never applied).
    config_notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _sandbox_off(self) -> JuryConfig:
        # Said wherever the configuration goes (the record's jury.config, every summary), once.
        if self.sandbox.mode == "none" and SANDBOX_OFF_NOTE not in self.config_notes:
            self.config_notes.append(SANDBOX_OFF_NOTE)
        return self


DEFAULT_TIMEOUT = 600.0  # seconds: a command run for no agent (checks, a verification), and an agent's least


def agent_timeout(run_timeout: float | None, spec: AgentSpec | None = None) -> float:
    """The wall clock, in seconds, of one agent run (``spec``) or of a command run for none (``spec``
    None: declared checks, a fix's verification, a regression test re-run), killed past it.

    The one resolver, in precedence order: the run's own ``timeout`` (``--timeout`` of ``jury review``,
    ``jury sweep`` or ``jury refute``, kept in the run's ``JuryConfig.timeout``), else the agent's from
    its configuration (three times its ``expect_seconds``, never under ``DEFAULT_TIMEOUT``: an agent's
    expected time is a typical run, not a worst one), else ``DEFAULT_TIMEOUT``. A ``run_timeout`` of
    zero or less is no timeout asked for (the options refuse one: ``orchestrator.start.check_options``).
    """
    if run_timeout is not None and run_timeout > 0:
        return float(run_timeout)
    if spec is not None:
        return max(DEFAULT_TIMEOUT, 3 * spec.expect_seconds)
    return DEFAULT_TIMEOUT
