"""Run state -> the next actions. Pure.

``decide`` returns either events to append now (``Emit``: a state transition that needs no worker; or
``StartRound``: the facts of a round about to open, whose ``round.start`` event carries the reviewers'
prompt, written outside this module by ``orchestrator.prompts.round_start``), or actions for workers
(``DispatchAction``, of a kind declared in ``orchestrator.actions``). The coordinator appends the emits,
folds again and asks again until only dispatches (or nothing) remain, so each call handles one step of the
loop:

1. every reviewer of the round reports (the barrier: all of them, then look);
2. an agent that could not run, or a report with nothing parseable, ends the run ``human``;
3. duplicate findings are superseded; findings contested too often are deferred;
4. every open finding is triaged by the judge at once, each against the same tip;
5. settled claims get a second opinion (when a refuter is set); accepted fixes are integrated onto the
   tree in the order the findings were raised (a patch that no longer applies reopens its finding);
6. reviewers are told what became of their findings, and may contest (which reopens them);
7. the round ends: all reviewers clean -> converged; round cap -> human; else the next round;
8. an ended run with ``publish`` on is published to its PR, once per end (``publish_due``; what it says
   there is ``orchestrator.publishing``'s).

No words are written here (the ``wordless-core`` import contract): prompts, review bodies and transcripts
are built by their own modules from what ``decide`` returns.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.actions import ActionName
from orchestrator.domain import (
    CarriedItem,
    Event,
    FindingResolved,
    RefuteSkipped,
    RoundEnd,
    TargetEvent,
)
from orchestrator.fold import FindingState, RunState
from orchestrator.parse import same_finding
from orchestrator.spec import TERMINAL_STATES, JuryConfig, Target


class Emit(BaseModel):
    event: Event


class SettledItem(BaseModel):
    """A finding whose outcome is known, as reviewers are told of it (in a round's prompt, in a reply)."""

    model_config = ConfigDict(frozen=True)

    id: str
    verdict: str
    claim: str
    loc: str
    reason: str = ""


class StartRound(BaseModel):
    """Open round ``n`` on ``sha``: what its reviewers are to be told. The ``round.start`` event (with the
    prompt in words) is made from it by ``orchestrator.prompts.round_start``, outside the core."""

    n: int
    sha: str
    repo: str
    branch: str | None
    trunk: str | None
    base: str
    settled: list[SettledItem]
    task: str | None = None
    carried_from: str | None = None


class DispatchAction(BaseModel):
    """Work for a worker: becomes an ``action.dispatched`` event and a task of its kind's queue."""

    kind: ActionName
    key: str
    round: int
    agent: str | None = None
    finding: str | None = None
    findings: list[str] = []
    sha: str | None = None


class Integrate(BaseModel):
    """Commit these accepted fixes onto ``sha``, in this order (the coordinator does it, under the lock)."""

    findings: list[str]
    sha: str


Action = Emit | StartRound | DispatchAction | Integrate


def end(s: RunState, state: Literal["converged", "human", "failed", "cancelled"], reason: str) -> Emit:
    n = s.current.n if s.current else 0
    return Emit(
        event=TargetEvent(eid=f"end:{state}:e{s.epoch}:r{n}", target=Target(state=state, state_note=reason))
    )


def settled_items(s: RunState) -> list[SettledItem]:
    """What reviewers are told is settled: what an earlier run of the PR settled (carried over), then
    this run's own settled findings."""
    return [
        *(
            SettledItem(id=c.id, verdict=c.verdict, claim=c.claim, loc=c.loc, reason=c.reason)
            for c in s.carried
        ),
        *(
            SettledItem(id=f.id, verdict=f.status, claim=f.claim, loc=f.loc, reason=f.reason)
            for f in s.findings.values()
            if f.status in ("accepted", "rejected", "deferred")
        ),
    ]


MAX_CARRIED = 200  # settled findings a run carries over from an earlier one (the newest)


def carry_over(s: RunState) -> list[CarriedItem]:
    """What a later run of the same PR starts from: what ``s`` carried itself, then what it settled (each
    named after ``s``, so ids never clash with the later run's own findings)."""
    own = [
        CarriedItem(id=f"{s.slug}:{f.id}", verdict=f.status, claim=f.claim, loc=f.loc, reason=f.reason)
        for f in s.findings.values()
        if f.status in ("accepted", "rejected", "deferred")
    ]
    return [*s.carried, *own][-MAX_CARRIED:]


def start_round(s: RunState, n: int) -> StartRound:
    t = s.target
    return StartRound(
        n=n,
        sha=s.tip or "",
        repo=t.repo or "",
        branch=t.branch,
        trunk=t.trunk,
        base=t.base or "",
        settled=settled_items(s),
        task=t.title,
        carried_from=s.carried_from,
    )


# --- publishing: when (what it says is ``orchestrator.publishing``'s) ---------------------------------


def publish_key(s: RunState) -> str:
    """The publish action of the run's current end: one per end state and epoch (a resumed run that ends
    again publishes again)."""
    return f"publish:{s.state}:e{s.epoch}"


def wants_publish(s: RunState) -> bool:
    return s.config is not None and s.config.publish and s.state in TERMINAL_STATES


def publish_due(s: RunState) -> bool:
    """The run ended with ``publish`` on and this end has no publish action yet."""
    return wants_publish(s) and publish_key(s) not in s.actions


def awaiting_publish(s: RunState) -> bool:
    """The run ended with ``publish`` on and nothing is recorded yet of publishing this end (the publish
    action's ``run.published``, success or failure): whoever waits for the run waits for that too."""
    if not wants_publish(s):
        return False
    key = publish_key(s)
    return not any(p.get("key") == key for p in s.published)


def _suffix(s: RunState) -> str:
    return f":e{s.epoch}" if s.epoch else ""


def duplicates(s: RunState, n: int) -> list[Emit]:
    """Supersede each open finding of round ``n`` that repeats an earlier one."""
    emits: list[Emit] = []
    earlier: list[FindingState] = []
    for f in s.findings.values():
        if f.status == "superseded":
            continue
        if f.round == n and f.status == "open" and not f.turns:
            twin = next((g for g in earlier if same_finding(f.claim, f.loc, g.claim, g.loc)), None)
            if twin is not None:
                emits.append(
                    Emit(
                        event=FindingResolved(
                            eid=f"dup:{f.id}",
                            id=f.id,
                            verdict="superseded",
                            who="jury",
                            reason=f"duplicate of {twin.id}"
                            + (f" ({twin.status})" if twin.status != "open" else ""),
                        )
                    )
                )
                continue
        earlier.append(f)
    return emits


def settle_limits(s: RunState, cfg: JuryConfig) -> list[Action]:
    """Defer findings that went round too often: contested, reopened, or a patch that keeps going stale."""
    for f in s.open_findings():
        why = None
        if f.contests >= cfg.max_contests:
            why = f"contested {f.contests} times; left for a human. Last word: {f.turns[-1].text}"
        elif f.stale > cfg.max_stale:
            why = f"its fix did not apply to the run's tree {f.stale} times (triaged again {f.stale - 1})"
        elif len(f.reopens) >= cfg.max_reopens:
            why = f"reopened {len(f.reopens)} times; left for a human. Last: {f.reopens[-1]}"
        if why:
            return [
                Emit(
                    event=FindingResolved(
                        eid=f"limit:{f.id}:{f.version}", id=f.id, verdict="deferred", who="jury", reason=why
                    )
                )
            ]
    return []


def second_opinions(s: RunState, cfg: JuryConfig, n: int) -> list[Action] | None:
    """Refute dispatches for settled claims still waiting for one; [] to wait; None when none is due."""
    if not cfg.refute:
        return None
    due = [
        f
        for f in s.findings.values()
        if f.refutation is None
        and (
            (f.status == "accepted" and not f.integrated)
            or (f.status == "rejected" and cfg.refute_rejections)
        )
    ]
    if cfg.refuter is None:
        return [
            Emit(
                event=RefuteSkipped(
                    eid=f"refute-skipped:{f.id}:{f.version}",
                    id=f.id,
                    reason="no refuter of a different family from the judge's; name one with --refuter",
                )
            )
            for f in due
        ] or None
    inflight = {a.finding for a in s.inflight() if a.kind == "refute"}
    actions: list[Action] = [
        DispatchAction(kind="refute", key=key, round=n, agent=cfg.refuter, finding=f.id, sha=s.tip)
        for f in due
        if f.id not in inflight and (key := f"refute:{f.id}:{f.version}") not in s.actions
    ]
    if actions or inflight:
        return actions
    return None


def decide(s: RunState) -> list[Action]:
    cfg = s.config
    if cfg is None:
        return []
    if (outside := _outside_rounds(s)) is not None:
        return outside
    cur = s.current
    if cur is None:
        return [start_round(s, 1)]
    n = cur.n
    # 1. the reviewers of the round (the barrier); 2. an agent that could not run
    if (reviews := _reviews(s, cfg)) is not None:
        return reviews

    # 3. duplicates; findings that went round too often
    if emits := duplicates(s, n):
        return list(emits)
    if limits := settle_limits(s, cfg):
        return limits

    # 4. triage: every open finding at once, each against the same tip
    if (triage := _triage(s, cfg, n)) is not None:
        return triage

    # 5. second opinions on the settled claims, then the accepted fixes onto the tree, in a fixed order
    refutes = second_opinions(s, cfg, n)
    if refutes is not None:
        return list(refutes)
    pending = [f.id for f in s.findings.values() if f.status == "accepted" and not f.integrated]
    if pending:
        return [Integrate(findings=pending, sha=s.tip or "")]

    # 6. replies: tell each reviewer what became of its findings
    if (replies := _replies(s, n)) is not None:
        return replies

    # 7. the round ends
    return _round_end(s, cfg)


def _outside_rounds(s: RunState) -> list[Action] | None:
    """What a run does that is not a round's: publish once ended, end when cancelled or out of budget,
    leave the queue; None when its rounds go on."""
    if s.state in ("converged", "human", "failed", "cancelled"):
        # 8. the run ended: publish it to its PR when asked, once per end
        if publish_due(s):
            n = s.current.n if s.current else 0
            return [DispatchAction(kind="publish", key=publish_key(s), round=n, sha=s.target.head)]
        return []
    if s.cancel_requested:
        return [end(s, "cancelled", s.cancel_reason or "cancelled by the user")]
    if s.budget_refused:
        return [end(s, "human", f"budget exhausted: {s.budget_refused}; spent ${s.total_spent:.4f}")]
    if s.state == "queued":
        return [Emit(event=TargetEvent(eid=f"state:review:e{s.epoch}", target=Target(state="review")))]
    return None


def _reviews(s: RunState, cfg: JuryConfig) -> list[Action] | None:
    """The round's reviews still to dispatch (none while they run: the barrier), or the run's end when a
    reviewer could not run; None once every reviewer reported."""
    cur = s.current
    assert cur is not None
    n = cur.n
    missing = [
        a for a in cfg.reviewers if cur.agents.get(a) is None or cur.agents[a].state in ("queued", "running")
    ]
    if missing:
        return [
            DispatchAction(kind="review", key=key, round=n, agent=a, sha=cur.sha)
            for a in missing
            if (key := f"review:r{n}:{a}{_suffix(s)}") not in s.actions
        ]
    for a in cfg.reviewers:
        seat = cur.agents[a]
        if seat.state == "error":
            return [end(s, "human", f"reviewer {a} could not run in round {n}: {seat.error or 'error'}")]
    return None


def _triage(s: RunState, cfg: JuryConfig, n: int) -> list[Action] | None:
    """A triage for each open finding not being judged (none while any is: wait), or the run's end for a
    finding triage keeps refusing; None when no finding is open."""
    judging = {a.finding for a in s.inflight() if a.kind == "triage"}
    for f in s.open_findings():
        if f.refused_since_open >= cfg.max_triage:
            return [
                end(
                    s,
                    "human",
                    f"finding {f.id} is still open after {f.refused_since_open} triage "
                    f"attempts: {f.refusals[-1]}",
                )
            ]
    fresh = [f for f in s.open_findings() if f.id not in judging]
    if fresh:
        return [
            DispatchAction(
                kind="triage",
                key=f"triage:{f.id}:{f.triages + 1}",
                round=n,
                agent=cfg.judge,
                finding=f.id,
                sha=s.tip,
            )
            for f in fresh
        ]
    if judging:
        return []
    return None


def _replies(s: RunState, n: int) -> list[Action] | None:
    """A reply to each reviewer with findings settled since it was last told (none while one is out);
    None when every reviewer knows."""
    if any(a.kind == "reply" for a in s.inflight()):
        return []
    untold: dict[str, list[str]] = {}
    for f in s.findings.values():
        if f.status in ("accepted", "rejected", "deferred") and f.version > f.told:
            untold.setdefault(f.agent, []).append(f.id)
    if untold:
        sent = {a: sum(1 for r in s.replies if r.agent == a) for a in untold}
        return [
            DispatchAction(
                kind="reply", key=f"reply:{a}:{sent[a] + 1}{_suffix(s)}", round=n, agent=a, findings=fids
            )
            for a, fids in untold.items()
        ]
    return None


def _round_end(s: RunState, cfg: JuryConfig) -> list[Action]:
    """The round's end, then convergence when every reviewer is clean, else the next round (or the end at
    the round cap)."""
    cur = s.current
    assert cur is not None
    n = cur.n
    if not cur.ended:
        return [Emit(event=RoundEnd(eid=f"round.end:{n}", n=n))]
    if all(cur.agents[a].state == "clean" for a in cfg.reviewers):
        return converge(s, cfg, n)
    if n >= cfg.rounds:
        return [end(s, "human", f"round cap reached: {cfg.rounds} round(s) without convergence")]
    return [start_round(s, n + 1)]


def converge(s: RunState, cfg: JuryConfig, n: int) -> list[Action]:
    """Every reviewer is clean: a second opinion on that claim when checks are declared, the push, the end."""
    if cfg.checks and cfg.refute and s.final_refutation is None:
        if cfg.refuter is None:
            return [
                Emit(
                    event=RefuteSkipped(
                        eid=f"refute-skipped:final:{s.tip}",
                        id=None,
                        reason="no refuter of a different family from the judge's; name one with --refuter",
                    )
                )
            ]
        key = f"refute:final:{s.tip}"
        if key in s.actions:
            return []
        return [DispatchAction(kind="refute", key=key, round=n, agent=cfg.refuter, sha=s.tip)]
    if (final := s.final_refutation) and final.outcome == "refuted":
        return [end(s, "human", f"the second opinion refuted the converged claim: {final.reason}")]
    if cfg.push and s.commits and not any(c.pushed for c in s.commits):
        key = f"push:{s.tip}{_suffix(s)}"  # a resumed run pushes again
        if key not in s.actions:
            return [DispatchAction(kind="push", key=key, round=n, sha=s.tip)]
        if not s.actions[key].done:
            return []
        if not s.actions[key].ok:
            where = s.target.branch or f"the forge as jury/{s.slug}"  # a PR URL's own branch
            why = f"the fixes could not be pushed to {where}; they are on jury/{s.slug}"
            return [end(s, "failed", why)]
    fixes = sum(1 for f in s.findings.values() if f.status == "accepted")
    held = f"; {s.target.push_note}" if cfg.push and s.target.push_note else ""  # said on the PR too
    return [end(s, "converged", f"all reviewers clean in round {n}; {fixes} fix(es) accepted{held}")]
