"""A CLI reviewer that writes its worktree: refused by the kernel in the sandbox; without the sandbox,
recorded and discarded. In neither case does anything it wrote reach a branch or the reviewed
repository's working tree.

The ``scribble`` fake reviewer tries to change ``stats.py`` and to add ``notes.txt``, says what became of
each write, and finds nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import fake_agent, logging_git
from tests.e2e.test_review import events_of, git, run_dir

ROUND_1 = "round-1.scribe.stdout.txt"


def review(jury, repo: Path, config: Path, env: dict[str, str] | None = None):
    return jury(
        "review",
        str(repo),
        "--branch",
        "feature",
        "--trunk",
        "main",
        "--reviewer",
        "quiet,scribe",
        "--judge",
        "judge",
        "--config",
        str(config),
        env=env,
    )


def entries() -> str:
    return "\n".join(
        [fake_agent("quiet", "clean"), fake_agent("scribe", "scribble"), fake_agent("judge", "clean", "fix")]
    )


def assert_nothing_landed(repo: Path, before: str, source: str, slug: str) -> None:
    assert git(repo, "rev-parse", "feature").strip() == before
    assert git(repo, "show", "feature:stats.py") == source
    assert git(repo, "branch", "--list", f"jury/{slug}") == ""
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert not list(repo.rglob("notes.txt"))
    assert len(git(repo, "worktree", "list").splitlines()) == 1  # the reviewer's checkout is gone


def test_in_the_sandbox_a_reviewers_writes_are_refused_by_the_kernel(
    jury, sample_repo: Path, tmp_path: Path, state_dir: Path
) -> None:
    before = git(sample_repo, "rev-parse", "feature").strip()
    source = git(sample_repo, "show", "feature:stats.py")
    config = tmp_path / "operator.toml"
    config.write_text(entries())
    bin_dir, calls = logging_git(tmp_path)
    r = review(jury, sample_repo, config, env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert r.code == 0, r.out + r.err
    d = run_dir(state_dir)
    said = (d / ROUND_1).read_text()
    assert "could not write stats.py: Read-only file system" in said, said
    assert "could not write notes.txt: Read-only file system" in said, said
    assert [e for e in events_of(d) if e["t"] == "agent.wrote"] == []  # nothing changed, nothing to record
    # The kernel held the reviewers' trees read-only: nobody asked git what they changed.
    assert [c for c in calls.read_text().splitlines() if " status " in c] == []
    assert "changed files" not in jury("show", d.name).out
    assert_nothing_landed(sample_repo, before, source, d.name)


def test_without_the_sandbox_a_reviewers_writes_are_recorded_and_discarded(
    jury, sample_repo: Path, tmp_path: Path, state_dir: Path
) -> None:
    before = git(sample_repo, "rev-parse", "feature").strip()
    source = git(sample_repo, "show", "feature:stats.py")
    config = tmp_path / "operator.toml"
    config.write_text('[sandbox]\nmode = "none"\n' + entries())
    r = review(jury, sample_repo, config)
    assert r.code == 0, r.out + r.err
    d = run_dir(state_dir)
    said = (d / ROUND_1).read_text()
    assert "wrote stats.py" in said and "wrote notes.txt" in said, said
    (wrote,) = [e for e in events_of(d) if e["t"] == "agent.wrote"]
    assert (wrote["agent"], wrote["round"], wrote["paths"]) == ("scribe", 1, ["notes.txt", "stats.py"])
    assert "scribe changed files (discarded): notes.txt, stats.py" in jury("show", d.name).out
    assert_nothing_landed(sample_repo, before, source, d.name)
