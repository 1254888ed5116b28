"""Verification that cannot be gamed, end to end (issue 9): ``jury review`` on the demo sample repository
with judges that cheat (tests/fakes/judges.py). Each cheat is refuted by verification alone — no model
is asked for a second opinion — and nothing of it reaches ``jury/<slug>``; an honest judge answering in
codejury's schema gets its pytest-tested fix verified and integrated, and ``jury show`` / ``run.json``
carry the verification table.

The cheats are few here on purpose (each is three full triages); every cheat of the issue is refuted
on ``verify_fix`` directly in tests/integration/test_verify.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_second_opinion import (
    FID,
    critic,
    events_of,
    finder,
    judge,
    jury_branches,
    refuter_calls,
    review,
    shown,
    the_run,
)


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("plain", "not a test command Jury can verify: `python3` is not pytest"),
        ("marker", "the test does not exercise the fix: stats.py lines"),
        (
            "skip",
            "the fix weakens the suite: tests.test_stats.MeanTest.test_mean passed on the head and is skip",
        ),
    ],
)
def test_a_cheat_is_refuted_by_verification_alone(
    jury, sample_repo, write_config, state_dir, fake_state, mode, why
) -> None:
    config = write_config(finder(), critic("not-refuted"), judge("judges", mode))
    r = review(jury, sample_repo, config, "--rounds", "1")
    d = the_run(state_dir)
    state = shown(jury, d.name)
    # no model was asked: the refuter was there and was never called
    assert state["config"]["refuter"] == "critic" and refuter_calls(fake_state) == []
    verdicts = events_of(d, "refute.verdict")
    assert verdicts and all(v["source"] == "verification" and v["outcome"] == "refuted" for v in verdicts)
    assert all(why in v["reason"] for v in verdicts), verdicts[0]["reason"]
    # nothing of the cheat reached a tree
    assert events_of(d, "commit.pushed") == [] and state["commits"] == [] and jury_branches(sample_repo) == ""
    f = state["findings"][FID]
    assert f["status"] == "deferred" and f.get("sha") is None
    assert state["target"]["state"] == "human" and r.code == 1, r.out + r.err
    # the table of the last attempt says why, and the judge was told
    table = f["verificationTable"]
    assert table["ok"] is False and why in table["reason"]
    assert why in (d / f"triage.{FID}.2.prompt.md").read_text()
    if mode == "skip":
        suite = table["suite"]
        assert [(w["id"], w["fixed"]) for w in suite["weakened"]] == [
            ("tests.test_stats.MeanTest.test_mean", "skipped")
        ]
        assert (
            "tests/test_stats.py: existing test file edited beyond added tests" in table["configChanges"][0]
        )
        # the head's suite ran once for the three attempts on the same tree, then came from the artifact
        heads = [e["suite"]["head"] for e in events_of(d, "verify.table")]
        assert [h["cached"] for h in heads] == [False, True, True]
    if mode == "marker":
        (cov,) = [c for c in table["coverage"] if c["path"] == "stats.py"]
        assert cov["status"] == "not exercised" and cov["executed"] == []
        assert {"path": "fixed.marker", "status": "not measured"}.items() <= next(
            c for c in table["coverage"] if c["path"] == "fixed.marker"
        ).items()


def test_codejury_verdict_with_a_pytest_fix_is_verified_and_integrated(
    jury, sample_repo, write_config, state_dir, fake_state
) -> None:
    config = write_config(finder(), critic("not-refuted"), judge("judges", "codejury"))
    r = review(jury, sample_repo, config)
    assert r.code == 0, r.out + r.err
    d = the_run(state_dir)
    state = shown(jury, d.name)
    f = state["findings"][FID]
    # codejury's string "reproduced" is the reproduction and its evidence
    assert f["status"] == "accepted" and f["reproduced"] is True
    assert f["evidence"] == "median([1, 2, 3, 4]) returned 3, not 2.5"
    assert f["refusals"] == []
    table = f["verificationTable"]
    assert table["ok"] is True and table["runner"] == "pytest"
    assert [(t["id"], t["fixed"], t["reverted"]) for t in table["tests"]] == [
        ("tests.test_median_even::test_even_length_averages_the_middle", "passed", "failed")
    ]
    (cov,) = table["coverage"]
    assert cov["path"] == "stats.py" and cov["status"] == "exercised" and cov["executed"]
    suite = table["suite"]
    assert suite["weakened"] == [] and suite["head"]["counts"] == {"passed": 1}
    assert suite["fixed"]["counts"] == {"passed": 2}
    assert set(table["runSeconds"]) == {
        "fixed",
        "reverted",
        "suite-head",
        "suite-fixed",
        "stripped",
        "mutant",
    }
    assert table["seconds"] >= sum(table["runSeconds"].values())
    # the same table in run.json, and in words in jury show
    run_json = json.loads(Path(d / "run.json").read_text())
    assert run_json["jury"]["findings"][FID]["verificationTable"] == table
    text = jury("show", d.name).out
    assert f"{FID} verification (pytest," in text and "verified" in text
    assert "coverage stats.py: 2 of 2 changed lines run by the test" in text, text
    assert "weakened: none" in text
    # verified, then integrated
    assert "ordered[middle - 1]" in git_show(sample_repo, f"jury/{d.name}:stats.py")
    assert refuter_calls(fake_state)  # a test signal: the refuter of another family was asked


def git_show(repo: Path, what: str) -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), "show", what], capture_output=True, text=True).stdout
