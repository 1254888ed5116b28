"""A vacuous fix is refused end to end (issue 48, item 4): ``jury review`` on the demo sample repository
with judges that fix nothing but leave a marker their "regression test" looks for
(tests/fakes/vacuous_judges.py). Verification — real git, every run in the bwrap sandbox — refutes each,
no model is asked, nothing reaches ``jury/<slug>``, and once the judge has tried as often as the run allows
the finding ends ``deferred`` with the reason. An honest judge's fix, verified the same way, is integrated.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_second_opinion import (
    FAKES,
    FID,
    JUDGE_MODEL,
    critic,
    entry,
    events_of,
    finder,
    git,
    jury_branches,
    refuter_calls,
    review,
    shown,
    the_run,
)

COMMENT = "the fix changes no executable line (only comments, docstrings or blank lines: stats.py)"
ON_IMPORT = "the test does not exercise the fix: stats.py lines 16 run only on import"


def vacuous_judge(mode: str) -> str:
    return entry("judge", "agent", "clean", JUDGE_MODEL, judge=("vacuous_judges", mode))


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("comment", COMMENT),
        # Jury imports stats before the tests run: the constant ran, outside every test
        ("constant-source", ON_IMPORT),
        ("constant-import", ON_IMPORT),
    ],
)
def test_a_vacuous_fix_ends_deferred_with_the_reason(
    jury, sample_repo, write_config, state_dir, fake_state, mode, why
) -> None:
    assert (FAKES / "vacuous_judges.py").exists()
    config = write_config(finder(), critic("not-refuted"), vacuous_judge(mode))
    r = review(jury, sample_repo, config, "--rounds", "1")
    d = the_run(state_dir)
    state = shown(jury, d.name)
    # refuted by verification alone, each time the judge tried
    assert refuter_calls(fake_state) == []
    verdicts = events_of(d, "refute.verdict")
    assert verdicts and all(v["source"] == "verification" and v["outcome"] == "refuted" for v in verdicts)
    assert all(v["reason"].startswith(why) for v in verdicts), verdicts[0]["reason"]
    # nothing of it reached a tree
    assert events_of(d, "commit.pushed") == [] and state["commits"] == [] and jury_branches(sample_repo) == ""
    f = state["findings"][FID]
    assert f["status"] == "deferred" and f.get("sha") is None
    assert why in f["reason"], f["reason"]
    assert state["target"]["state"] == "human" and r.code == 1, r.out + r.err
    table = f["verificationTable"]
    assert table["ok"] is False and table["reason"].startswith(why)
    # every run of the judge's test was in the sandbox, on the fixed and reverted trees at most
    ran = events_of(d, "verify.ran")
    assert ran and {e["tree"] for e in ran} <= {"fixed", "reverted"}


def test_an_honest_fix_is_still_verified_and_integrated(
    jury, sample_repo, write_config, state_dir, fake_state
) -> None:
    config = write_config(finder(), critic("not-refuted"), vacuous_judge("honest"))
    r = review(jury, sample_repo, config)
    assert r.code == 0, r.out + r.err
    d = the_run(state_dir)
    f = shown(jury, d.name)["findings"][FID]
    assert f["status"] == "accepted"
    table = f["verificationTable"]
    assert table["ok"] is True and table["runner"] == "unittest"
    # the stripped copy passed and each changed line, deleted on its own, failed the test
    assert {"fixed", "reverted", "stripped", "mutant"} <= set(table["runSeconds"])
    trees = [e["tree"] for e in events_of(d, "verify.ran") if e["id"] == FID]
    assert trees == ["fixed", "reverted", "stripped", "mutant", "mutant", "mutant"]
    # the control (the fix itself from bytecode) passed, then each of the two lines deleted failed
    codes = [e["exitCode"] for e in events_of(d, "verify.ran") if e["tree"] == "mutant"]
    assert codes[0] == 0 and all(c != 0 for c in codes[1:]), json.dumps(events_of(d, "verify.ran"))
    assert "ordered[middle - 1]" in git(sample_repo, "show", f"jury/{d.name}:stats.py")
