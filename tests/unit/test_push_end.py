"""decide at the end of a run started with ``--push``: the push, a push that did not happen, a resume.

A push that did not happen is a failure of the run (``failed``), not a question for a human about a
finding: the fixes are on ``jury/<slug>``, and a resumed run pushes them again.
"""

from __future__ import annotations

from orchestrator.decide import Emit, decide
from orchestrator.domain import (
    ActionDispatched,
    ActionDone,
    AgentReport,
    CommitPushed,
    Event,
    JuryConfigEvent,
    RoundEnd,
    RoundStart,
    RunResumed,
    TargetEvent,
)
from orchestrator.fold import fold
from orchestrator.spec import AgentSpec, JuryConfig, Target

SLUG = "repo-feat-1"
SPEC = AgentSpec(name="x", argv=["x", "{prompt}"], judge_argv=["x", "{prompt}"])


def clean_run(push: bool = True) -> list[Event]:
    """One round, its reviewer clean, one fix integrated (commit c1 on jury/<slug>)."""
    key = "review:r1:a"
    cfg = JuryConfig(reviewers=["a"], judge="j", agents={"a": SPEC, "j": SPEC}, push=push)
    return [
        TargetEvent(eid="target:0", target=Target(repo="r", branch="feat", state="review", head="h0")),
        JuryConfigEvent(eid="config:0", config=cfg),
        RoundStart(eid="round.start:1", n=1, sha="h0", prompt="p"),
        ActionDispatched(eid=f"dispatch:{key}", key=key, kind="review", round=1, agent="a"),
        AgentReport(eid=f"{key}:report", agent="a", round=1, verdict="clean", seconds=1.0),
        ActionDone(eid=f"{key}:done", key=key),
        CommitPushed(eid="integrate:f1", sha="c1", subject="fix", branch=f"jury/{SLUG}", finding=None),
        RoundEnd(eid="round.end:1", n=1),
    ]


def pushed(key: str, ok: bool) -> list[Event]:
    return [
        ActionDispatched(eid=f"dispatch:{key}", key=key, kind="push", round=1, sha="c1"),
        ActionDone(eid=f"{key}:done", key=key, ok=ok),
    ]


def keys_of(actions: list) -> list[str]:
    return [a.key for a in actions if not isinstance(a, Emit)]


def ended(actions: list) -> tuple[str | None, str | None]:
    (only,) = actions
    assert isinstance(only, Emit) and isinstance(only.event, TargetEvent)
    return only.event.target.state, only.event.target.state_note


def test_a_clean_run_with_push_pushes_then_converges() -> None:
    assert keys_of(decide(fold(clean_run(), SLUG))) == ["push:c1"]
    events = [*clean_run(), *pushed("push:c1", ok=True)]
    events.append(CommitPushed(eid="push:c1:pushed", sha="c1", pushed=True, subject="pushed", branch="feat"))
    assert ended(decide(fold(events, SLUG)))[0] == "converged"


def test_a_push_that_did_not_happen_fails_the_run_and_says_where_the_fixes_are() -> None:
    state, note = ended(decide(fold([*clean_run(), *pushed("push:c1", ok=False)], SLUG)))
    assert state == "failed"
    assert note == f"the fixes could not be pushed to feat; they are on jury/{SLUG}"


def test_a_resumed_run_pushes_again() -> None:
    events = [*clean_run(), *pushed("push:c1", ok=False)]
    events.append(TargetEvent(eid="end:failed", target=Target(state="failed", state_note="push refused")))
    assert decide(fold(events, SLUG)) == []  # ended: nothing more
    events += [
        RunResumed(eid="resume:1", epoch=1),
        TargetEvent(eid="state:review:e1", target=Target(state="review", state_note=None)),
    ]
    assert keys_of(decide(fold(events, SLUG))) == ["push:c1:e1"]


def test_without_push_nothing_is_pushed() -> None:
    assert ended(decide(fold(clean_run(push=False), SLUG)))[0] == "converged"


def test_fixes_held_back_by_the_push_gate_converge_and_the_end_says_why() -> None:
    """A refused push (a fork's head, orchestrator/pushgate.py) is no failure: the run converges and its
    end note, which the PR's review and check quote, says why the fixes were not pushed."""
    events = [*clean_run(), *pushed("push:c1", ok=True)]
    held = "not pushed: the PR's head is not from the base repository (a fork)"
    events.insert(-1, TargetEvent(eid="push:c1:held", target=Target(push_note=held)))
    state, note = ended(decide(fold(events, SLUG)))
    assert state == "converged"
    assert note == f"all reviewers clean in round 1; 0 fix(es) accepted; {held}"
