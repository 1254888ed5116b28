"""``--push`` to a branch that cannot be updated: the run fails, says why, and loses nothing.

The reviewed branch is the one checked out in the reviewed repository, so git refuses to move it (the
working tree would no longer match). The run ends ``failed`` with git's own words and where the fixes
are; the fixes stay on ``jury/<slug>``, the branch and the working tree are as they were; once the
branch can move, ``--resume`` pushes them.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_review import events_of, git, review_args, run_dir, standard_jury


def test_a_push_the_branch_refuses_fails_clearly_and_loses_nothing(
    jury, sample_repo: Path, write_config, state_dir: Path
) -> None:
    git(sample_repo, "checkout", "--quiet", "feature")
    before = git(sample_repo, "rev-parse", "feature").strip()
    source = (sample_repo / "stats.py").read_text()
    r = jury(*review_args(sample_repo, standard_jury(write_config), "--push"))
    assert r.code == 1, r.out + r.err
    slug = run_dir(state_dir).name
    state = json.loads(jury("show", slug, "--json").out)["target"]
    assert state["state"] == "failed", state
    note = state["stateNote"]
    assert note.startswith("the fixes could not be pushed to feature: ! [remote rejected]"), note
    assert "(branch is currently checked out)" in note and note.endswith(f"they are on jury/{slug}")
    shown = jury("show", slug).out
    assert "failed" in shown and "branch is currently checked out" in shown
    assert "failed" in r.out

    # nothing lost: the fix and its test on jury/<slug>; the branch, its working tree and index untouched
    assert git(sample_repo, "rev-parse", "feature").strip() == before
    assert git(sample_repo, "status", "--porcelain") == ""
    assert (sample_repo / "stats.py").read_text() == source
    assert git(sample_repo, "rev-parse", f"jury/{slug}~1").strip() == before
    assert "ordered[middle - 1]" in git(sample_repo, "show", f"jury/{slug}:stats.py")
    assert not [e for e in events_of(run_dir(state_dir)) if e["t"] == "commit.pushed" and e.get("pushed")]

    # once the branch can move, resuming the run pushes the fixes
    git(sample_repo, "checkout", "--quiet", "main")
    resumed = jury("review", "--resume", slug)
    assert resumed.code == 0, resumed.out + resumed.err
    assert json.loads(jury("show", slug, "--json").out)["target"]["state"] == "converged"
    assert (
        git(sample_repo, "rev-parse", "feature").strip()
        == git(sample_repo, "rev-parse", f"jury/{slug}").strip()
    )
