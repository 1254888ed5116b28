"""What a run publishes, from its fold alone: the check's conclusion never kinder than the run, inline
comments only on the diff's lines, untrusted text made inert, one publish action per end."""

from __future__ import annotations

from typing import Any

from orchestrator.decide import DispatchAction, awaiting_publish, decide, publish_key
from orchestrator.fold import CommitInfo, FindingState, RoundSeat, RoundState, RunState
from orchestrator.publishing import clip, parse_loc, plan, verdict
from orchestrator.refute.record import RefutationRecord
from orchestrator.refute.verdicts import ParsedRefutation
from orchestrator.spec import AgentSpec, JuryConfig, Target


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
            n=1, sha="h" * 40, prompt="", started_at="t", agents={"a": RoundSeat(agent="a", state="found")}
        )
    )
    for i, (fid, status) in enumerate(findings.items()):
        s.findings[fid] = FindingState(
            id=fid, round=1, agent="a", claim=f"claim {fid}", loc=f"x.py:{i + 10}", status=status
        )
    return s


def test_the_conclusion_is_the_runs_true_state() -> None:
    assert verdict(run("converged", "all clean", f1="accepted"), fixes_on_head=True)[0] == "success"
    assert verdict(run("converged", "all clean", f2="rejected"))[0] == "success"  # nothing to carry
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
    # a judge that never ran: what is open was never judged (but one it did judge keeps the failure)
    unjudged = run("human", "finding f1 is still open after 2 triage attempts", f1="open", f2="rejected")
    unjudged.findings["f1"].refusals = ["the judge could not run: j: executable not found"] * 2
    assert verdict(unjudged) == (
        "neutral",
        "Jury could not review: the judge could not run: j: executable not found (on f1)",
    )
    unjudged.findings["f3"] = FindingState(id="f3", round=1, agent="a", claim="c", loc="x.py:3")
    unjudged.findings["f3"].refusals = ["accepted, but the judge changed no file"]
    assert verdict(unjudged)[0] == "failure"
    assert verdict(run("cancelled", "cancelled by the user"))[0] == "neutral"
    assert verdict(run("failed", "push refused", f1="accepted"))[0] == "neutral"
    assert verdict(run("review"))[0] == "neutral"  # never success before the end
    refuted = run("human", "the second opinion refuted the converged claim: test fails")
    refuted.final_refutation = RefutationRecord.from_verdict(
        ParsedRefutation(outcome="refuted", reason="test fails")
    )
    assert verdict(refuted)[0] == "failure"


def test_comments_go_on_diff_lines_and_the_rest_into_the_summary() -> None:
    s = run("human", "round cap", f1="open", f2="deferred", f3="rejected", f4="accepted")
    p = plan(s, {"x.py": {10: None, 13: None}})
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


def section(body: str, title: str) -> list[str]:
    """The items of the summary's section ``title`` (its ``- `` lines), [] when the body has none."""
    lines = body.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"**{title}** (")), None)
    if start is None:
        return []
    items = []
    for line in lines[start + 1 :]:
        if not line.startswith("- "):
            break
        items.append(line[2:])
    assert lines[start] == f"**{title}** ({len(items)})"
    return items


def test_the_summary_lists_deferred_refuted_and_verified_findings_with_their_evidence() -> None:
    """Folded from the events a run writes: an acceptance verified by its named test (passed with the fix,
    failed without), one verified by its command's exit codes, a deferral, and a rejection the second
    opinion refuted (reopened, then rejected again)."""
    from orchestrator.domain import (
        CommitPushed,
        Event,
        FindingRaised,
        FindingReopened,
        FindingResolved,
        JuryConfigEvent,
        RefuteVerdict,
        RoundStart,
        TargetEvent,
        VerifyRan,
        VerifyTable,
    )
    from orchestrator.fold import fold

    cfg = JuryConfig(reviewers=["a"], judge="j", agents={"a": AgentSpec(name="a"), "j": AgentSpec(name="j")})
    fix, other = "f" * 40, "e" * 40
    test_id = "tests/test_stats.py::test_median_even"
    events: list[Event] = [
        TargetEvent(
            eid="target:0",
            target=Target(url="https://github.com/o/r/pull/1", head="h" * 40, trunk="main", state="review"),
        ),
        JuryConfigEvent(eid="config:0", config=cfg),
        RoundStart(eid="round.start:1", n=1, sha="h" * 40, prompt="p"),
        *(
            FindingRaised(eid=f"raise:{i}", id=i, round=1, agent="a", claim=f"claim {i}", loc=f"stats.py:{n}")
            for n, i in enumerate(("f1", "f2", "f3", "f4"), start=10)
        ),
        FindingResolved(
            eid="v1",
            id="f1",
            verdict="accepted",
            reason="off by one",
            test=test_id,
            test_command="pytest",
            who="j",
        ),
        VerifyTable(
            eid="t1",
            id="f1",
            ok=True,
            runner="pytest",
            tests=[{"id": test_id, "fixed": "passed", "reverted": "failed"}],
        ),
        CommitPushed(eid="c1", sha=fix, subject="fix f1", branch="jury/s-1", finding="f1"),
        FindingResolved(
            eid="v4",
            id="f4",
            verdict="accepted",
            reason="leak",
            test="t4",
            test_command="make check",
            who="j",
        ),
        VerifyRan(eid="r4a", id="f4", command="make check", tree="fixed", exit_code=0),
        VerifyRan(eid="r4b", id="f4", command="make check", tree="reverted", exit_code=2),
        CommitPushed(eid="c4", sha=other, subject="fix f4", branch="jury/s-1", finding="f4"),
        FindingResolved(eid="v2", id="f2", verdict="deferred", reason="needs a product decision", who="j"),
        FindingResolved(eid="v3", id="f3", verdict="rejected", reason="not a bug", who="j"),
        RefuteVerdict(
            eid="rf3", id="f3", outcome="refuted", reason="the test fails on the head", source="refuter"
        ),
        FindingReopened(
            eid="re3", id="f3", reason="the test fails on the head", who="refuter", source="refuter"
        ),
        FindingResolved(eid="v3b", id="f3", verdict="rejected", reason="the head is not what ships", who="j"),
        TargetEvent(eid="end", target=Target(state="human", state_note="a finding deferred")),
    ]
    s = fold(events, "s-1")
    p = plan(s, {"stats.py": dict.fromkeys((10, 11, 12, 13))})
    assert p.conclusion == "failure"  # one deferred

    (first, second) = section(p.body, "Accepted")
    assert first.startswith("`f1` `stats.py:10` claim f1: fixed in `ffffffffffff`, test `" + test_id + "`")
    assert f"`{test_id}`: passed with the fix, failed without it" in first
    assert second.startswith("`f4` `stats.py:13` claim f4: fixed in `eeeeeeeeeeee`, test `t4`")
    assert "`make check` on the fixed tree: exit 0; `make check` on the reverted tree: exit 2" in second
    assert section(p.body, "Deferred") == ["`f2` `stats.py:11` claim f2: needs a product decision"]
    assert section(p.body, "Refuted by the second opinion") == [
        "`f3` `stats.py:12` claim f3: refuter: the test fails on the head"
    ]
    assert section(p.body, "Rejected") == ["`f3` `stats.py:12` claim f3: the head is not what ships"]
    assert section(p.body, "Open") == []

    comments = {n.key: n.body for n in p.comments}
    assert set(comments) == {"f1", "f2", "f4"}  # rejected: the summary only
    assert "**Accepted and fixed** in `ffffffffffff` on `jury/s-1`" in comments["f1"]
    assert f"- `{test_id}`: passed with the fix, failed without it" in comments["f1"]
    assert "**Deferred**, left for a human: needs a product decision" in comments["f2"]

    # a refutation still standing (not reopened yet) is listed with its own reason, and an unverified
    # acceptance says so instead of passing for verified
    s.findings["f2"].refutation = RefutationRecord.from_verdict(
        ParsedRefutation(outcome="refuted", reason="deferring hides a crash")
    )
    s.findings["f1"].verification_table = {
        "ok": False,
        "reason": "the test passed without the fix",
        "tests": [],
    }
    s.findings["f1"].verification = []
    body = plan(s, None).body
    assert "`f2` `stats.py:11` claim f2: deferring hides a crash" in section(
        body, "Refuted by the second opinion"
    )
    (first, _) = section(body, "Accepted")
    assert first.endswith("not verified: the test passed without the fix")


def test_a_head_without_its_accepted_fixes_is_not_success_and_says_where_they_are() -> None:
    """The fixes are commits on top of the reviewed head: the head still has the bug."""
    s = run("converged", "all clean", f1="accepted", f2="rejected")
    conclusion, title = verdict(s)
    assert conclusion == "action_required"
    assert "not on this commit" in title and "`jury fetch s-1` makes them branch jury/s-1" in title
    p = plan(s, None)
    assert p.conclusion == "action_required"
    assert "**Not on this commit**" in p.check_summary and "jury/s-1" in p.body
    # pushed to the forge as jury/s-1: the title names the branch
    s.commits.append(CommitInfo(sha="f" * 40, subject="pushed", pushed=True, branch="jury/s-1"))
    assert verdict(s)[1].endswith("they are on branch jury/s-1")
    assert "Not on this commit" not in plan(s, None, fixes_on_head=True).check_summary
