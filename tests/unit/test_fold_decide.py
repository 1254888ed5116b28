"""fold and decide: the loop's rules as tables of event histories and the actions they lead to."""

from __future__ import annotations

import pytest

from orchestrator.decide import DispatchAction, Emit, StartRound, decide
from orchestrator.domain import (
    ActionDispatched,
    ActionDone,
    AgentReport,
    CommitPushed,
    Event,
    FindingRaised,
    FindingRefused,
    FindingResolved,
    FindingTurn,
    JuryConfigEvent,
    ReplyAnswered,
    ReplySent,
    RoundEnd,
    RoundStart,
    RunCancel,
    RunResumed,
    TargetEvent,
)
from orchestrator.fold import fold
from orchestrator.prompts import round_start
from orchestrator.run_json import run_json
from orchestrator.spec import AgentSpec, JuryConfig, Target

SPEC = AgentSpec(name="x", argv=["x", "{prompt}"], judge_argv=["x", "{prompt}"])


def config(**kw: object) -> JuryConfigEvent:
    cfg = JuryConfig(reviewers=["a", "b"], judge="j", agents={n: SPEC for n in "abj"}, **kw)  # type: ignore[arg-type]
    return JuryConfigEvent(eid="config:0", config=cfg)


def start(**kw: object) -> list[Event]:
    return [
        TargetEvent(eid="target:0", target=Target(repo="r", id="feat", state="review", head="h0", base="b0")),
        config(**kw),
        RoundStart(eid="round.start:1", n=1, sha="h0", prompt="p"),
    ]


def report(agent: str, verdict: str = "clean", n: int = 1, error: str | None = None) -> list[Event]:
    key = f"review:r{n}:{agent}"
    return [
        ActionDispatched(eid=f"dispatch:{key}", key=key, kind="review", round=n, agent=agent),
        AgentReport(eid=f"{key}:report", agent=agent, round=n, verdict=verdict, seconds=1.0, error=error),  # type: ignore[arg-type]
        ActionDone(eid=f"{key}:done", key=key),
    ]


def raised(
    fid: str, agent: str = "a", loc: str = "stats.py:9", claim: str = "median is wrong for even"
) -> Event:
    return FindingRaised(eid=f"raised:{fid}", id=fid, round=int(fid[1]), agent=agent, claim=claim, loc=loc)


def triaged(fid: str, n: int, verdict: str = "accepted", sha: str | None = "c1") -> list[Event]:
    key = f"triage:{fid}:{n}"
    out: list[Event] = [
        ActionDispatched(
            eid=f"dispatch:{key}", key=key, kind="triage", round=1, agent="j", finding=fid, sha="h0"
        ),
        FindingResolved(eid=f"{key}:resolved", id=fid, verdict=verdict, reason="why", who="j"),  # type: ignore[arg-type]
    ]
    if verdict == "accepted":
        out.append(CommitPushed(eid=f"{key}:commit", sha=sha or "c1", subject="fix", finding=fid))
    return [*out, ActionDone(eid=f"{key}:done", key=key)]


def replied(agent: str, fids: list[str], k: int = 1, contests: dict[str, str] | None = None) -> list[Event]:
    key = f"reply:{agent}:{k}"
    out: list[Event] = [
        ActionDispatched(eid=f"dispatch:{key}", key=key, kind="reply", round=1, agent=agent, findings=fids),
        ReplySent(eid=f"{key}:sent", agent=agent, round=1, resumed=False, text="t", findings=fids),
    ]
    for fid, text in (contests or {}).items():
        out.append(FindingTurn(eid=f"{key}:turn:{fid}", id=fid, agent=agent, who=agent, text=text))
    out.append(
        ReplyAnswered(
            eid=f"{key}:answered",
            agent=agent,
            round=1,
            seconds=1,
            verdict="contested" if contests else "clean",
        )
    )
    return [*out, ActionDone(eid=f"{key}:done", key=key)]


def describe(actions: list) -> list[str]:
    """Actions as short strings: ``dispatch review:r1:a`` or ``emit target converged``."""
    out = []
    for a in actions:
        if isinstance(a, DispatchAction):
            out.append(f"dispatch {a.key}")
        else:
            if isinstance(a, StartRound):
                a = Emit(event=round_start(a))
            assert isinstance(a, Emit)
            e = a.event
            match e:
                case TargetEvent():
                    detail = str(e.target.state)
                case FindingResolved():
                    detail = f"{e.id} {e.verdict}"
                case RoundStart() | RoundEnd():
                    detail = str(e.n)
            out.append(f"emit {e.t} {detail}")
    return out


CASES = [
    (
        "queued run starts reviewing",
        [TargetEvent(eid="t", target=Target(state="queued")), config()],
        ["emit target review"],
    ),
    ("first round starts", start()[:2], ["emit round.start 1"]),
    ("both reviewers dispatched", start(), ["dispatch review:r1:a", "dispatch review:r1:b"]),
    (
        "barrier: one reviewer still out",
        [*start(), *report("a", "found"), raised("r1-a-1")][:-1]
        + [ActionDispatched(eid="d", key="review:r1:b", kind="review", round=1, agent="b")],
        [],
    ),
    (
        "an error ends human",
        [*start(), *report("a"), *report("b", "error", error="timed out after 600s")],
        ["emit target human"],
    ),
    (
        "all clean converges",
        [*start(), *report("a"), *report("b"), RoundEnd(eid="round.end:1", n=1)],
        ["emit target converged"],
    ),
    ("clean round ends first", [*start(), *report("a"), *report("b")], ["emit round.end 1"]),
    (
        "a finding is triaged",
        [*start(), *report("a", "found"), raised("r1-a-1"), *report("b")],
        ["dispatch triage:r1-a-1:1"],
    ),
    (
        "duplicate across reviewers is superseded",
        [
            *start(),
            *report("a", "found"),
            raised("r1-a-1"),
            *report("b", "found"),
            raised("r1-b-1", agent="b", loc="stats.py:9", claim="wrong median for even lists"),
        ],
        ["emit finding.resolved r1-b-1 superseded"],
    ),
    (
        "triage in flight: wait",
        [
            *start(),
            *report("a", "found"),
            raised("r1-a-1"),
            *report("b"),
            ActionDispatched(
                eid="d", key="triage:r1-a-1:1", kind="triage", round=1, agent="j", finding="r1-a-1"
            ),
        ],
        [],
    ),
    (
        "after triage the reviewer is told",
        [*start(), *report("a", "found"), raised("r1-a-1"), *report("b"), *triaged("r1-a-1", 1)],
        ["dispatch reply:a:1"],
    ),
    (
        "told and clean: the round ends",
        [
            *start(),
            *report("a", "found"),
            raised("r1-a-1"),
            *report("b"),
            *triaged("r1-a-1", 1),
            *replied("a", ["r1-a-1"]),
        ],
        ["emit round.end 1"],
    ),
    (
        "a round with findings leads to the next round",
        [
            *start(),
            *report("a", "found"),
            raised("r1-a-1"),
            *report("b"),
            *triaged("r1-a-1", 1),
            *replied("a", ["r1-a-1"]),
            RoundEnd(eid="round.end:1", n=1),
        ],
        ["emit round.start 2"],
    ),
    (
        "round cap ends human",
        [
            *start(rounds=1),
            *report("a", "found"),
            raised("r1-a-1"),
            *report("b"),
            *triaged("r1-a-1", 1),
            *replied("a", ["r1-a-1"]),
            RoundEnd(eid="round.end:1", n=1),
        ],
        ["emit target human"],
    ),
    (
        "a refused triage is tried again",
        [
            *start(),
            *report("a", "found"),
            raised("r1-a-1"),
            *report("b"),
            ActionDispatched(
                eid="d1", key="triage:r1-a-1:1", kind="triage", round=1, agent="j", finding="r1-a-1"
            ),
            FindingRefused(eid="f1", id="r1-a-1", reason="unparseable", who="j", round=1),
            ActionDone(eid="x1", key="triage:r1-a-1:1"),
        ],
        ["dispatch triage:r1-a-1:2"],
    ),
    (
        "refused twice: left open for a human",
        [
            *start(),
            *report("a", "found"),
            raised("r1-a-1"),
            *report("b"),
            FindingRefused(eid="f1", id="r1-a-1", reason="unparseable", who="j", round=1),
            FindingRefused(eid="f2", id="r1-a-1", reason="accepted without a test", who="j", round=1),
        ],
        ["emit target human"],
    ),
    (
        "a contest reopens a rejection for triage",
        [
            *start(),
            *report("a", "found"),
            raised("r1-a-1"),
            *report("b"),
            *triaged("r1-a-1", 1, "rejected"),
            *replied("a", ["r1-a-1"], contests={"r1-a-1": "still fails"}),
        ],
        ["dispatch triage:r1-a-1:2"],
    ),
    (
        "contested three times: deferred",
        [
            *start(),
            *report("a", "found"),
            raised("r1-a-1"),
            *report("b"),
            *triaged("r1-a-1", 1, "rejected"),
            *replied("a", ["r1-a-1"], 1, {"r1-a-1": "no"}),
            *triaged("r1-a-1", 2, "rejected"),
            *replied("a", ["r1-a-1"], 2, {"r1-a-1": "no"}),
            *triaged("r1-a-1", 3, "rejected"),
            *replied("a", ["r1-a-1"], 3, {"r1-a-1": "no"}),
        ],
        ["emit finding.resolved r1-a-1 deferred"],
    ),
    ("a finished run does nothing", [*start(), TargetEvent(eid="end", target=Target(state="converged"))], []),
]


@pytest.mark.parametrize(("name", "events", "expected"), CASES, ids=[c[0] for c in CASES])
def test_decide(name: str, events: list[Event], expected: list[str]) -> None:
    assert describe(decide(fold(events))) == expected


def test_duplicated_events_fold_once() -> None:
    events = [*start(), *report("a", "found"), raised("r1-a-1"), raised("r1-a-1"), *report("b")]
    once = fold(events)
    twice = fold([*events, *events])
    assert twice.wire() == once.wire()
    assert len(once.findings) == 1


def test_accepted_fix_moves_the_tip() -> None:
    s = fold(
        [*start(), *report("a", "found"), raised("r1-a-1"), *report("b"), *triaged("r1-a-1", 1, sha="c9")]
    )
    assert s.tip == "c9"
    assert s.findings["r1-a-1"].status == "accepted"


def test_resume_forgets_errors_and_lost_work() -> None:
    events = [
        *start(),
        *report("a"),
        *report("b", "error", error="timed out"),
        TargetEvent(eid="end", target=Target(state="human", state_note="timed out")),
    ]
    resumed = [
        *events,
        RunResumed(eid="resume:1", epoch=1),
        TargetEvent(eid="state:review:e1", target=Target(state="review")),
    ]
    assert describe(decide(fold(resumed))) == ["dispatch review:r1:b:e1"]


def test_a_resumed_cancelled_run_runs_again_and_a_later_cancel_ends_it() -> None:
    """The cancel a run ended by is spent by its resume: decide dispatched nothing and ended the resumed
    run "cancelled" again at once, so resuming a cancelled run (the console offers it) did nothing."""
    cancelled = [
        *start(),
        *report("a"),
        RunCancel(eid="cancel", who="user"),
        TargetEvent(eid="end", target=Target(state="cancelled", state_note="cancelled by the user")),
    ]
    resumed = [
        *cancelled,
        RunResumed(eid="resume:1", epoch=1),
        TargetEvent(eid="state:review:e1", target=Target(state="review")),
    ]
    assert not fold(resumed).cancel_requested
    assert describe(decide(fold(resumed))) == ["dispatch review:r1:b:e1"]
    again = [*resumed, RunCancel(eid="cancel:2", who="user")]
    (end,) = decide(fold(again))
    assert isinstance(end, Emit) and isinstance(end.event, TargetEvent)
    assert end.event.target.state == "cancelled"


def test_settled_findings_reach_the_next_round_prompt() -> None:
    s = fold(
        [
            *start(),
            *report("a", "found"),
            raised("r1-a-1"),
            *report("b"),
            *triaged("r1-a-1", 1),
            *replied("a", ["r1-a-1"]),
            RoundEnd(eid="round.end:1", n=1),
        ]
    )
    (action,) = decide(s)
    assert isinstance(action, StartRound) and [i.id for i in action.settled] == ["r1-a-1"]
    event = round_start(action)
    assert "r1-a-1" in event.prompt and event.sha == "c1" and event.prompt_file == "round-2.prompt.md"


def test_run_json_has_codejury_shape() -> None:
    doc = run_json(fold([*start(), *report("a", "found"), raised("r1-a-1"), *report("b")]))
    assert set(doc) >= {"target", "rounds", "exchanges", "replies", "lanes", "marks", "totalMin"}
    assert doc["exchanges"][0]["id"] == "r1-a-1"
    assert [v["a"] for v in doc["rounds"][0]["verdicts"]] == ["a", "b"]
