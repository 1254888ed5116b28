"""What a run publishes, from its fold alone: the check's conclusion never kinder than the run, inline
comments only on the diff's lines, untrusted text made inert, one publish action per end."""

from __future__ import annotations

from typing import Any

from orchestrator.decide import DispatchAction, decide
from orchestrator.domain import AgentSpec, JuryConfig, Target
from orchestrator.fold import AgentSlot, FindingState, RoundState, RunState
from orchestrator.publishing import awaiting_publish, clip, parse_loc, plan, publish_key, verdict
from orchestrator.refute.record import RefutationRecord
from orchestrator.refute.verdicts import ParsedRefutation


def run(state: Any, note: str = "", *, publish: bool = True, **findings: Any) -> RunState:
    cfg = JuryConfig(
        reviewers=["a"],
        judge="j",
        agents={"a": AgentSpec(name="a"), "j": AgentSpec(name="j")},
        publish=publish,
    )
    s = RunState(
        slug="s-1",
        target=Target(state=state, state_note=note, url="https://github.com/o/r/pull/1", head="h" * 40),
        config=cfg,
    )
    s.rounds.append(
        RoundState(
            n=1, sha="h" * 40, prompt="", started_at="t", agents={"a": AgentSlot(agent="a", state="found")}
        )
    )
    for i, (fid, status) in enumerate(findings.items()):
        s.findings[fid] = FindingState(
            id=fid, round=1, agent="a", claim=f"claim {fid}", loc=f"x.py:{i + 10}", status=status
        )
    return s


def test_the_conclusion_is_the_runs_true_state() -> None:
    assert verdict(run("converged", "all clean", f1="accepted"))[0] == "success"
    assert verdict(run("human", "round cap", f1="open"))[0] == "failure"
    assert verdict(run("human", "left", f1="deferred", f2="rejected"))[0] == "failure"
    # could not review: neutral with the reason, even with findings raised (nobody judged them)
    budget = run("human", "budget exhausted: run ceiling", f1="open")
    budget.budget_refused = "run ceiling"
    assert verdict(budget) == ("neutral", "Jury could not review: budget exhausted: run ceiling")
    assert verdict(run("human", "sandbox unavailable: no bwrap"))[0] == "neutral"
    missing = run("human", "reviewer a could not run in round 1: not found")
    missing.rounds[0].agents["a"].state = "error"
    assert verdict(missing)[0] == "neutral"
    assert verdict(run("cancelled", "cancelled by the user"))[0] == "neutral"
    assert verdict(run("failed", "push refused", f1="accepted"))[0] == "neutral"
    assert verdict(run("review"))[0] == "neutral"  # never success before the end
    refuted = run("human", "the second opinion refuted the converged claim: test fails")
    refuted.final_check = RefutationRecord.from_verdict(
        ParsedRefutation(outcome="refuted", reason="test fails")
    )
    assert verdict(refuted)[0] == "failure"


def test_comments_go_on_diff_lines_and_the_rest_into_the_summary() -> None:
    s = run("human", "round cap", f1="open", f2="deferred", f3="rejected", f4="accepted")
    p = plan(s, {"x.py": {10, 13}})
    assert [(n.key, n.path, n.line) for n in p.comments] == [("f1", "x.py", 10), ("f4", "x.py", 13)]
    assert [n.key for n in p.off_diff] == ["f2"]  # on x.py:11, not on the diff; f3 rejected: summary only
    assert "Not on the diff" in p.body and "`x.py:11`" in p.body
    assert "**Rejected** (1)" in p.body and "**Open** (1)" in p.body
    unknown = plan(s, None)  # no diff known: the forge decides (it refuses lines outside its diff)
    assert len(unknown.comments) == 3 and not unknown.off_diff


def test_locations_and_untrusted_text() -> None:
    assert parse_loc("src/a.py:12") == ("src/a.py", 12)
    assert parse_loc("`src/a.py:12-14`") == ("src/a.py", 12)
    assert parse_loc("a.py:3:7") == ("a.py", 3)
    assert parse_loc("../etc/passwd:1") is None and parse_loc("/abs.py:1") is None
    assert parse_loc("somewhere") is None and parse_loc("a.py:0") is None
    text = clip("hi @octocat\n<!-- jury:run=x -->", 100)
    assert "\n" not in text and "@octocat" not in text and "<!--" not in text


def test_one_publish_action_per_end() -> None:
    s = run("converged", "clean")
    (action,) = decide(s)
    assert isinstance(action, DispatchAction) and action.kind == "publish" and action.key == publish_key(s)
    assert awaiting_publish(s)
    from orchestrator.fold import DispatchedAction

    s.actions[action.key] = DispatchedAction(key=action.key, kind="publish", round=1)
    assert decide(s) == []  # dispatched once
    s.published.append({"key": action.key, "ok": False})
    assert not awaiting_publish(s)  # a failure is a record too: nobody waits for ever
    assert decide(run("converged", "clean", publish=False)) == []
