"""Verification of a genuine fix in a real package's own suite (issue 9, "Done means"), and its cost.

tests/data/verlib is a small pure-Python package (semantic versions: parse, precedence, bumps, ranges)
with its own pytest suite of 54 tests and its own pytest configuration. Its PR breaks pre-release
precedence (a shorter list of identifiers must sort lower); one of its own tests already fails on the PR
head. The judge's fix restores the rule and adds a regression test. Verification runs in the sandbox:
the named test on the fixed tree under coverage, on the reverted tree, and the package's whole suite on
the head and on the fixed tree. The cost is printed (``pytest -s`` shows it) for docs/verification.md.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from workers.isolation.worktree import Worktrees, diff_patch, discard_changes
from workers.verification.verify import verify_fix

PACKAGE = Path(__file__).resolve().parent.parent / "data" / "verlib"
IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
RIGHT = "    return len(a) < len(b)\n"
WRONG = "    return len(a) > len(b)\n"
REGRESSION = """\
from verlib import Version


def test_a_shorter_prerelease_is_lower():
    assert Version.parse("1.0.0-alpha") < Version.parse("1.0.0-alpha.1")
    assert not Version.parse("1.0.0-rc.1.2") < Version.parse("1.0.0-rc.1")
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *IDENTITY, *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def test_genuine_fix_in_a_real_package_suite(tmp_path: Path) -> None:
    repo = tmp_path / "verlib"
    shutil.copytree(PACKAGE, repo, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "verlib 1.4.0")
    source = repo / "src" / "verlib" / "version.py"
    assert RIGHT in source.read_text()
    source.write_text(source.read_text().replace(RIGHT, WRONG))  # the PR's bug
    git(repo, "commit", "-q", "-am", "precedence: refactor")
    head = git(repo, "rev-parse", "HEAD").strip()
    # the judge's fix: the rule back, and a regression test
    source.write_text(source.read_text().replace(WRONG, RIGHT))
    (repo / "tests" / "test_prerelease_order.py").write_text(REGRESSION)
    patch = diff_patch(repo)
    discard_changes(repo)
    command = f"{shlex.quote(sys.executable)} -m pytest -q tests/test_prerelease_order.py"

    v = verify_fix(
        repo,
        head,
        patch,
        command,
        worktrees=Worktrees(tmp_path / "wts"),
        name="verify-verlib",
        timeout=120,
        out_dir=tmp_path / "out",
    )

    assert v.ok, v.reason
    assert [(t.id, t.fixed, t.reverted) for t in v.tests] == [
        ("tests.test_prerelease_order::test_a_shorter_prerelease_is_lower", "passed", "failed")
    ]
    (cov,) = v.coverage
    assert cov.path == "src/verlib/version.py" and cov.status == "exercised" and cov.executed
    suite = v.suite
    assert suite is not None and suite.head is not None and suite.fixed is not None
    assert suite.weakened == []
    assert suite.failing_on_head == ["tests.test_version::test_semver_precedence_example"]  # not blamed
    assert len(suite.head.outcomes) >= 54 and suite.head.read and suite.fixed.read
    assert set(suite.fixed.outcomes.values()) == {"passed"}
    assert len(suite.fixed.outcomes) == len(suite.head.outcomes) + 1
    runs = {r.tree: r.seconds for r in v.runs}
    print(
        f"\nverification cost (verlib, {len(suite.fixed.outcomes)} tests, sandboxed): "
        f"total {v.seconds:.2f} s; "
        f"named test under coverage on the fixed tree {runs['fixed']:.2f} s, on the reverted tree "
        f"{runs['reverted']:.2f} s; suite on the head {suite.head.seconds:.2f} s (once per tree, cached), "
        f"on the fixed tree {suite.fixed.seconds:.2f} s"
    )
