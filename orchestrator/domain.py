"""Pydantic types shared by every part of Jury: the agent spec, the target, and the events.

Events are the truth (docs/architecture.md, "The data path"). Each event has an ``eid`` (a duplicated
append folds once), a ``ts`` (ISO 8601, UTC) and a ``t`` naming its kind; the vocabulary follows
codejury's with a few additions (``jury.config``, ``action.*``, ``finding.refused``, ``agent.wrote``,
``run.resumed``). Fields are snake_case in Python and camelCase on the wire, like codejury's files.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticSerializationError

from orchestrator.agent_kinds import AgentKind  # the names of the agent-kind registry
from orchestrator.refute.families import spec_family
from orchestrator.refute.record import RefutationRecord, RefuteSource
from orchestrator.refute.signals import Signal
from orchestrator.refute.verdicts import ParsedRefutation, RefuteOutcome

RunStateName = Literal["queued", "review", "converged", "human", "failed", "cancelled"]
TERMINAL_STATES: frozenset[str] = frozenset({"converged", "human", "failed", "cancelled"})
ReportFormat = Literal["whole", "tail", "result-json", "opencode-json", "stream-json", "codex-json"]
Role = Literal["reviewer", "judge", "reply", "refuter"]


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
    kind: AgentKind = "cli"
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
    install: str | None = None
    # Directories (``~/`` is the worker's HOME) the agent keeps its own state in; inside the sandbox they
    # are the only parts of HOME it sees, read-write (e.g. ``["~/.codex"]``).
    state_dirs: list[str] = Field(default_factory=list)
    usd_per_minute: float | None = None  # what a minute of this agent costs when it reports no cost
    # http agents
    base_url: str | None = None
    api_key_env: str | None = None  # the NAME of the variable holding the key, never the key
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
    def can_judge(self) -> bool:
        """A CLI agent judges through its ``judge_argv``; an http agent always can; a check never."""
        if self.kind == "http":
            return True
        if self.kind == "check":
            return False
        return self.judge_argv is not None

    def default_timeout(self) -> float:
        return max(600.0, 3 * self.expect_seconds)


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
    once of every agent whose model it matches (``workers/limits.py`` says what a pattern is matched
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


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class EventBase(Model):
    eid: str  # the event's own id: deterministic per action, so a duplicated append folds once
    ts: str = Field(default_factory=now_iso)


class TargetEvent(EventBase):
    t: Literal["target"] = "target"
    target: Target


class JuryConfigEvent(EventBase):
    t: Literal["jury.config"] = "jury.config"
    config: JuryConfig


class RunResumed(EventBase):
    t: Literal["run.resumed"] = "run.resumed"
    epoch: int
    note: str | None = None


class CarriedItem(Model):
    """A finding an earlier run of the same PR settled, as a later run is told about it."""

    id: str  # "<earlier run>:<its finding id>", so it never clashes with the new run's findings
    verdict: str  # accepted | rejected | deferred
    claim: str
    loc: str
    reason: str = ""


class RunCarried(EventBase):
    """The run starts from what an earlier run of the same PR settled (a sweep, after the PR's head moved
    since that run converged): its settled findings and rejected claims, shown to reviewers as settled."""

    t: Literal["run.carried"] = "run.carried"
    from_run: str  # the earlier run's slug
    from_head: str | None = None  # the head it reviewed
    items: list[CarriedItem] = Field(default_factory=list)


class RoundStart(EventBase):
    t: Literal["round.start"] = "round.start"
    n: int
    sha: str
    prompt: str
    prompt_file: str | None = None


class RoundEnd(EventBase):
    t: Literal["round.end"] = "round.end"
    n: int


class ActionDispatched(EventBase):
    """An action handed to a worker. The task reads its parameters back from here by key.

    ``kind`` is a name of ``orchestrator.actions.ACTIONS``, checked where the action is made (``decide``)
    and where it runs (its task); here any name folds, so a log holding a kind this release does not
    know can still be read.
    """

    t: Literal["action.dispatched"] = "action.dispatched"
    key: str
    kind: str
    round: int
    epoch: int = 0
    agent: str | None = None
    finding: str | None = None
    findings: list[str] = Field(default_factory=list)
    sha: str | None = None


class ActionDone(EventBase):
    t: Literal["action.done"] = "action.done"
    key: str
    ok: bool = True


class ActionDeferred(EventBase):
    """An action put back with a countdown instead of waiting in a worker slot: its limit's slots were
    full (``slot``), or its model asked it to come back later (``rate-limit``: an HTTP 429 whose
    Retry-After is longer than a worker should sleep). Not a failure: the action runs again from the
    start once its task comes back, and nothing it did before counts as done."""

    t: Literal["action.deferred"] = "action.deferred"
    key: str
    reason: Literal["slot", "rate-limit"]
    seconds: float  # the countdown it was put back with
    note: str = ""


class AgentLaunch(EventBase):
    t: Literal["agent.launch"] = "agent.launch"
    agent: str
    round: int
    role: Role = "reviewer"
    key: str | None = None
    finding: str | None = None


class AgentAlive(EventBase):
    t: Literal["agent.alive"] = "agent.alive"
    agent: str
    round: int
    seconds: float
    quiet_seconds: float
    key: str | None = None


class AgentReport(EventBase):
    t: Literal["agent.report"] = "agent.report"
    agent: str
    round: int
    verdict: Literal["clean", "found", "error"]
    seconds: float
    summary: str = ""
    report: str = ""
    session_id: str | None = None
    raw_file: str | None = None
    raw_bytes: int | None = None
    role: Role = "reviewer"
    key: str | None = None
    error: str | None = None
    exit_code: int | None = None
    model: str | None = None  # the model that answered, as far as the runner knows (after any fallback)
    # The host whose agent state (its HOME's state_dirs) holds ``session_id``: a reply elsewhere cannot
    # resume that session and asks afresh.
    host: str | None = None


class AgentWrote(EventBase):
    t: Literal["agent.wrote"] = "agent.wrote"
    agent: str
    round: int
    paths: list[str]


class FindingRaised(EventBase):
    t: Literal["finding.raised"] = "finding.raised"
    id: str  # the finding's id, as in codejury
    round: int
    agent: str
    claim: str
    loc: str
    body: str = ""


class FindingReproduced(EventBase):
    t: Literal["finding.reproduced"] = "finding.reproduced"
    id: str  # the finding's id, as in codejury
    evidence: str = ""
    test: str | None = None
    who: str


class FindingResolved(EventBase):
    t: Literal["finding.resolved"] = "finding.resolved"
    id: str  # the finding's id, as in codejury
    verdict: Literal["accepted", "rejected", "deferred", "superseded"]
    reason: str = ""
    test: str | None = None
    test_command: str | None = None
    who: str
    patch: str | None = None  # artifact name of the accepted fix
    sha: str | None = None  # the commit holding it


class FindingRefused(EventBase):
    """A triage answer Jury would not take: unparseable, or an acceptance without proof."""

    t: Literal["finding.refused"] = "finding.refused"
    id: str  # the finding's id, as in codejury
    reason: str
    who: str
    round: int


class FindingTurn(EventBase):
    t: Literal["finding.turn"] = "finding.turn"
    id: str  # the finding's id, as in codejury
    agent: str
    who: str
    text: str


class JudgeSession(EventBase):
    t: Literal["judge.session"] = "judge.session"
    agent: str
    session_id: str
    round: int


class CommitPushed(EventBase):
    """A fix committed onto the run's tree (``pushed`` False), or the tree pushed (True).

    A commit records what it was made of (``parent``, the ``patch`` artifact, the whole ``message``):
    commits are deterministic, so any host rebuilds the same sha from these (``workers/mirror.py``) and
    no host needs another's disk. Older logs lack them (None)."""

    t: Literal["commit.pushed"] = "commit.pushed"
    sha: str
    pushed: bool = False
    subject: str
    branch: str | None = None
    finding: str | None = None
    parent: str | None = None
    patch: str | None = None
    message: str | None = None


class ReplySent(EventBase):
    t: Literal["reply.sent"] = "reply.sent"
    agent: str
    round: int
    resumed: bool
    session_id: str | None = None
    text: str
    findings: list[str] = Field(default_factory=list)


class Contest(Model):
    id: str
    text: str


class ReplyAnswered(EventBase):
    t: Literal["reply.answered"] = "reply.answered"
    agent: str
    round: int
    verdict: Literal["clean", "contested", "error"]
    seconds: float
    report: str = ""
    contests: list[Contest] = Field(default_factory=list)
    error: str | None = None


class FindingReopened(EventBase):
    """A settled finding goes back to the judge: its patch no longer applies, it failed verification, or
    a second opinion refuted it. ``source`` says which; ``reason`` carries the evidence."""

    t: Literal["finding.reopened"] = "finding.reopened"
    id: str
    reason: str
    who: str
    source: Literal["integration", "verification", "refuter", "jury"] = "jury"


class VerifyRan(EventBase):
    """One mechanical run of a command: the judge's test on the fixed or reverted tree, or a check; or,
    with ``trunk`` set (and ``tree`` "trunk"), an accepted finding's regression test run again later on
    that trunk branch by ``jury verify`` (``sha`` the trunk's commit, ``passed`` what the report said)."""

    t: Literal["verify.ran"] = "verify.ran"
    id: str | None = None  # the finding, when the run verifies one
    command: str
    tree: str
    sha: str | None = None
    exit_code: int | None = None
    seconds: float = 0.0
    output_tail: str = ""
    error: str | None = None
    trunk: str | None = None  # the trunk branch of a re-verification; None: a run of the review itself
    passed: bool | None = None  # a re-verification's verdict (the named tests ran and passed)
    problem: str | None = None  # why a re-verification did not pass


class VerifyTable(EventBase):
    """The whole mechanical verification of one acceptance, as a table: the named tests' outcomes on the
    fixed and the reverted tree, the coverage of the changed lines, the suite on the head and the fixed
    tree with what the fix weakened, the test configuration it changed, and what it all cost."""

    t: Literal["verify.table"] = "verify.table"
    id: str
    ok: bool
    reason: str | None = None
    runner: str | None = None  # pytest, unittest, go ... ; None: a declared check read by its exit code
    tests: list[dict[str, Any]] = Field(default_factory=list)  # {id, fixed, reverted, changed}
    coverage: list[dict[str, Any]] = Field(default_factory=list)  # {path, status, changed, executed, note}
    coverage_note: str | None = None  # "coverage not measured (...)" for runners without coverage
    suite: dict[str, Any] | None = None  # {command, head, fixed, weakened, failingOnHead, note}
    config_changes: list[str] = Field(default_factory=list)
    weakening: list[str] = Field(default_factory=list)
    seconds: float = 0.0  # the whole verification, every run included
    run_seconds: dict[str, float] = Field(default_factory=dict)  # per run: fixed, reverted, suite-head ...


class RefuteVerdict(EventBase):
    """A second opinion that ran on a claim (``source``: ``verification`` needs no model, ``refuter`` is
    one): a ``RefutationRecord`` on the wire, under codejury-style names (``agent``, ``model``)."""

    t: Literal["refute.verdict"] = "refute.verdict"
    id: str | None = None
    outcome: RefuteOutcome
    reason: str
    source: RefuteSource
    agent: str | None = None
    model: str | None = None
    independent: bool | None = None
    signal: Signal | None = None
    cost_usd: float | None = None

    def record(self) -> RefutationRecord:
        if self.source == "verification":
            return RefutationRecord.from_verification(self.outcome == "not_refuted", self.reason, self.signal)
        return RefutationRecord.from_verdict(
            ParsedRefutation(outcome=self.outcome, reason=self.reason),
            cost_usd=self.cost_usd,
            reviewer_model=self.model,
            reviewer_agent=self.agent,
            independent=self.independent,
            signal=self.signal,
        )


class RefuteSkipped(EventBase):
    """A second opinion was asked for but did not run, and why (no signal, already refuted...)."""

    t: Literal["refute.skipped"] = "refute.skipped"
    id: str | None = None
    reason: str
    signal: Signal | None = None

    def record(self) -> RefutationRecord:
        return RefutationRecord.skipped(self.reason, signal=self.signal)


def refutation_event(record: RefutationRecord, *, eid: str, id: str | None) -> RefuteVerdict | RefuteSkipped:
    """The event carrying ``record`` for claim ``id`` (None: the converged claim); ``event.record()``
    gives it back. A second opinion never asked has no event."""
    if not record.asked:
        raise ValueError("a second opinion that was never asked has no event")
    if not record.ran or record.outcome is None or record.source is None:
        return RefuteSkipped(eid=eid, id=id, reason=record.skipped_reason or "", signal=record.signal)
    return RefuteVerdict(
        eid=eid,
        id=id,
        outcome=record.outcome,
        reason=record.reason or "",
        source=record.source,
        agent=record.reviewer_agent,
        model=record.reviewer_model,
        independent=record.independent,
        signal=record.signal,
        cost_usd=record.cost_usd,
    )


class BudgetReserved(EventBase):
    t: Literal["budget.reserved"] = "budget.reserved"
    key: str
    agent: str
    amount: float
    finding: str | None = None


class BudgetSpent(EventBase):
    """What a call cost; ``amount`` None means unknown (never recorded as zero)."""

    t: Literal["budget.spent"] = "budget.spent"
    key: str
    agent: str
    amount: float | None = None
    charged: float | None = None  # what the ledger charged for an unknown cost (usd_per_minute), if any
    finding: str | None = None
    model: str | None = None  # the model the call went to, as far as the runner knows (a worker's metrics)


class BudgetRefused(EventBase):
    t: Literal["budget.refused"] = "budget.refused"
    key: str
    agent: str
    reason: str


class ToolRefused(EventBase):
    """A model asked for a tool its role was not offered (or outside its worktree): refused at dispatch."""

    t: Literal["tool.refused"] = "tool.refused"
    key: str
    agent: str
    tool: str
    role: str
    reason: str


PublishConclusion = Literal["success", "failure", "neutral"]


class RunPublished(EventBase):
    """What publishing an ended run to its PR did: the review and the ``jury`` check it left (ids and
    URLs), or why it failed (``ok`` false, ``error``). ``state`` and ``epoch`` name the end it published;
    ``key`` is the publish action's key, or ``hand:...`` for ``jury publish``. Never holds a token."""

    t: Literal["run.published"] = "run.published"
    key: str
    state: str
    epoch: int = 0
    ok: bool
    conclusion: PublishConclusion | None = None
    forge: str | None = None
    repo: str | None = None
    number: int | None = None
    head: str | None = None
    review_id: str | None = None
    review_url: str | None = None
    review_created: bool | None = None
    check_kind: str | None = None
    check_id: str | None = None
    check_url: str | None = None
    comments: dict[str, int] = Field(default_factory=dict)  # created/updated/unchanged/retired/unplaced
    off_diff: int = 0  # findings whose line is not on the diff: listed in the summary instead
    error: str | None = None


class RunCancel(EventBase):
    t: Literal["run.cancel"] = "run.cancel"
    who: str = "user"
    reason: str | None = None  # the run's end note; None: "cancelled by the user" (a sweep says why)


Event = Annotated[
    TargetEvent
    | JuryConfigEvent
    | RunResumed
    | RunCarried
    | RoundStart
    | RoundEnd
    | ActionDispatched
    | ActionDone
    | ActionDeferred
    | AgentLaunch
    | AgentAlive
    | AgentReport
    | AgentWrote
    | FindingRaised
    | FindingReproduced
    | FindingResolved
    | FindingRefused
    | FindingTurn
    | JudgeSession
    | CommitPushed
    | ReplySent
    | ReplyAnswered
    | FindingReopened
    | VerifyRan
    | VerifyTable
    | RefuteVerdict
    | RefuteSkipped
    | BudgetReserved
    | BudgetSpent
    | BudgetRefused
    | ToolRefused
    | RunPublished
    | RunCancel,
    Field(discriminator="t"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(data: dict[str, Any] | str | bytes) -> Event | None:
    """An event from its wire form, or None when it is not one (a torn or foreign line)."""
    try:
        if isinstance(data, str | bytes):
            return EVENT_ADAPTER.validate_json(data)
        return EVENT_ADAPTER.validate_python(data)
    except ValidationError:
        return None


_SURROGATES = re.compile("[\ud800-\udfff]")


def dump_event(event: Event) -> str:
    """One line of ``events.ndjson``, valid UTF-8: a lone surrogate (a non-UTF-8 file name from git,
    decoded with ``surrogateescape``) is written as U+FFFD, where pydantic refused it and lost the append."""
    try:
        return event.model_dump_json(by_alias=True, exclude_none=True)
    except PydanticSerializationError:
        wire = json.dumps(event.model_dump(mode="json", by_alias=True, exclude_none=True), ensure_ascii=False)
        return dump_event(EVENT_ADAPTER.validate_json(_SURROGATES.sub("\ufffd", wire)))
