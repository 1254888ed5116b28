"""Mechanical verification against real git repositories and real test runs (python -m unittest)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.refute.commands import split_command
from orchestrator.refute.signals import gate
from workers.isolation.worktree import Worktrees, diff_patch, discard_changes, git
from workers.verification.runs import CommandRun, signals_of
from workers.verification.verify import (
    is_test_path,
    run_checks,
    run_command,
    verify_fix,
    weakening,
)

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
PY = shlex.quote(sys.executable)

CALC = """\
def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]


def double(x):
    return x * 2


def sub(a, b):
    return a + b
"""
CALC_FIXED = CALC.replace(
    "    return s[len(s) // 2]",
    "    n = len(s)\n    return (s[n // 2 - 1] + s[n // 2]) / 2 if n % 2 == 0 else s[n // 2]",
)
TEST_CALC = """\
import unittest

from calc import double, median


class CalcTest(unittest.TestCase):
    def test_odd(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_double(self):
        self.assertEqual(double(2), 4)
"""


def unit_test(name: str, body: str) -> str:
    """A unittest module with one test method whose body is ``body``."""
    return (
        "import unittest\n\nfrom calc import median, sub\n\n\n"
        f"class {name.title()}Test(unittest.TestCase):\n    def test_{name}(self):\n        {body}\n"
    )


def sh_git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *IDENTITY, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def registered(repo: Path) -> list[str]:
    lines = git(["worktree", "list", "--porcelain"], repo).splitlines()
    return [line for line in lines if line.startswith("worktree ")]


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "repo"
    path.mkdir()
    sh_git(path, "init", "-q", "-b", "main")
    (path / "calc.py").write_text(CALC)
    (path / "tests").mkdir()
    (path / "tests" / "__init__.py").write_text("")
    (path / "tests" / "test_calc.py").write_text(TEST_CALC)
    (path / "README.md").write_text("calc\n")
    sh_git(path, "add", "-A")
    sh_git(path, "commit", "-q", "-m", "first")
    yield path
    assert len(registered(path)) == 1, "a worktree was left behind"


@pytest.fixture
def wts(tmp_path: Path) -> Worktrees:
    return Worktrees(tmp_path / "wts")


def head(repo: Path) -> str:
    return sh_git(repo, "rev-parse", "HEAD")


def make_patch(repo: Path, files: dict[str, str | None]) -> bytes:
    """The patch that writes (or, for None, deletes) ``files`` on top of HEAD; the checkout is left clean."""
    for rel, text in files.items():
        path = repo / rel
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    patch = diff_patch(repo)
    discard_changes(repo)
    return patch


def verify(repo: Path, wts: Worktrees, tmp_path: Path, patch: bytes, command: str, timeout: float = 60):
    return verify_fix(
        repo,
        head(repo),
        patch,
        command,
        worktrees=wts,
        name="verify-f1",
        timeout=timeout,
        out_dir=tmp_path / "out",
    )


GOOD_TEST = unit_test("even", "self.assertEqual(median([4, 1, 3, 2]), 2.5)")


@pytest.mark.parametrize(
    ("files", "module"),
    [
        pytest.param(
            {"calc.py": CALC_FIXED, "tests/test_even.py": GOOD_TEST},
            "tests.test_even",
            id="fix+test",
        ),
        pytest.param(
            {
                "calc.py": CALC.replace(CALC.split("\n\n\n")[0], "from mid import median"),
                "mid.py": CALC_FIXED.split("\n\n\ndef double")[0] + "\n",
                "tests/test_even.py": GOOD_TEST,
            },
            "tests.test_even",
            id="fix-in-new-module",  # the added non-test module must be deleted on the reverted tree
        ),
        pytest.param(
            # Same size, same second: a stale .pyc of the fixed code must not answer for the reverted one.
            {
                "calc.py": CALC.replace("return a + b", "return a - b"),
                "tests/test_sub.py": unit_test("sub", "self.assertEqual(sub(3, 1), 2)"),
            },
            "tests.test_sub",
            id="same-size-fix",
        ),
    ],
)
def test_genuine_fix_verifies(
    repo: Path,
    wts: Worktrees,
    tmp_path: Path,
    files: dict[str, str | None],
    module: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)  # verify must not rely on the host's
    patch = make_patch(repo, files)
    v = verify(repo, wts, tmp_path, patch, f"{PY} -m unittest {module}")
    assert v.ok, v
    assert v.reason is None and v.weakening == []
    assert [(r.tree, r.exit_code == 0) for r in v.runs[:3]] == [
        ("fixed", True),
        ("reverted", False),
        ("stripped", True),  # the fix without its comments, re-formatted: still passes
    ]
    # each changed executable line deleted on its own: the test fails every time
    assert v.mutants and all(m.outcome == "killed" for m in v.mutants)
    # after the fixed code loaded the mutants' way (from bytecode) passes
    assert [(r.tree, r.exit_code == 0) for r in v.runs[3:]] == [("mutant", True)] + [("mutant", False)] * len(
        v.mutants
    )
    assert all(r.sha and len(r.sha) == 40 for r in v.runs)
    assert v.runs[0].sha != v.runs[1].sha  # different trees
    assert "FAILED" in v.runs[1].output_tail  # unittest reports on stderr; the tail keeps it
    assert (repo / "calc.py").read_text() == CALC  # the user's checkout is untouched


@pytest.mark.parametrize(
    ("files", "command", "reason", "n_runs"),
    [
        pytest.param(
            {
                "calc.py": CALC_FIXED,
                "tests/test_odd2.py": unit_test("odd", "self.assertEqual(median([5, 1, 9]), 5)"),
            },
            f"{PY} -m unittest tests.test_odd2",
            "the test passes without the fix",
            2,
            id="cheating-test-passes-without-fix",
        ),
        pytest.param(
            {
                "calc.py": CALC_FIXED,
                "tests/test_even.py": unit_test("even", "self.assertEqual(median([4, 1, 3, 2]), 3)"),
            },
            f"{PY} -m unittest tests.test_even",
            "the test fails with the fix (exit 1)",
            1,
            id="fails-with-fix",
        ),
        pytest.param(
            {"calc.py": CALC_FIXED},
            f"{PY} -m unittest tests.test_calc",
            "the fix adds or changes no test file",
            0,
            id="no-test",
        ),
        pytest.param(
            {"tests/test_even.py": GOOD_TEST},
            f"{PY} -m unittest tests.test_even",
            "the fix changes only test files: there is nothing to revert",
            0,
            id="only-a-test",
        ),
        pytest.param(
            {"calc.py": CALC_FIXED, "tests/test_even.py": GOOD_TEST},
            f"{PY} -m unittest 'tests.test_even",
            "test_command cannot be run: cannot split",
            0,
            id="unclosed-quote",
        ),
        pytest.param(
            {"calc.py": CALC_FIXED, "tests/test_even.py": GOOD_TEST},
            f"{PY} -m unittest tests.test_even && echo ok",
            "test_command cannot be run: ",
            0,
            id="needs-a-shell",
        ),
        pytest.param(
            {"calc.py": CALC_FIXED, "tests/test_even.py": GOOD_TEST},
            "no-such-test-runner-xyz tests",
            "not a test command Jury can verify: `no-such-test-runner-xyz` is not pytest",
            0,
            id="not-a-runner",
        ),
        pytest.param(
            {"calc.py": CALC_FIXED, "tests/test_even.py": GOOD_TEST},
            "/nonexistent/bin/python3 -m unittest tests.test_even",
            "test_command cannot be run with the fix: ",
            1,
            id="missing-interpreter",
        ),
    ],
)
def test_fix_not_verified(
    repo: Path,
    wts: Worktrees,
    tmp_path: Path,
    files: dict[str, str | None],
    command: str,
    reason: str,
    n_runs: int,
) -> None:
    patch = make_patch(repo, files)
    v = verify(repo, wts, tmp_path, patch, command)
    assert not v.ok
    assert v.reason is not None and v.reason.startswith(reason), v.reason
    assert len(v.runs) == n_runs


def test_rewritten_assertion_is_weakening(repo: Path, wts: Worktrees, tmp_path: Path) -> None:
    # The "fix" breaks double() and rewrites the existing assertion to the wrong value; both trees behave
    # as a real fix would (passes with it, fails without), so only the weakening check catches it.
    patch = make_patch(
        repo,
        {
            "calc.py": CALC_FIXED.replace("return x * 2", "return x * 3"),
            "tests/test_calc.py": TEST_CALC.replace("double(2), 4)", "double(2), 6)"),
            "tests/test_even.py": GOOD_TEST,
        },
    )
    v = verify(repo, wts, tmp_path, patch, f"{PY} -m unittest tests.test_calc tests.test_even")
    assert v.runs == []  # read from the patch alone: refuted before anything runs
    assert v.weakening == [
        "tests/test_calc.py:11: assertion removed or changed: self.assertEqual(double(2), 4)"
    ]
    assert not v.ok
    assert v.reason == f"the fix weakens existing tests: {v.weakening[0]}"


def test_deleted_test_file_is_weakening(repo: Path, wts: Worktrees, tmp_path: Path) -> None:
    patch = make_patch(
        repo, {"calc.py": CALC_FIXED, "tests/test_even.py": GOOD_TEST, "tests/test_calc.py": None}
    )
    v = verify(repo, wts, tmp_path, patch, f"{PY} -m unittest tests.test_even")
    assert v.weakening == ["tests/test_calc.py: existing test file deleted"]
    assert not v.ok and v.reason is not None and "existing test file deleted" in v.reason


def test_patch_that_does_not_apply(repo: Path, wts: Worktrees, tmp_path: Path) -> None:
    patch = make_patch(repo, {"calc.py": CALC_FIXED, "tests/test_even.py": GOOD_TEST})
    (repo / "calc.py").write_text("something else\n")
    sh_git(repo, "commit", "-q", "-am", "diverge")
    v = verify(repo, wts, tmp_path, patch, f"{PY} -m unittest tests.test_even")
    assert not v.ok and v.runs == []
    assert v.reason is not None and v.reason.startswith("the patch does not apply at ")


def test_fixed_run_times_out(repo: Path, wts: Worktrees, tmp_path: Path) -> None:
    slow = unit_test("slow", "import time; time.sleep(60)")
    patch = make_patch(repo, {"calc.py": CALC_FIXED, "tests/test_slow.py": slow})
    v = verify(repo, wts, tmp_path, patch, f"{PY} -m unittest tests.test_slow", timeout=1.5)
    assert not v.ok and v.reason == "the test times out with the fix"
    assert v.runs[0].timed_out and v.runs[0].seconds < 30


# --- weakening, directly ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new_test_calc", "expected"),
    [
        pytest.param(
            TEST_CALC + "\n    def test_more(self):\n        self.assertTrue(True)\n",
            [],
            id="test-added",
        ),
        pytest.param(
            TEST_CALC.replace(
                "        self.assertEqual(double(2), 4)", "        self.assertEqual(double(2),   4)  "
            ),
            [],
            id="whitespace-only",
        ),
        pytest.param(
            TEST_CALC.replace(
                "    def test_odd(self):\n        self.assertEqual(median([3, 1, 2]), 2)\n\n", ""
            )
            + "\n    def test_odd(self):\n        self.assertEqual(median([3, 1, 2]), 2)\n",
            [],
            id="test-moved",
        ),
        pytest.param(
            TEST_CALC.replace("    def test_double(self):\n        self.assertEqual(double(2), 4)\n", ""),
            [
                "tests/test_calc.py:10: test removed: def test_double(self):",
                "tests/test_calc.py:11: assertion removed or changed: self.assertEqual(double(2), 4)",
            ],
            id="test-removed",
        ),
        pytest.param(
            TEST_CALC.replace("self.assertEqual(median([3, 1, 2]), 2)", "pass"),
            ["tests/test_calc.py:8: assertion removed or changed: self.assertEqual(median([3, 1, 2]), 2)"],
            id="assertion-dropped",
        ),
        pytest.param(
            TEST_CALC.replace("import unittest\n", "import unittest  # stdlib\n"),
            [],
            id="non-assertion-line-changed",
        ),
    ],
)
def test_weakening_table(repo: Path, new_test_calc: str, expected: list[str]) -> None:
    patch = make_patch(repo, {"tests/test_calc.py": new_test_calc})
    assert weakening(repo, head(repo), patch) == expected


def test_weakening_ignores_non_test_files_and_new_tests(repo: Path) -> None:
    patch = make_patch(
        repo,
        {
            "calc.py": "",  # every line of the code removed: not a test file
            "tests/test_new.py": "def test_x():\n    assert 1\n",
        },
    )
    assert weakening(repo, head(repo), patch) == []
    moved = make_patch(repo, {"tests/test_calc.py": None, "tests/unit/test_calc.py": TEST_CALC})
    assert weakening(repo, head(repo), moved) == []  # a rename within the tests
    out = make_patch(repo, {"tests/test_calc.py": None, "examples/calc_check.py": TEST_CALC})
    assert weakening(repo, head(repo), out) == [
        "tests/test_calc.py: existing test file moved out of the tests (examples/calc_check.py)"
    ]


# --- run_command, run_checks, signals ---------------------------------------------------------------


def test_run_checks_exit_codes(repo: Path, wts: Worktrees, tmp_path: Path) -> None:
    checks = {
        "test": f"{PY} -m unittest tests.test_calc",
        "lint": f"{PY} -c 'import sys; print(\"E1 bad\"); sys.exit(3)'",
        "dirty": f'{PY} -c \'open("calc.py", "w").write("broken(")\'',
        "build": f"{PY} -m py_compile calc.py",  # runs after "dirty": the tree was reset in between
        "missing": "no-such-linter-xyz .",
        "bad": "echo 'unclosed",
    }
    runs = run_checks(
        repo, head(repo), checks, worktrees=wts, name="checks-1", timeout=60, out_dir=tmp_path / "out"
    )
    assert [(r.check, r.exit_code) for r in runs] == [
        ("test", 0),
        ("lint", 3),
        ("dirty", 0),
        ("build", 0),
        ("missing", None),
        ("bad", None),
    ]
    assert all(r.tree == "final" and r.sha == head(repo) for r in runs)
    assert "E1 bad" in runs[1].output_tail
    assert runs[4].error == "command not found: no-such-linter-xyz"
    assert runs[5].error is not None and "cannot split" in runs[5].error
    # The kind is the command's, else the check's name; "dirty", "missing" and "bad" are neither.
    signals = signals_of(runs, "declared")
    assert [(s.kind, s.exit_code, s.source) for s in signals] == [
        ("test", 0, "declared"),
        ("lint", 3, "declared"),
        ("build", 0, "declared"),
    ]
    assert gate(signals).open


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("pytest -q", (["pytest", "-q"], {})),
        ("FOO=1 BAR='a b' pytest -k 'x or y'", (["pytest", "-k", "x or y"], {"FOO": "1", "BAR": "a b"})),
        ("pytest 'unclosed", "cannot split"),
        ("FOO=1", "no program"),
        ("", "no program"),
        ("pytest | tee log", "needs a shell (|)"),
        ("cd sub && pytest", "needs a shell (&&)"),
        ("pytest > out.txt", "needs a shell (>)"),
        ("pytest -k 'a && b'", (["pytest", "-k", "a && b"], {})),
    ],
)
def test_split_command(command: str, expected: tuple[list[str], dict[str, str]] | str) -> None:
    got = split_command(command)
    if isinstance(expected, str):
        assert isinstance(got, str) and expected in got
    else:
        assert got == expected


def test_run_command_env_output_and_errors(tmp_path: Path) -> None:
    script = (
        "import os, sys; print('out', os.environ.get('FOO')); print('x' * 9000, file=sys.stderr); sys.exit(4)"
    )
    res = run_command(f"FOO=bar {PY} -c {shlex.quote(script)}", tmp_path, timeout=30, out_dir=tmp_path / "o")
    assert res.exit_code == 4 and res.error is None and not res.timed_out
    assert "out bar" in res.output_tail and "--- stderr ---" in res.output_tail
    assert len(res.output_tail) <= 4000
    bad = run_command("x 'y", tmp_path, timeout=30, out_dir=tmp_path / "o")
    assert bad.exit_code is None and bad.error is not None


def test_run_command_scrubs_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_KEY", "sk-should-not-leak")
    res = run_command(
        f"{PY} -c 'import os; print(os.environ.get(\"MY_API_KEY\"))'",
        tmp_path,
        timeout=30,
        out_dir=tmp_path / "o",
    )
    assert res.exit_code == 0 and res.output_tail.strip() == "None"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_x.py", True),
        ("pkg/tests/helpers.py", True),
        ("test/foo.c", True),
        ("src/__tests__/a.js", True),
        ("spec/models/user_spec.rb", True),
        ("test_x.py", True),
        ("pkg/x_test.py", True),
        ("conftest.py", True),
        ("cmd/main_test.go", True),
        ("web/a.test.ts", True),
        ("web/a.spec.tsx", True),
        ("web/a.test.mjs", True),
        ("lib/user_spec.rb", True),
        ("src/main/java/FooTest.java", True),
        ("calc.py", False),
        ("src/testing_utils.py", False),
        ("src/contest.py", False),
        ("cmd/main.go", False),
        ("web/a.ts", False),
        ("docs/test.md", False),
        ("src/Contest.java", False),
        ("latest/app.py", False),
    ],
)
def test_is_test_path(path: str, expected: bool) -> None:
    assert is_test_path(path) is expected


def test_command_run_passed() -> None:
    base = {"command": "x", "tree": "final", "sha": None, "seconds": 0.1, "output_tail": ""}
    assert CommandRun(**base, exit_code=0).passed
    assert not CommandRun(**base, exit_code=1).passed
    assert not CommandRun(**base, exit_code=None, error="command not found: x").passed


def test_signals_of_verification_keeps_tests_and_drops_plain_programs() -> None:
    def run(command: str, tree: str, code: int) -> CommandRun:
        return CommandRun(command=command, tree=tree, sha=None, exit_code=code, seconds=1, output_tail="")

    runs = [
        run("python3 -m pytest tests/test_x.py", "fixed", 0),
        run("./run-one-test.sh", "fixed", 0),
        run("python3 -m pytest tests/test_x.py", "reverted", 1),
        run("./run-one-test.sh", "reverted", 1),
    ]
    signals = signals_of(runs, "verification")
    assert [(s.kind, s.exit_code, s.tree, s.source) for s in signals] == [
        ("test", 0, "fixed", "verification"),
        ("test", 1, "reverted", "verification"),
    ]


# --- issue 9: cheats refuted with pytest's own report, coverage and the suite -------------------------

PYTEST_CALC = """\
from calc import double, median, sub


def test_odd():
    assert median([3, 1, 2]) == 2


def test_double():
    assert double(2) == 4


def test_sub():
    assert sub(3, 1) == 2
"""
EVEN = "from calc import median\n\n\ndef test_even():\n    assert median([4, 1, 3, 2]) == 2.5\n"
# The sample projects need no pytest plugin; without this, each run in the sandbox loads every plugin the
# dev venv holds (hypothesis, xdist, playwright, ...): 2.1 s of CPU a run against 0.3 s.
PYTEST = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {PY} -m pytest"
PYTEST_CMD = f"{PYTEST} -q tests/test_even.py"
BROKEN_DOUBLE = CALC_FIXED.replace("return x * 2", "return x * 3")


class Cache:
    """An in-memory SuiteCache that counts what it is asked."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.gets = 0

    def get(self, name: str) -> bytes | None:
        self.gets += 1
        return self.data.get(name)

    def put(self, name: str, data: bytes) -> None:
        self.data[name] = data


@pytest.fixture
def pyrepo(tmp_path: Path) -> Iterator[Path]:
    """calc.py with the median bug, and a pytest suite whose ``test_sub`` already fails (sub adds)."""
    path = tmp_path / "pyrepo"
    path.mkdir()
    sh_git(path, "init", "-q", "-b", "main")
    (path / "calc.py").write_text(CALC)
    (path / "tests").mkdir()
    (path / "tests" / "test_calc.py").write_text(PYTEST_CALC)
    sh_git(path, "add", "-A")
    sh_git(path, "commit", "-q", "-m", "first")
    yield path
    assert len(registered(path)) == 1, "a worktree was left behind"


def pyverify(repo: Path, wts: Worktrees, tmp_path: Path, files: dict[str, str | None], command: str, **kw):
    return verify_fix(
        repo,
        head(repo),
        make_patch(repo, files),
        command,
        worktrees=wts,
        name="verify-f1",
        timeout=60,
        out_dir=tmp_path / "out",
        **kw,
    )


def test_genuine_pytest_fix_is_verified_with_its_table(pyrepo: Path, wts: Worktrees, tmp_path: Path) -> None:
    cache = Cache()
    files = {"calc.py": CALC_FIXED, "tests/test_even.py": EVEN}
    v = pyverify(pyrepo, wts, tmp_path, files, PYTEST_CMD, suite_cache=cache)
    assert v.ok, v.reason
    assert v.runner == "pytest"
    assert [(t.id, t.fixed, t.reverted, t.changed) for t in v.tests] == [
        ("tests.test_even::test_even", "passed", "failed", True)
    ]
    (cov,) = v.coverage
    assert (cov.path, cov.status) == ("calc.py", "exercised") and cov.executed == cov.changed == [3, 4]
    assert v.suite is not None and v.suite.head is not None and v.suite.fixed is not None
    assert v.suite.weakened == [] and not v.suite.head.cached
    # the suite already failed on the head (test_sub): listed, not blamed on the fix
    assert v.suite.failing_on_head == ["tests.test_calc::test_sub"]
    assert v.suite.fixed.outcomes["tests.test_even::test_even"] == "passed"
    assert v.config_changes == []
    assert v.seconds >= sum(r.seconds for r in v.runs) > 0
    assert all(r.ran and "--junitxml=" in r.ran and r.command == PYTEST_CMD for r in v.runs)
    # a second finding of the same tree reuses the head's suite: one suite run per fix
    again = pyverify(pyrepo, wts, tmp_path, files, PYTEST_CMD, suite_cache=cache)
    assert again.ok and again.suite is not None and again.suite.head is not None
    assert again.suite.head.cached and again.suite.head.outcomes == v.suite.head.outcomes
    assert len(cache.data) == 1


# Every cheat starts from the same head tree (same content, same tree id): its suite runs once.
CHEATS_CACHE = Cache()
WEAK = "the fix weakens the suite: tests.test_calc::test_double passed on the head and is "
DESELECT = '[tool.pytest.ini_options]\naddopts = "--deselect tests/test_calc.py::test_double"\n'
MARKER_TEST = "import os\n\n\ndef test_even():\n    assert os.path.exists('fixed.marker')\n"
SKIP_MARK = "import pytest\n\npytestmark = pytest.mark.skip('flaky')\n\n"


@pytest.mark.parametrize(
    ("files", "command", "reason"),
    [
        pytest.param(
            {
                "calc.py": BROKEN_DOUBLE,
                "tests/test_even.py": EVEN,
                "tests/test_calc.py": SKIP_MARK + PYTEST_CALC,
            },
            PYTEST_CMD,
            WEAK + "skipped with the fix",
            id="skip-mark",
        ),
        pytest.param(
            {
                "calc.py": BROKEN_DOUBLE,
                "tests/test_even.py": EVEN,
                "conftest.py": 'collect_ignore = ["tests/test_calc.py"]\n',
            },
            PYTEST_CMD,
            WEAK + "missing with the fix",
            id="collect-ignore",
        ),
        pytest.param(
            {
                "calc.py": BROKEN_DOUBLE,
                "tests/test_even.py": EVEN,
                "tests/test_calc.py": None,
                "tests/calc_checks.py": PYTEST_CALC,
            },
            PYTEST_CMD,
            WEAK + "missing with the fix",
            id="renamed-test-file",
        ),
        pytest.param(
            {
                "calc.py": BROKEN_DOUBLE,
                "tests/test_even.py": EVEN,
                "pyproject.toml": DESELECT,
            },
            PYTEST_CMD,
            WEAK + "missing with the fix",
            id="deselect-in-pyproject",
        ),
        pytest.param(
            {
                "calc.py": BROKEN_DOUBLE,
                "tests/test_even.py": EVEN,
                "tests/test_calc.py": "import pytest\n"
                + PYTEST_CALC.replace("def test_double", "@pytest.mark.xfail\ndef test_double"),
            },
            PYTEST_CMD,
            WEAK + "xfailed with the fix",
            id="xfail-mark",
        ),
        pytest.param(
            {
                "calc.py": BROKEN_DOUBLE,
                "tests/test_even.py": EVEN,
                "tests/test_calc.py": PYTEST_CALC.replace("double(2) == 4", "double(2) == 6"),
            },
            PYTEST_CMD,
            "the fix weakens existing tests: tests/test_calc.py:9: assertion removed or changed",
            id="changed-expected-value",
        ),
        pytest.param(
            {
                "calc.py": CALC_FIXED,
                "tests/test_even.py": "import pathlib\n\n\ndef test_even():\n"
                "    assert 'middle - 1' in pathlib.Path('calc.py').read_text() or 'n // 2 - 1' in "
                "pathlib.Path('calc.py').read_text()\n",
            },
            PYTEST_CMD,
            "the test does not exercise the fix: calc.py lines 3-4 not run",
            id="test-never-runs-the-changed-code",
        ),
        pytest.param(
            {
                "calc.py": CALC_FIXED,
                "fixed.marker": "fixed\n",
                "tests/test_even.py": MARKER_TEST,
            },
            PYTEST_CMD,
            "the test does not exercise the fix: calc.py lines 3-4 not run",
            id="marker-file-test",
        ),
        pytest.param(
            {"calc.py": CALC_FIXED, "fixed.marker": "fixed\n", "tests/test_even.py": EVEN},
            "test -f fixed.marker",
            "not a test command Jury can verify: `test` is not pytest",
            id="marker-file-command",
        ),
        pytest.param(
            {
                "calc.py": CALC_FIXED,
                "tests/check_even.py": "from calc import median\nassert median([1, 2]) == 1.5\n",
            },
            f"{PY} tests/check_even.py",
            "not a test command Jury can verify",
            id="plain-program",
        ),
        pytest.param(
            {"calc.py": CALC_FIXED, "tests/test_even.py": EVEN},
            f"{PYTEST} -q tests/test_calc.py",
            "not a test command Jury can verify: it names no test the fix added or changed",
            id="names-an-old-test",
        ),
        pytest.param(
            {"calc.py": CALC_FIXED, "tests/test_even.py": EVEN},
            f"{PYTEST} -q -p myplugin tests/test_even.py",
            "not a test command Jury can verify: loading a plugin",
            id="plugin-option",
        ),
        pytest.param(
            {"calc.py": CALC_FIXED, "tests/test_even.py": EVEN.replace("def test_even", "def check_even")},
            PYTEST_CMD,
            "the named tests did not run with the fix",
            id="no-test-collected",
        ),
        pytest.param(
            {
                "calc.py": CALC_FIXED + "\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n",
                "tests/test_even.py": "from calc import mean, median\n\n\ndef test_even():\n"
                "    assert median([4, 1, 3, 2]) == 2.5 and mean([1, 3]) == 2\n",
            },
            PYTEST_CMD,
            "without the fix the named tests do not run, they do not fail: an import or collection error",
            id="reverted-only-fails-to-import",
        ),
    ],
)
def test_cheat_is_refuted(
    pyrepo: Path, wts: Worktrees, tmp_path: Path, files: dict[str, str | None], command: str, reason: str
) -> None:
    v = pyverify(pyrepo, wts, tmp_path, files, command, suite_cache=CHEATS_CACHE)
    assert not v.ok
    assert v.reason is not None and v.reason.startswith(reason), v.reason


def test_configuration_changes_are_listed(pyrepo: Path, wts: Worktrees, tmp_path: Path) -> None:
    files = {
        "calc.py": BROKEN_DOUBLE,
        "tests/test_even.py": EVEN,
        "conftest.py": 'collect_ignore = ["tests/test_calc.py"]\n',
        "pyproject.toml": '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n',
        "tests/test_calc.py": SKIP_MARK + PYTEST_CALC,
    }
    v = pyverify(pyrepo, wts, tmp_path, files, PYTEST_CMD)
    assert v.config_changes == [
        "conftest.py: test configuration added",
        "pyproject.toml: test configuration changed",
        "tests/test_calc.py: existing test file edited beyond added tests"
        " (2 line(s) added outside new tests)",
    ]
    assert v.suite is not None and {w.id for w in v.suite.weakened} == {
        "tests.test_calc::test_double",
        "tests.test_calc::test_odd",
    }


def test_added_tests_in_an_existing_file_are_no_configuration_change(
    pyrepo: Path, wts: Worktrees, tmp_path: Path
) -> None:
    more = PYTEST_CALC + "\n\ndef test_even():\n    assert median([4, 1, 3, 2]) == 2.5\n"
    v = pyverify(
        pyrepo,
        wts,
        tmp_path,
        {"calc.py": CALC_FIXED, "tests/test_calc.py": more},
        f"{PYTEST} -q tests/test_calc.py::test_even",
    )
    assert v.ok, v.reason
    assert v.config_changes == []
    assert [(t.id, t.fixed, t.reverted) for t in v.tests] == [
        ("tests.test_calc::test_even", "passed", "failed")
    ]


def test_unittest_fix_whose_test_imports_a_new_name_does_not_count_as_failing(
    repo: Path, wts: Worktrees, tmp_path: Path
) -> None:
    test = "import unittest\n\nfrom calc import mean, median\n\n\nclass T(unittest.TestCase):\n"
    test += "    def test_even(self):\n        self.assertEqual(median([4, 1, 3, 2]), 2.5)\n"
    files = {
        "calc.py": CALC_FIXED + "\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n",
        "tests/test_even.py": test,
    }
    v = verify(repo, wts, tmp_path, make_patch(repo, files), f"{PY} -m unittest tests.test_even")
    assert not v.ok and v.reason is not None
    assert v.reason.startswith("without the fix the named tests do not run, they do not fail"), v.reason
    assert "Failed to import test module" in v.reason or "ImportError" in v.reason


# --- a runner without coverage in Jury: node --test ----------------------------------------------------

CALC_JS = """\
function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function double(x) {
  return x * 2;
}

module.exports = { median, double };
"""
CALC_JS_FIXED = CALC_JS.replace(
    "  return s[Math.floor(s.length / 2)];",
    "  const m = Math.floor(s.length / 2);\n  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;",
)
NODE_TEST = """\
const test = require("node:test");
const assert = require("node:assert");
const { median, double } = require("../calc.js");

test("odd median", () => assert.strictEqual(median([3, 1, 2]), 2));
test("double", () => assert.strictEqual(double(2), 4));
"""
NODE_EVEN = """\
const test = require("node:test");
const assert = require("node:assert");
const { median } = require("../calc.js");

test("even median", () => assert.strictEqual(median([4, 1, 3, 2]), 2.5));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_fix_is_verified_and_its_coverage_is_not_measured(tmp_path: Path, wts: Worktrees) -> None:
    repo = tmp_path / "js"
    (repo / "test").mkdir(parents=True)
    sh_git(repo, "init", "-q", "-b", "main")
    (repo / "calc.js").write_text(CALC_JS)
    (repo / "test" / "calc.test.js").write_text(NODE_TEST)
    sh_git(repo, "add", "-A")
    sh_git(repo, "commit", "-q", "-m", "first")
    genuine = {"calc.js": CALC_JS_FIXED, "test/median.test.js": NODE_EVEN}
    v = pyverify(repo, wts, tmp_path, genuine, "node --test test/median.test.js")
    assert v.ok, v.reason
    assert v.runner == "node" and v.coverage == []
    assert v.coverage_note == "coverage not measured (node)"  # never "passed"
    assert [(t.id, t.fixed, t.reverted) for t in v.tests] == [("even median", "passed", "failed")]
    assert v.suite is not None and v.suite.weakened == []
    assert v.suite.fixed is not None and v.suite.fixed.outcomes == {
        "odd median": "passed",
        "double": "passed",
        "even median": "passed",
    }
    # the same fix hiding the test it broke by renaming its file out of node's discovery: the suite says
    cheat = {"calc.js": CALC_JS_FIXED.replace("x * 2", "x * 3"), "test/median.test.js": NODE_EVEN}
    cheat |= {"test/calc.test.js": None, "test/calc.js.bak": NODE_TEST}
    v = pyverify(repo, wts, tmp_path, cheat, "node --test test/median.test.js")
    assert not v.ok and v.reason is not None
    assert v.reason.startswith(
        "the fix weakens the suite: double passed on the head and is missing with the fix"
    )
