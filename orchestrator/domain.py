"""The events of a run, the truth every part of Jury reads (what they carry of the run's target and
configuration is ``orchestrator.spec``).

Events are the truth (docs/architecture.md, "The data path"). Each event has an ``eid`` (a duplicated
append folds once), a ``ts`` (ISO 8601, UTC) and a ``t`` naming its kind; the vocabulary follows
codejury's with a few additions (``jury.config``, ``action.*``, ``finding.refused``, ``agent.wrote``,
``run.resumed``). Fields are snake_case in Python and camelCase on the wire, like codejury's files.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    Field,
    TypeAdapter,
    ValidationError,
)
from pydantic_core import PydanticSerializationError

from orchestrator import jsonsafe
from orchestrator.refute.record import RefutationRecord, RefuteSource
from orchestrator.refute.signals import Signal
from orchestrator.refute.verdicts import ParsedRefutation, RefuteOutcome
from orchestrator.spec import JuryConfig, Model, Target

Role = Literal["reviewer", "judge", "reply", "refuter"]


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
    commits are deterministic, so any host rebuilds the same sha from these (``workers/isolation/mirror.py``)
    and no host needs another's disk. Older logs lack them (None)."""

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
    """A model asked for a tool its role was not offered (or outside its worktree): refused when called
    (``workers.agents.tools.call_tool``)."""

    t: Literal["tool.refused"] = "tool.refused"
    key: str
    agent: str
    tool: str
    role: str
    reason: str


PublishConclusion = Literal["success", "failure", "neutral", "action_required"]


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
    fixes_on_head: bool | None = None  # whether the head holds the accepted fixes (None: none accepted)
    tip: str | None = None  # the pushed fixes' commit, when it got a check of its own
    tip_check_id: str | None = None
    comments: dict[str, int] = Field(default_factory=dict)  # created/updated/unchanged/retired/unplaced
    off_diff: int = 0  # findings whose line is not on the diff: listed in the summary instead
    error: str | None = None


class RunCancel(EventBase):
    t: Literal["run.cancel"] = "run.cancel"
    who: str = "user"
    reason: str | None = None  # the run's end note; None: "cancelled by the user" (a sweep says why)


def cancel_eid(epoch: int, superseded_by: str | None = None) -> str:
    """The id of a run's cancel event: one per epoch of the run (two cancels at once are one, a resumed
    run's cancel is a new one, not the spent one), and for a sweep's, one per run that supersedes it."""
    base = "cancel" if superseded_by is None else f"cancel:superseded:{superseded_by}"
    return base if epoch == 0 else f"{base}:e{epoch}"


class UnknownEvent(EventBase):
    """An event whose ``t`` this release does not know (written by a newer release, or another tool
    writing into the log): kept whole, so it is written back unchanged (its fields are the model's
    extras), folded as nothing but a count (``RunState.unknown_events``), and reported where the run is
    shown, never dropped silently."""

    t: str


KnownEvent = Annotated[
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
Event = KnownEvent | UnknownEvent

EVENT_ADAPTER: TypeAdapter[KnownEvent] = TypeAdapter(KnownEvent)
# Every ``t`` this release knows. Old spellings of a renamed Jury-only ``t`` would be listed in
# ``T_ALIASES`` (old -> new, rewritten before validating); codejury's ``t`` values never change.
KNOWN_T: frozenset[str] = frozenset(
    kind.model_fields["t"].default for kind in get_args(get_args(KnownEvent)[0])
)
T_ALIASES: dict[str, str] = {}


def parse_event(data: dict[str, Any] | str | bytes) -> Event | None:
    """An event from its wire form; an ``UnknownEvent`` for a well-formed event of a ``t`` this release
    does not know; None when it is not an event at all (a torn or foreign line, a known ``t`` with bad
    fields)."""
    try:
        if isinstance(data, str | bytes):
            return EVENT_ADAPTER.validate_json(data)
        return EVENT_ADAPTER.validate_python(data)
    except ValidationError:
        pass
    try:  # not a known event as it stands: an old spelling of one, an unknown kind, or no event
        obj = jsonsafe.loads(data) if isinstance(data, str | bytes) else data
    except (ValueError, RecursionError):  # torn, not UTF-8, nested too deep
        return None
    t = obj.get("t") if isinstance(obj, dict) else None
    if not isinstance(obj, dict) or not isinstance(t, str) or not isinstance(obj.get("eid"), str):
        return None
    try:
        if t in T_ALIASES:
            return EVENT_ADAPTER.validate_python({**obj, "t": T_ALIASES[t]})
        return None if t in KNOWN_T else UnknownEvent.model_validate(obj)
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
        cleaned = parse_event(_SURROGATES.sub("\ufffd", wire))
        if cleaned is None:  # cannot be: the same fields, with U+FFFD for each lone surrogate
            raise
        return dump_event(cleaned)
