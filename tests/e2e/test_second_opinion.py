"""The second opinion end to end: mechanical verification refutes cheating fixes without a
model, a refuter of another family checks the rest, no signal means no critique, and ``jury refute``.

The CLI runs in a subprocess on the demo sample repository, with fake agents: tests/fakes/agent.py (the
finder and an honest judge), tests/fakes/judges.py (judges that cheat) and tests/fakes/refuter.py (a
juror that answers second-opinion prompts as its mode says and logs each call to
``$FAKE_STATE/refuter-calls``). Every agent has a ``vendor/model`` id so its family is known.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAKE_SANDBOX_KEYS

FAKES = Path(__file__).resolve().parent.parent / "fakes"
FID = "r1-finder-1"  # the finder's one finding
NO_SIGNAL = "no test, typecheck, lint or build signal"

# families: the judge is vendorj; the finder vendorf; the refuting critic vendorr
JUDGE_MODEL, FINDER_MODEL, CRITIC_MODEL = "vendorj/judge-1", "vendorf/finder-1", "vendorr/critic-1"


def entry(
    name: str,
    script: str,
    mode: str,
    model: str,
    *,
    judge: tuple[str, str] | None = None,
    report: str | None = None,
) -> str:
    """A jury.toml entry running ``tests/fakes/<script>.py``; refuter.py also gets its own name."""

    def argv(script: str, mode: str) -> list[str]:
        named = [name] if script == "refuter" else []
        return [sys.executable, str(FAKES / f"{script}.py"), mode, *named, "{prompt_file}"]

    text = f"[agents.{name}]\nargv = {json.dumps(argv(script, mode))}\nexpect_seconds = 5\n"
    text += FAKE_SANDBOX_KEYS  # the fakes keep their state under $FAKE_STATE, inside the sandbox
    text += f'model = "{model}"\n'
    if judge:
        text += f"judge_argv = {json.dumps(argv(*judge))}\n"
    if report:
        text += f'report = "{report}"\n'
    return text


def finder(model: str = FINDER_MODEL) -> str:
    return entry("finder", "agent", "find", model)


def critic(mode: str = "not-refuted", name: str = "critic", model: str = CRITIC_MODEL, **kw: Any) -> str:
    return entry(name, "refuter", mode, model, **kw)


def judge(script: str = "agent", mode: str = "fix", model: str = JUDGE_MODEL) -> str:
    return entry("judge", "agent", "clean", model, judge=(script, mode))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def review(jury, repo: Path, config: Path, *extra: str, reviewers: str = "critic,finder"):
    """``jury review`` of the sample repository; the critic comes first so it is the default refuter."""
    return jury(
        "review",
        str(repo),
        "--branch",
        "feature",
        "--trunk",
        "main",
        "--reviewer",
        reviewers,
        "--judge",
        "judge",
        "--config",
        str(config),
        *extra,
    )


def the_run(state_dir: Path) -> Path:
    (only,) = list((state_dir / "runs").iterdir())
    return only


def events_of(d: Path, t: str | None = None) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in (d / "events.ndjson").read_text().splitlines()]
    return [e for e in events if t is None or e["t"] == t]


def shown(jury, slug: str) -> dict[str, Any]:
    r = jury("show", slug, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def refuter_calls(fake_state: Path) -> list[dict[str, Any]]:
    path = fake_state / "refuter-calls"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def refutation_log(d: Path) -> list[dict[str, Any]]:
    path = d / "refutations.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def jury_branches(repo: Path) -> str:
    return git(repo, "branch", "--list", "jury/*").strip()


# --- 1. a cheating judge never gets its fix integrated ---------------------------------------------


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("odd-only", "the test passes without the fix"),
        ("weaken", "the fix weakens existing tests: tests/test_stats.py:8: assertion removed or changed"),
    ],
)
def test_a_cheating_fix_is_refuted_mechanically_and_never_integrated(
    jury, sample_repo, write_config, state_dir, fake_state, mode, why
) -> None:
    config = write_config(finder(), critic("not-refuted"), judge("judges", mode))
    r = review(jury, sample_repo, config, "--rounds", "1")
    d = the_run(state_dir)
    state = shown(jury, d.name)
    # a refuter of another family was there to ask, and was never asked: no model call refuted the cheat
    assert state["config"]["refuter"] == "critic"
    assert refuter_calls(fake_state) == []
    verdicts = events_of(d, "refute.verdict")
    reopened = events_of(d, "finding.reopened")
    triages = [a for a in state["actions"].values() if a["kind"] == "triage"]
    assert len(triages) == 3  # the judge was told why, twice, and cheated again each time
    assert len(verdicts) == len(reopened) == 3
    # a rewritten assertion is read from the patch alone: refuted before anything runs (issue 9)
    ran = mode != "weaken"
    for v in verdicts:
        assert (v["id"], v["source"], v["outcome"], v["costUsd"]) == (FID, "verification", "refuted", 0.0)
        assert why in v["reason"]
        if ran:
            assert v["signal"]["kind"] == "test" and v["signal"]["source"] == "verification"
        assert "agent" not in v and "model" not in v
    for e in reopened:
        assert (e["id"], e["source"]) == (FID, "verification") and why in e["reason"]
    # the verification ran the judge's own command on the fixed and the reverted tree
    runs = events_of(d, "verify.ran")
    assert {(v["tree"], v["command"]) for v in runs} == (
        {
            ("fixed", "python3 -m unittest tests.test_median"),
            ("reverted", "python3 -m unittest tests.test_median"),
        }
        if ran
        else set()
    )
    # the next triage prompt carries the evidence back to the judge
    assert why in (d / f"triage.{FID}.2.prompt.md").read_text()
    # the cheat reached no tree: no commit, no jury branch
    assert events_of(d, "commit.pushed") == [] and state["commits"] == []
    assert jury_branches(sample_repo) == ""
    # the run does not converge with the cheat: the finding is deferred and a human is asked
    f = state["findings"][FID]
    assert f["status"] == "deferred" and "reopened 3 times" in f["reason"] and why in f["reason"]
    assert [x.split(":", 1)[0] for x in f["reopens"]] == ["verification"] * 3
    assert state["target"]["state"] == "human" and r.code == 1, r.out + r.err
    # verification refutations cost no model call, yet are in the run's refutation log
    logged = refutation_log(d)
    assert [(x["finding"], x["source"], x["outcome"], x["changed_answer"]) for x in logged] == [
        (FID, "verification", "refuted", True)
    ] * 3
    assert all(
        x["had_signal"] is ran and x["cost_usd"] == 0.0 and x["reviewer_model"] is None for x in logged
    )


# --- 2. a genuine fix: verified, then a second opinion from another family ------------------------


def test_a_genuine_fix_not_refuted_is_integrated(
    jury, sample_repo, write_config, state_dir, fake_state
) -> None:
    # the first reviewer shares the judge's family: the refuter must be the other one (issue 4, point 4)
    config = write_config(
        finder(model="vendorj/finder-1"),
        critic("not-refuted+json", report="result-json"),
        judge(),
    )
    r = review(jury, sample_repo, config, reviewers="finder,critic")
    assert r.code == 0, r.out + r.err
    d = the_run(state_dir)
    state = shown(jury, d.name)
    assert state["config"]["refuter"] == "critic" and state["config"]["refuterForced"] is False
    f = state["findings"][FID]
    assert f["status"] == "accepted"
    trees = [(v["tree"], v["exitCode"] == 0) for v in f["verification"]]
    assert trees[:3] == [("fixed", True), ("reverted", False), ("stripped", True)]
    # the fix from bytecode passes; each changed line deleted (in bytecode) fails the test
    assert trees[3] == ("mutant", True) and trees[4:] and set(trees[4:]) == {("mutant", False)}
    ref = f["refutation"]
    assert ref["asked"] and ref["ran"] and ref["source"] == "refuter"
    assert (ref["outcome"], ref["ok"], ref["independent"]) == ("not_refuted", True, True)
    assert (ref["reviewer_agent"], ref["reviewer_model"]) == ("critic", CRITIC_MODEL)
    assert ref["signal"]["kind"] == "test" and ref["signal"]["source"] == "verification"
    assert ref["cost_usd"] == 0.0125  # what the refuter's CLI reported
    # the refuter was called once, on the tree with the candidate fix, starting from the signal
    (call,) = refuter_calls(fake_state)
    assert call["agent"] == "critic" and call["fixed"] and not call["final"]
    prompt = (fake_state / "refuter-prompt-1.md").read_text()
    assert "python3 -m unittest tests.test_median" in prompt and FID in prompt
    # integrated only after the second opinion
    order = [e["t"] for e in events_of(d) if e["t"] in ("refute.verdict", "commit.pushed")]
    assert order == ["refute.verdict", "commit.pushed"]
    files = git(sample_repo, "show", "--name-only", "--format=", f"jury/{d.name}").split()
    assert sorted(files) == ["stats.py", "tests/test_median.py"]
    assert "ordered[middle - 1]" in git(sample_repo, "show", f"jury/{d.name}:stats.py")
    text = jury("show", d.name).out
    assert f"{FID} second opinion: not_refuted by critic, independent" in text
    (line,) = refutation_log(d)
    assert line["had_signal"] is True and line["ran"] is True
    assert (line["signal_kind"], line["signal_source"]) == ("test", "verification")
    assert (line["outcome"], line["changed_answer"]) == ("not_refuted", False)
    assert (line["reviewer_agent"], line["reviewer_model"], line["independent"]) == (
        "critic",
        CRITIC_MODEL,
        True,
    )
    assert line["cost_usd"] == 0.0125


def test_a_refuted_fix_goes_back_to_the_judge_and_waits(
    jury, sample_repo, write_config, state_dir, fake_state
) -> None:
    config = write_config(finder(), critic("refute-once"), judge())
    r = review(jury, sample_repo, config)
    assert r.code == 0, r.out + r.err
    d = the_run(state_dir)
    evidence = "median([1, 2]) returns 2 on the fixed tree"
    flow = [
        (e["t"], e.get("outcome") or e.get("source") or e.get("verdict") or e.get("kind"))
        for e in events_of(d)
        if e["t"] in ("finding.resolved", "refute.verdict", "finding.reopened", "commit.pushed")
        or (e["t"] == "action.dispatched" and e["kind"] == "triage")
    ]
    assert flow == [
        ("action.dispatched", "triage"),
        ("finding.resolved", "accepted"),
        ("refute.verdict", "refuted"),
        ("finding.reopened", "refuter"),
        ("action.dispatched", "triage"),  # back to the judge, with the refuter's evidence
        ("finding.resolved", "accepted"),
        ("refute.verdict", "not_refuted"),
        ("commit.pushed", None),  # only once settled again
    ]
    (reopened,) = events_of(d, "finding.reopened")
    assert reopened["who"] == "critic" and evidence in reopened["reason"]
    assert evidence in (d / f"triage.{FID}.2.prompt.md").read_text()
    assert [c["fixed"] for c in refuter_calls(fake_state)] == [True, True]
    state = shown(jury, d.name)
    f = state["findings"][FID]
    assert f["status"] == "accepted" and f["sha"] and f["refutation"]["outcome"] == "not_refuted"
    assert f["reopens"] == [f"refuter: {reopened['reason']}"]
    logged = refutation_log(d)
    assert [(x["outcome"], x["changed_answer"]) for x in logged] == [
        ("refuted", True),
        ("not_refuted", False),
    ]
    assert all("cost_usd" in x and x["cost_usd"] is None for x in logged)  # the CLI reported none: unknown


def test_a_fix_refuted_every_time_is_never_integrated(
    jury, sample_repo, write_config, state_dir, fake_state
) -> None:
    config = write_config(finder(), critic("refuted"), judge())
    r = review(jury, sample_repo, config, "--rounds", "1")
    d = the_run(state_dir)
    state = shown(jury, d.name)
    f = state["findings"][FID]
    assert f["status"] == "deferred" and f.get("sha") is None
    assert [x.split(":", 1)[0] for x in f["reopens"]] == ["refuter"] * 3
    assert len(refuter_calls(fake_state)) == 3
    assert events_of(d, "commit.pushed") == [] and jury_branches(sample_repo) == ""
    assert state["target"]["state"] == "human" and r.code == 1


# --- 3. no signal, no critique ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "ran", "why"),
    [
        (None, False, NO_SIGNAL),
        ("The median must be right; `python3 tests/check_median.py` shows it.", False, NO_SIGNAL),
        ("The median must be right; run `python3 -m unittest` to see it.", True, None),
    ],
    ids=["no-command", "plain-command-in-task", "test-command-in-task"],
)
def test_a_rejection_is_refuted_only_with_a_signal(
    jury, sample_repo, write_config, state_dir, fake_state, task, ran, why
) -> None:
    config = write_config(finder(), critic("not-refuted"), judge(mode="reject"))
    extra = ["--task", task] if task else []
    r = review(jury, sample_repo, config, "--rounds", "1", "--refute-rejections", *extra)
    assert r.code == 1, r.out + r.err  # the finder finds the unfixed bug again: the round cap ends it
    d = the_run(state_dir)
    state = shown(jury, d.name)
    f = state["findings"][FID]
    assert f["status"] == "rejected"
    ref = f["refutation"]
    logged = refutation_log(d)
    if not ran:
        assert ref == {"asked": True, "ran": False, "skipped_reason": ref["skipped_reason"]}
        assert ref["skipped_reason"].startswith(why)
        assert refuter_calls(fake_state) == []
        assert f"{FID} second opinion: asked, not run: {why}" in jury("show", d.name).out
        (skipped,) = events_of(d, "refute.skipped")
        assert skipped["id"] == FID
        assert [(x["had_signal"], x["ran"], x["changed_answer"]) for x in logged] == [(False, False, False)]
        assert logged[0]["skipped_reason"].startswith(why) and logged[0]["reason"] is None
    else:
        assert ref["ran"] and ref["outcome"] == "not_refuted" and ref["independent"] is True
        assert ref["signal"]["source"] == "task" and ref["signal"]["command"] == "python3 -m unittest"
        assert ref["signal"]["exit_code"] == 0
        (call,) = refuter_calls(fake_state)
        assert call["fixed"] is False  # a rejection is checked on the tree as it is
        assert [(x["had_signal"], x["signal_source"]) for x in logged] == [(True, "task")]


# A plain program as the judge's test (``python3 tests/check_median.py``) is no longer run at all: it is
# "not a test command Jury can verify" (issue 9), see tests/e2e/test_verification_cheats.py.


def test_no_refuter_of_another_family_is_asked_but_not_run(
    jury, sample_repo, write_config, state_dir, fake_state
) -> None:
    # every juror is of the judge's family: nobody may give the second opinion
    config = write_config(finder(model="vendorj/f"), critic(model="vendorj/c"), judge())
    r = review(jury, sample_repo, config)
    assert r.code == 0, r.out + r.err
    d = the_run(state_dir)
    state = shown(jury, d.name)
    assert state["config"]["refute"] is True and state["config"].get("refuter") is None
    ref = state["findings"][FID]["refutation"]
    assert ref["asked"] is True and ref["ran"] is False and "--refuter" in ref["skipped_reason"]
    assert refuter_calls(fake_state) == []


# --- 4. independence -------------------------------------------------------------------------------


def test_a_forced_refuter_of_the_judges_family_is_reported_not_independent(
    jury, sample_repo, write_config, state_dir, fake_state
) -> None:
    config = write_config(finder(), critic(), critic(name="sibling", model="vendorj/sibling-1"), judge())
    r = review(jury, sample_repo, config, "--refuter", "sibling")
    assert r.code == 0, r.out + r.err
    d = the_run(state_dir)
    state = shown(jury, d.name)
    assert state["config"]["refuter"] == "sibling" and state["config"]["refuterForced"] is True
    ref = state["findings"][FID]["refutation"]
    assert ref["ran"] and ref["reviewer_agent"] == "sibling" and ref["independent"] is False
    assert [c["agent"] for c in refuter_calls(fake_state)] == ["sibling"]
    assert "not_refuted by sibling, NOT independent" in jury("show", d.name).out
    (line,) = refutation_log(d)
    assert line["independent"] is False and line["reviewer_model"] == "vendorj/sibling-1"


# --- 5. jury refute ------------------------------------------------------------------------------


@pytest.fixture
def refute_config(write_config) -> Path:
    return write_config(
        '[jury]\njudge = "judge"\nreviewers = ["sibling", "critic"]\n',
        judge(),
        critic("not-refuted"),
        critic("refuted", name="refuter"),
        critic("unclear", name="unsure"),
        critic("bare", name="bare"),
        critic("refuted+json", name="paid", report="result-json"),
        critic("not-refuted", name="sibling", model="vendorj/sibling-1"),
    )


TEST_CMD = "python3 -m unittest tests.test_stats"


@pytest.mark.parametrize(
    ("agent", "code", "outcome", "independent"),
    [
        ("refuter", 1, "refuted", True),
        ("critic", 0, "not_refuted", True),
        ("unsure", 0, "unclear", True),
        ("bare", 0, "unclear", True),  # REFUTED without evidence
        ("sibling", 0, "not_refuted", False),  # forced, same family as the judge
        (None, 0, "not_refuted", True),  # default: the first reviewer of another family (critic)
    ],
)
def test_jury_refute_exits_1_only_on_a_concrete_refutation(
    jury, sample_repo, refute_config, fake_state, agent, code, outcome, independent
) -> None:
    args = ["refute", "--repo", str(sample_repo), "--config", str(refute_config), "--json"]
    args += ["--task", "mean must stay right", "--claim", "mean() is correct", "--command", TEST_CMD]
    r = jury(*args, *(["--refuter", agent] if agent else []))
    assert r.code == code, r.out + r.err
    record = json.loads(r.out)
    assert (record["asked"], record["ran"], record["outcome"]) == (True, True, outcome)
    assert record["independent"] is independent
    assert record["reviewer_agent"] == (agent or "critic")
    assert record["signal"]["kind"] == "test" and record["signal"]["source"] == "declared"
    assert record["signal"]["command"] == TEST_CMD and record["signal"]["exit_code"] == 0
    assert [c["agent"] for c in refuter_calls(fake_state)] == [agent or "critic"]
    prompt = (fake_state / "refuter-prompt-1.md").read_text()
    assert "mean() is correct" in prompt and TEST_CMD in prompt


@pytest.mark.parametrize(
    ("command", "task", "why"),
    [
        ("python3 -c pass", None, NO_SIGNAL),  # a plain program run is not a signal
        (None, "see `python3 tests/check.py`", NO_SIGNAL),
        (None, None, NO_SIGNAL),
        ("/nonexistent/bin/pytest -q", None, "(1 named, none ran)"),
    ],
    ids=["plain-command", "plain-command-in-task", "nothing", "test-that-cannot-run"],
)
def test_jury_refute_without_a_signal_skips_the_agent(
    jury, sample_repo, refute_config, fake_state, command, task, why
) -> None:
    args = ["refute", "--repo", str(sample_repo), "--config", str(refute_config), "--claim", "mean() is fine"]
    args += ["--refuter", "refuter"]  # it would refute: it must not be asked
    args += [*(["--command", command] if command else []), *(["--task", task] if task else [])]
    r = jury(*args, "--json")
    assert r.code == 0, r.out + r.err
    record = json.loads(r.out)
    assert (record["asked"], record["ran"], record["outcome"]) == (True, False, None)
    assert record["skipped_reason"].startswith(NO_SIGNAL) and why in record["skipped_reason"]
    assert record["ok"] is None
    assert refuter_calls(fake_state) == []
    plain = jury(*args)
    assert plain.code == 0 and f"not run: {NO_SIGNAL}" in plain.out and why in plain.out


def test_jury_refute_finds_the_signal_in_the_task(jury, sample_repo, refute_config, fake_state) -> None:
    args = [
        "refute",
        "--repo",
        str(sample_repo),
        "--config",
        str(refute_config),
        "--claim",
        "mean() is right",
    ]
    args += ["--task", f"Keep mean right; check with `{TEST_CMD}`.", "--refuter", "paid"]
    r = jury(*args, "--json")
    assert r.code == 1, r.out + r.err
    record = json.loads(r.out)
    assert record["outcome"] == "refuted" and "median([1, 2]) returns 2" in record["reason"]
    assert (record["signal"]["source"], record["signal"]["command"]) == ("task", TEST_CMD)
    assert record["cost_usd"] == 0.0125  # what the refuter's CLI reported
    assert record["reviewer_model"] == CRITIC_MODEL and record["independent"] is True
    text = jury(*args)
    assert text.code == 1 and "refuted: median([1, 2])" in text.out
    assert "by paid (vendorr/critic-1, independent)" in text.out
    assert len(refuter_calls(fake_state)) == 2


# --- 7. declared checks: the converged claim gets a second opinion ---------------------------------


@pytest.mark.parametrize(
    ("mode", "state", "code"), [("not-refuted", "converged", 0), ("refute-final", "human", 1)]
)
def test_declared_checks_give_the_converged_claim_a_second_opinion(
    jury, sample_repo, write_config, state_dir, fake_state, mode, state, code
) -> None:
    config = write_config(finder(), critic(mode), judge(), '[checks]\ntest = "python3 -m unittest"\n')
    r = review(jury, sample_repo, config)
    assert r.code == code, r.out + r.err
    d = the_run(state_dir)
    doc = shown(jury, d.name)
    assert doc["target"]["state"] == state
    final = doc["finalCheck"]
    assert final["ran"] is True and final["source"] == "refuter" and final["independent"] is True
    assert final["signal"]["source"] == "declared" and final["signal"]["command"] == "python3 -m unittest"
    assert final["outcome"] == ("not_refuted" if mode == "not-refuted" else "refuted")
    # the finding's second opinion, then the converged claim's, on the tree with the fix
    calls = refuter_calls(fake_state)
    assert [(c["final"], c["fixed"]) for c in calls] == [(False, True), (True, True)]
    # the checks ran on the final tree and are in the log
    checks = [e for e in events_of(d, "verify.ran") if e["tree"] == "final"]
    assert checks and all(e["command"] == "python3 -m unittest" and e["exitCode"] == 0 for e in checks)
    if state == "human":
        assert "the second opinion refuted the converged claim" in doc["target"]["stateNote"]
    else:
        assert doc["findings"][FID]["sha"] == git(sample_repo, "rev-parse", f"jury/{d.name}").strip()
