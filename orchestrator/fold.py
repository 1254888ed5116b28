"""Events -> run state. Pure: the same events always fold to the same state.

Events are folded in log order; an event whose ``eid`` was already folded is skipped, so a duplicated
append changes nothing. ``orchestrator.run_json`` exports the state in codejury's ``run.json`` shape,
with Jury's full state under the ``jury`` key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import Field

from orchestrator.domain import (
    EVENT_ADAPTER,
    ActionDeferred,
    ActionDispatched,
    ActionDone,
    AgentAlive,
    AgentLaunch,
    AgentReport,
    AgentWrote,
    BudgetRefused,
    BudgetReserved,
    BudgetSpent,
    CarriedItem,
    CommitPushed,
    Contest,
    Event,
    FindingRaised,
    FindingRefused,
    FindingReopened,
    FindingReproduced,
    FindingResolved,
    FindingTurn,
    JudgeSession,
    JuryConfigEvent,
    RefuteSkipped,
    RefuteVerdict,
    ReplyAnswered,
    ReplySent,
    RoundEnd,
    RoundStart,
    RunCancel,
    RunCarried,
    RunPublished,
    RunResumed,
    TargetEvent,
    ToolRefused,
    UnknownEvent,
    VerifyRan,
    VerifyTable,
)
from orchestrator.refute.record import RefutationRecord
from orchestrator.spec import JuryConfig, Model, Target

# Bumped whenever ``apply`` or the state's shape changes: a snapshot folded by another version is not
# trusted, and the state is folded again from the whole log (the log stays the only truth).
FOLD_VERSION = 8  # 8: events of an unknown kind are counted (unknown_events), no longer dropped on read

FindingStatus = Literal["open", "accepted", "rejected", "deferred", "superseded"]


class Turn(Model):
    who: str
    agent: str
    text: str


class FindingState(Model):
    id: str
    round: int
    agent: str
    claim: str
    loc: str
    body: str = ""
    status: FindingStatus = "open"
    reason: str = ""
    who: str | None = None
    test: str | None = None
    test_command: str | None = None
    reproduced: bool = False
    evidence: str | None = None
    patch: str | None = None
    sha: str | None = None
    refusals: list[str] = Field(default_factory=list)
    refused_since_open: int = 0  # refusals since the finding was last (re)opened
    triages: int = 0  # triage actions dispatched for it
    contests: int = 0
    turns: list[Turn] = Field(default_factory=list)
    version: int = 0  # bumped at every resolution
    told: int = 0  # the version its reviewer was last told about
    judging: bool = False  # a judge is working on it now
    reopens: list[str] = Field(default_factory=list)  # why it went back to the judge, each time
    stale: int = 0  # times its patch no longer applied to the run's tree
    verification: list[dict[str, Any]] = Field(default_factory=list)  # verify.ran of its last acceptance
    trunk_runs: list[dict[str, Any]] = Field(default_factory=list)  # its test re-run on trunk (jury verify)
    verification_table: dict[str, Any] | None = None  # verify.table of its last acceptance
    refutation: RefutationRecord | None = None  # the three-state second opinion of its last resolution
    cost_usd: float = 0.0

    @property
    def integrated(self) -> bool:
        return self.sha is not None


class RoundSeat(Model):
    """A reviewer's seat in a round: its one review there and how it ended (named "seat" to keep
    "slot" for a [limits] place, docs/glossary.md)."""

    agent: str
    state: Literal["queued", "running", "clean", "found", "error"] = "queued"
    seconds: float = 0.0
    quiet_seconds: float = 0.0
    summary: str = ""
    report: str = ""
    session_id: str | None = None
    raw_file: str | None = None
    error: str | None = None
    launched_at: str | None = None
    reported_at: str | None = None
    wrote: list[str] = Field(default_factory=list)


class RoundState(Model):
    n: int
    sha: str
    prompt: str
    prompt_file: str | None = None
    started_at: str
    ended: bool = False
    agents: dict[str, RoundSeat] = Field(default_factory=dict)


class ReplyState(Model):
    round: int
    agent: str
    findings: list[str] = Field(default_factory=list)
    resumed: bool = False
    verdict: Literal["pending", "clean", "contested", "error"] = "pending"
    contests: list[Contest] = Field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None


class DispatchedAction(Model):
    """An action as the fold knows it: what ``action.dispatched`` said, and whether it is done."""

    key: str
    kind: str
    round: int
    epoch: int = 0
    agent: str | None = None
    finding: str | None = None
    findings: list[str] = Field(default_factory=list)
    sha: str | None = None
    done: bool = False
    ok: bool = True
    backoffs: int = 0  # times a model sent it back (rate-limit): its next attempt's number
    launches: int = 0  # its agent's launches: more than one per attempt when a worker died running it
    deferred: str | None = None  # why it waits, put back with a countdown (a slot, a rate limit)


class CommitInfo(Model):
    sha: str
    subject: str
    pushed: bool = False
    branch: str | None = None
    finding: str | None = None


class RunState(Model):
    slug: str
    target: Target = Field(default_factory=Target)
    config: JuryConfig | None = None
    epoch: int = 0
    rounds: list[RoundState] = Field(default_factory=list)
    findings: dict[str, FindingState] = Field(default_factory=dict)
    replies: list[ReplyState] = Field(default_factory=list)
    actions: dict[str, DispatchedAction] = Field(default_factory=dict)
    sessions: dict[str, str] = Field(default_factory=dict)  # reviewer -> its CLI session id
    session_hosts: dict[str, str] = Field(default_factory=dict)  # reviewer -> the host holding it
    judge_session: str | None = None
    commits: list[CommitInfo] = Field(default_factory=list)
    spent: dict[str, float] = Field(default_factory=dict)  # agent -> USD known spent
    reserved: dict[str, float] = Field(default_factory=dict)  # action key -> USD reserved, not reconciled
    unknown_costs: int = 0  # calls whose cost is unknown (never counted as zero)
    budget_refused: str | None = None
    cancel_requested: bool = False
    cancel_reason: str | None = None  # why, when not the user's word (a sweep superseding the run)
    tool_refusals: list[dict[str, Any]] = Field(default_factory=list)  # tools refused to http agents
    # The second opinion on the converged claim. Its wire name stays ``finalCheck`` (run.json, the console,
    # ``jury show --json``); "check" is a declared command or the published check (docs/glossary.md).
    final_refutation: RefutationRecord | None = Field(default=None, alias="finalCheck")
    published: list[dict[str, Any]] = Field(default_factory=list)  # run.published, oldest first
    carried: list[CarriedItem] = Field(default_factory=list)  # settled by an earlier run of the PR
    carried_from: str | None = None  # that run's slug
    events: int = 0
    # Events of a kind this release does not know, by ``t``: folded as nothing, reported (``jury show``).
    unknown_events: dict[str, int] = Field(default_factory=dict)
    first_ts: str | None = None
    last_ts: str | None = None
    seen: set[str] = Field(default_factory=set, exclude=True)

    @property
    def state(self) -> str:
        return self.target.state or "queued"

    @property
    def tip(self) -> str | None:
        """The tree reviewers see now: the PR head plus every accepted fix."""
        return self.commits[-1].sha if self.commits else self.target.head

    @property
    def current(self) -> RoundState | None:
        return self.rounds[-1] if self.rounds else None

    def round(self, n: int) -> RoundState | None:
        for r in self.rounds:
            if r.n == n:
                return r
        return None

    def inflight(self) -> list[DispatchedAction]:
        return [a for a in self.actions.values() if not a.done]

    def open_findings(self) -> list[FindingState]:
        return [f for f in self.findings.values() if f.status == "open"]

    @property
    def total_spent(self) -> float:
        return round(sum(self.spent.values()), 6)


def fold(events: Iterable[Event], slug: str = "") -> RunState:
    state = RunState(slug=slug)
    for event in events:
        apply(state, event)
    return state


def _kinds_fingerprint() -> str:
    """A digest of every event kind this code knows: a snapshot written by code that knew other kinds
    (an event type added or removed without a version bump) is not trusted either."""
    schema = EVENT_ADAPTER.json_schema()
    kinds = sorted(schema.get("discriminator", {}).get("mapping", {}))
    return hashlib.sha256("\n".join(kinds).encode()).hexdigest()[:16]


KINDS = _kinds_fingerprint()


def snapshot(state: RunState, position: str, origin: str | None) -> dict[str, Any]:
    """The fold of a run's log up to ``position`` (a store's log position), as JSON: what the coordinator
    keeps beside the log so its next pass folds only the events after ``position``. ``origin`` is the
    log's id (``LiveStore.origin``): a log deleted and begun again does not match the snapshot.

    The eids folded (``seen``) are left out, so the snapshot's size does not grow with the log: the
    stores deduplicate by eid, so no event after ``position`` repeats one before it."""
    return {
        "version": FOLD_VERSION,
        "kinds": KINDS,
        "position": position,
        "origin": origin,
        "state": state.model_dump(mode="json"),
    }


def restore(doc: dict[str, Any] | None, origin: str | None) -> tuple[RunState, str] | None:
    """The state and log position of a snapshot, or None when it cannot be trusted: absent, another fold
    version or set of event kinds, another log (``origin``), or a body that does not validate."""
    if not isinstance(doc, dict) or doc.get("version") != FOLD_VERSION or doc.get("kinds") != KINDS:
        return None
    position = doc.get("position")
    if origin is None or doc.get("origin") != origin or not isinstance(position, str) or not position:
        return None
    try:
        return RunState.model_validate(doc.get("state")), position
    except ValueError:
        return None


def apply(s: RunState, e: Event) -> None:
    """Fold one event into ``s`` in place (skipping one already folded), by its kind's handler (``_APPLY``).

    Every event kind has its handler (tests/unit/test_fold_exhaustive.py): an event without one is a clear
    error rather than an event silently ignored."""
    if e.eid in s.seen:
        return
    s.seen.add(e.eid)
    s.events += 1
    s.first_ts = s.first_ts or e.ts
    s.last_ts = e.ts
    handler = _APPLY.get(type(e))
    if handler is None:
        kind = getattr(e, "t", type(e).__name__)
        raise TypeError(f"fold.apply has no case for the event kind {kind!r}")
    handler(s, e)


# --- one handler per event kind ----------------------------------------------------------------------


def _target(s: RunState, e: TargetEvent) -> None:
    s.target = s.target.model_copy(update=e.target.model_dump(exclude_unset=True))


def _config(s: RunState, e: JuryConfigEvent) -> None:
    s.config = e.config


def _carried(s: RunState, e: RunCarried) -> None:
    s.carried, s.carried_from = list(e.items), e.from_run


def _round_start(s: RunState, e: RoundStart) -> None:
    if s.round(e.n) is None:
        s.rounds.append(
            RoundState(n=e.n, sha=e.sha, prompt=e.prompt, prompt_file=e.prompt_file, started_at=e.ts)
        )


def _round_end(s: RunState, e: RoundEnd) -> None:
    if (r := s.round(e.n)) is not None:
        r.ended = True


def _dispatched(s: RunState, e: ActionDispatched) -> None:
    s.actions[e.key] = DispatchedAction.model_validate(e.model_dump(exclude={"eid", "ts", "t"}))
    if e.kind == "triage" and e.finding in s.findings:
        s.findings[e.finding].triages += 1
        s.findings[e.finding].judging = True


def _done(s: RunState, e: ActionDone) -> None:
    if (a := s.actions.get(e.key)) is not None:
        a.done, a.ok = True, e.ok
        if a.kind == "triage" and a.finding in s.findings:
            s.findings[a.finding].judging = False


def _deferred(s: RunState, e: ActionDeferred) -> None:
    if (a := s.actions.get(e.key)) is not None:
        a.backoffs += e.reason == "rate-limit"
        a.deferred = f"{e.reason}: {e.note}" if e.note else e.reason


def _launch(s: RunState, e: AgentLaunch) -> None:
    if e.key is not None and (a := s.actions.get(e.key)) is not None:
        a.deferred = None  # it runs now
        a.launches += 1
    if e.role == "reviewer" and (r := s.round(e.round)) is not None:
        launched = r.agents.setdefault(e.agent, RoundSeat(agent=e.agent))
        launched.state, launched.launched_at = "running", e.ts


def _wrote(s: RunState, e: AgentWrote) -> None:
    if (r := s.round(e.round)) is not None and (seat := r.agents.get(e.agent)) is not None:
        seat.wrote = sorted(set(seat.wrote) | set(e.paths))


def _raised(s: RunState, e: FindingRaised) -> None:
    if e.id not in s.findings:
        s.findings[e.id] = FindingState(
            id=e.id, round=e.round, agent=e.agent, claim=e.claim, loc=e.loc, body=e.body
        )


def _reproduced(s: RunState, e: FindingReproduced) -> None:
    if (f := s.findings.get(e.id)) is not None:
        f.reproduced, f.evidence = True, e.evidence or f.evidence


def _resolved(s: RunState, e: FindingResolved) -> None:
    if (f := s.findings.get(e.id)) is not None:
        f.status, f.reason, f.who = e.verdict, e.reason, e.who
        f.test, f.test_command = e.test or f.test, e.test_command or f.test_command
        f.patch, f.sha = e.patch or f.patch, e.sha or f.sha
        f.version += 1
        if e.who != "jury":  # the judge's new answer gets fresh proof; a jury deferral keeps the last
            f.verification, f.refutation, f.verification_table = [], None, None


def _refused(s: RunState, e: FindingRefused) -> None:
    if (f := s.findings.get(e.id)) is not None:
        f.refusals.append(e.reason)
        f.refused_since_open += 1


def _reopened(s: RunState, e: FindingReopened) -> None:
    if (f := s.findings.get(e.id)) is not None:
        f.status, f.reason, f.who = "open", e.reason, e.who
        f.reopens.append(f"{e.source}: {e.reason}")
        f.stale += e.source == "integration"
        f.patch = f.sha = None
        f.refused_since_open = 0


def _verify_ran(s: RunState, e: VerifyRan) -> None:
    if e.id is not None and (f := s.findings.get(e.id)) is not None:
        run = {k: v for k, v in e.wire().items() if k not in ("eid", "t")}
        (f.trunk_runs if e.trunk is not None else f.verification).append(run)


def _verify_table(s: RunState, e: VerifyTable) -> None:
    if (f := s.findings.get(e.id)) is not None:
        f.verification_table = {k: v for k, v in e.wire().items() if k not in ("eid", "t", "ts", "id")}


def _refutation(s: RunState, e: RefuteVerdict | RefuteSkipped) -> None:
    if e.id is None:
        s.final_refutation = e.record()
    elif (f := s.findings.get(e.id)) is not None:
        f.refutation = e.record()


def _reserved(s: RunState, e: BudgetReserved) -> None:
    s.reserved[e.key] = e.amount


def _spent(s: RunState, e: BudgetSpent) -> None:
    s.reserved.pop(e.key, None)
    charge = e.amount if e.amount is not None else e.charged
    if e.amount is None:
        s.unknown_costs += 1
    if charge:
        s.spent[e.agent] = round(s.spent.get(e.agent, 0.0) + charge, 6)
        if e.finding and (f := s.findings.get(e.finding)) is not None:
            f.cost_usd = round(f.cost_usd + charge, 6)


def _budget_refused(s: RunState, e: BudgetRefused) -> None:
    s.budget_refused = e.reason


def _cancel(s: RunState, e: RunCancel) -> None:
    s.cancel_requested = True
    s.cancel_reason = s.cancel_reason or e.reason


def _published(s: RunState, e: RunPublished) -> None:
    s.published.append({k: v for k, v in e.wire().items() if k not in ("eid", "t")})


def _tool_refused(s: RunState, e: ToolRefused) -> None:
    s.tool_refusals.append(
        {"agent": e.agent, "role": e.role, "tool": e.tool, "reason": e.reason, "key": e.key}
    )


def _judge_session(s: RunState, e: JudgeSession) -> None:
    s.judge_session = e.session_id


def _commit(s: RunState, e: CommitPushed) -> None:
    if e.finding and not e.pushed and (f := s.findings.get(e.finding)) is not None:
        f.sha = e.sha  # the fix is integrated
    if not any(c.sha == e.sha and c.pushed == e.pushed for c in s.commits):
        s.commits.append(
            CommitInfo(sha=e.sha, subject=e.subject, pushed=e.pushed, branch=e.branch, finding=e.finding)
        )


def _reply_sent(s: RunState, e: ReplySent) -> None:
    s.replies.append(ReplyState(round=e.round, agent=e.agent, findings=e.findings, resumed=e.resumed))
    for fid in e.findings:
        if (f := s.findings.get(fid)) is not None:
            f.told = f.version


def _reply_answered(s: RunState, e: ReplyAnswered) -> None:
    for reply in reversed(s.replies):
        if reply.agent == e.agent and reply.round == e.round and reply.verdict == "pending":
            reply.verdict, reply.contests = e.verdict, e.contests
            reply.seconds, reply.error = e.seconds, e.error
            break


def tick(s: RunState, e: AgentAlive) -> None:
    """Show a running agent's latest liveness tick: how long it has run, how long it has been quiet.

    Ticks are kept beside the log (``LiveStore.alive``), not in it, so whoever shows a run lays them over
    its fold with this; a tick changes only a seat still running, so a stale one never hides a report.
    """
    if (r := s.round(e.round)) is not None and (seat := r.agents.get(e.agent)) is not None:
        if seat.state == "running":
            seat.seconds, seat.quiet_seconds = e.seconds, e.quiet_seconds


def _report(s: RunState, e: AgentReport) -> None:
    if e.role != "reviewer":
        return
    r = s.round(e.round)
    if r is None:
        return
    seat = r.agents.setdefault(e.agent, RoundSeat(agent=e.agent))
    seat.state = e.verdict
    seat.seconds, seat.summary, seat.report = e.seconds, e.summary, e.report
    seat.raw_file, seat.error, seat.reported_at = e.raw_file, e.error, e.ts
    if e.session_id:
        seat.session_id = e.session_id
        s.sessions[e.agent] = e.session_id
        if e.host:
            s.session_hosts[e.agent] = e.host
        else:
            s.session_hosts.pop(e.agent, None)


def _turn(s: RunState, e: FindingTurn) -> None:
    f = s.findings.get(e.id)
    if f is None:
        return
    f.turns.append(Turn(who=e.who, agent=e.agent, text=e.text))
    limit = s.config.max_contests if s.config else 3
    # A contest by the finding's own reviewer reopens a settled finding, until the limit: then decide
    # defers it for good and later contests are only recorded.
    if e.who == f.agent and f.status in ("rejected", "deferred") and f.contests < limit:
        f.contests += 1
        f.status = "open"
        f.refused_since_open = 0


def _resume(s: RunState, e: RunResumed) -> None:
    s.epoch = max(s.epoch, e.epoch)
    # A cancelled run that is resumed runs again: the cancel before the resume is spent (a cancel after it
    # is a new one). Without this, the resumed run ended "cancelled" again at its first coordinate pass.
    s.cancel_requested, s.cancel_reason = False, None
    # Work that was in flight when the run stopped is lost: forget it so decide dispatches it again.
    for key in [k for k, a in s.actions.items() if not a.done]:
        del s.actions[key]
    for f in s.findings.values():
        f.judging = False
        if f.status == "open":
            f.refused_since_open = 0
    if (r := s.current) is not None and not r.ended:
        for name in [a for a, seat in r.agents.items() if seat.state in ("error", "running", "queued")]:
            del r.agents[name]


def _unknown(s: RunState, e: UnknownEvent) -> None:
    """A newer release's (or a foreign writer's) event: nothing to fold but its count."""
    s.unknown_events[e.t] = s.unknown_events.get(e.t, 0) + 1


# Each event kind's handler: ``apply`` looks the event's own class up (one dict lookup, where a ``match``
# tried the kinds one by one).
_APPLY: dict[type[Any], Callable[[RunState, Any], None]] = {
    TargetEvent: _target,
    JuryConfigEvent: _config,
    RunResumed: _resume,
    RunCarried: _carried,
    RoundStart: _round_start,
    RoundEnd: _round_end,
    ActionDispatched: _dispatched,
    ActionDone: _done,
    ActionDeferred: _deferred,
    AgentLaunch: _launch,
    AgentAlive: tick,  # logs written before ticks were kept beside the log hold them
    AgentReport: _report,
    AgentWrote: _wrote,
    FindingRaised: _raised,
    FindingReproduced: _reproduced,
    FindingResolved: _resolved,
    FindingRefused: _refused,
    FindingTurn: _turn,
    FindingReopened: _reopened,
    VerifyRan: _verify_ran,
    VerifyTable: _verify_table,
    RefuteVerdict: _refutation,
    RefuteSkipped: _refutation,
    BudgetReserved: _reserved,
    BudgetSpent: _spent,
    BudgetRefused: _budget_refused,
    RunCancel: _cancel,
    RunPublished: _published,
    ToolRefused: _tool_refused,
    JudgeSession: _judge_session,
    CommitPushed: _commit,
    ReplySent: _reply_sent,
    ReplyAnswered: _reply_answered,
    UnknownEvent: _unknown,
}
