"""``jury verify`` end to end: a real converged run whose judge wrote a real fix and regression test, the
fix merged into trunk (the test passes there), then the bug brought back on trunk (the test fails: exit 1,
naming the finding, the run and the commits since it last passed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import fake_agent

IDENT = ["-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]
BUG = "    return ordered[middle]\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *IDENT, *args], capture_output=True, text=True, check=True
    ).stdout


def test_verify_passes_while_trunk_holds_the_fix_and_catches_it_reverted(
    jury, sample_repo: Path, write_config, state_dir: Path
) -> None:
    config = write_config(
        fake_agent("finder", "find"), fake_agent("quiet", "clean"), fake_agent("judge", "clean", "fix")
    )
    r = jury(
        "review",
        str(sample_repo),
        "--branch",
        "feature",
        "--trunk",
        "main",
        "--reviewer",
        "finder,quiet",
        "--judge",
        "judge",
        "--config",
        str(config),
        "--no-refute",
    )
    assert r.code == 0, r.out + r.err
    (run,) = (state_dir / "runs").iterdir()
    slug = run.name
    state = json.loads((run / "run.json").read_text())["jury"]
    (fid,) = [f for f, v in state["findings"].items() if v["status"] == "accepted"]

    # nothing merged yet: trunk has neither the median nor its test; the fix's test laid on trunk cannot run
    early = jury("verify", str(sample_repo))
    assert early.code == 0, early.out + early.err
    assert "error" in early.out and "0 of 1" in early.out

    # the PR merged with Jury's fix: the test passes on trunk
    git(sample_repo, "checkout", "--quiet", "main")
    git(sample_repo, "merge", "--quiet", "--ff-only", f"jury/{slug}")
    good = git(sample_repo, "rev-parse", "HEAD").strip()
    ok = jury("verify", str(sample_repo), "--trunk", "main")
    assert ok.code == 0, ok.out + ok.err
    assert "passed" in ok.out and "1 of 1 regression test(s) pass" in ok.out

    # someone brings the bug back on trunk
    stats = sample_repo / "stats.py"
    text = stats.read_text()
    start = text.index("    if len(ordered) % 2 == 0:")
    stats.write_text(text[:start] + BUG)
    git(sample_repo, "commit", "--quiet", "-am", "stats: simpler median")
    bad = git(sample_repo, "rev-parse", "HEAD").strip()
    caught = jury("verify", str(sample_repo), "--trunk", "main")
    assert caught.code == 1, caught.out + caught.err
    assert "failed" in caught.out
    assert f"REGRESSION: finding {fid}" in caught.err and f"run {slug}" in caught.err
    assert f"{good[:12]}..{bad[:12]}" in caught.err  # since the last trunk commit it passed on

    # another repository's runs are not touched; an unknown path is a usage error
    other = jury("verify", "octo/elsewhere")
    assert other.code == 0 and "0 converged run(s)" in other.out
    assert jury("verify", str(sample_repo / "nope")).code != 0
    # a trunk that is not there checks nothing: said, and never exit 0 (nor a passed check recorded)
    missing = jury("verify", str(sample_repo), "--trunk", "no-such-branch")
    assert missing.code == 2, missing.out + missing.err
    assert f"not re-verified: {slug}" in missing.err and "no-such-branch" in missing.err
    assert "nothing re-verified" in missing.err and "regression test(s) pass" not in missing.out

    # each re-verification is on the run's record, apart from the acceptance's own runs
    trunk_runs = json.loads((run / "run.json").read_text())["jury"]["findings"][fid]["trunkRuns"]
    assert [(t["sha"], t["passed"]) for t in trunk_runs[1:]] == [(good, True), (bad, False)]
    assert all(t["tree"] == "trunk" and t["trunk"] == "main" for t in trunk_runs)
    shown = jury("show", slug)
    assert f"{fid} on trunk main at {bad[:12]}: its test FAILS" in shown.out
