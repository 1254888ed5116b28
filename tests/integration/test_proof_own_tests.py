"""Without the fix, a test the fix added or changed must fail; another test failing proves nothing.

Real git, real pytest runs in the worker's sandbox (``verify_fix``). The cheat: the head already has a
failing test (``test_sub``: ``sub`` adds); the "fix" repairs ``sub`` and adds a test that passes with or
without it. With the fix reverted, ``test_sub`` fails again, but it is an old test in an unchanged file:
its failure says nothing about the new test, which passes without the fix and so guards nothing
(``workers.verification.proof.reverted_problem`` counts only the fix's own tests).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from workers.isolation.worktree import Worktrees, diff_patch, discard_changes
from workers.verification.verify import Verification, verify_fix

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
PYTEST = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {shlex.quote(sys.executable)} -m pytest -q"

CALC = "def median(xs):\n    return sorted(xs)[len(xs) // 2]\n\n\ndef sub(a, b):\n    return a + b\n"
SUB_FIXED = CALC.replace("return a + b", "return a - b")
OLD_TESTS = "from calc import sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n"
# Passes on either tree: it never calls what the fix changed.
VACUOUS = "from calc import median\n\n\ndef test_odd():\n    assert median([3, 1, 2]) == 2\n"
# Fails without the fix: the genuine regression test of the same fix.
GENUINE = "from calc import sub\n\n\ndef test_sub_again():\n    assert sub(5, 2) == 3\n"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *IDENTITY, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def head_with_a_failing_test(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc.py").write_text(CALC)
    (repo / "tests" / "test_calc.py").write_text(OLD_TESTS)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def verify(repo: Path, tmp_path: Path, files: dict[str, str], command: str) -> Verification:
    for rel, text in files.items():
        (repo / rel).write_text(text)
    patch = diff_patch(repo)
    discard_changes(repo)
    return verify_fix(
        repo,
        git(repo, "rev-parse", "HEAD"),
        patch,
        command,
        worktrees=Worktrees(tmp_path / "wts"),
        name="verify-f1",
        timeout=60,
        out_dir=tmp_path / "out",
    )


def test_an_old_test_failing_without_the_fix_does_not_prove_a_vacuous_new_one(tmp_path: Path) -> None:
    repo = head_with_a_failing_test(tmp_path)
    files = {"calc.py": SUB_FIXED, "tests/test_new.py": VACUOUS}
    v = verify(repo, tmp_path, files, f"{PYTEST} tests/test_new.py tests/test_calc.py")
    assert not v.ok
    assert v.reason is not None and v.reason.startswith("the test passes without the fix"), v.reason
    outcomes = {t.id: (t.fixed, t.reverted, t.changed) for t in v.tests}
    # the old test did fail on the reverted tree: only its being the fix's own test is missing
    assert outcomes["tests.test_calc::test_sub"] == ("passed", "failed", False)
    assert outcomes["tests.test_new::test_odd"] == ("passed", "passed", True)


def test_the_same_fix_with_a_test_of_its_own_that_fails_without_it_verifies(tmp_path: Path) -> None:
    repo = head_with_a_failing_test(tmp_path)
    files = {"calc.py": SUB_FIXED, "tests/test_new.py": GENUINE}
    v = verify(repo, tmp_path, files, f"{PYTEST} tests/test_new.py tests/test_calc.py")
    assert v.ok, v.reason
