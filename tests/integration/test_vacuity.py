"""A vacuous fix is refused (issue 48, item 4): ``verify_fix`` on a real git repository, every test run in
the bwrap sandbox under pytest and coverage, as the judge's patch would be verified.

The attacker fixes nothing: it leaves a marker (a comment, a module-level constant) and a "regression
test" that looks for it — in the source text, or by importing the module. Coverage refuses a fix whose
changed executable lines a test ran only on import, or which changes none; the stripped copy (comments
gone, code re-formatted) refuses a test that reads the source; and each changed executable line deleted
on its own must make the test fail, at most ``vacuity.MAX_MUTATED_LINES`` of them, else the fix is
unverifiable. A real fix passes all of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_verify import (
    CALC,
    CALC_FIXED,
    EVEN,
    PY,
    PYTEST,
    PYTEST_CMD,
    pyrepo,
    pyverify,
    sh_git,
    wts,
)
from workers.isolation.worktree import Worktrees
from workers.verification import vacuity

__all__ = ["pyrepo", "wts"]  # the fixtures, shared with test_verify

BUG = "    return s[len(s) // 2]\n"
READ_SOURCE = (
    "import pathlib\n\n\ndef test_even():\n    assert {needle!r} in pathlib.Path('calc.py').read_text()\n"
)
# calc.py with a constant the test can look for, and nothing fixed
WITH_CONSTANT = CALC + "\n\nMEDIAN_FIXED = True\n"
NO_EXECUTABLE_LINE = "the fix changes no executable line (only comments, docstrings or blank lines: calc.py)"
ON_IMPORT = "the test does not exercise the fix: calc.py lines 14 run only on import"
# a function the module calls at import, and a test that imports the module inside its body: the function's
# line runs while the test runs, and deleting it fails the test, yet the test calls nothing
WITH_MARK = CALC + '\n\ndef _mark():\n    return "fixed"\n\n\nMARKER = _mark()\n'
MARK_ON_IMPORT = "the test does not exercise the fix: calc.py lines 14-15, 18 run only on import"
MARK_TEST = "def test_even():\n{body}\n    assert calc.MARKER == 'fixed' and calc.median([3, 1, 2]) == 2\n"
STRIPPED = "the test does not pass once comments are stripped and the code re-formatted (calc.py)"


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        pytest.param(
            {
                "calc.py": CALC.replace(BUG, "    # FIXED: even lengths average the middle two\n" + BUG),
                "tests/test_even.py": READ_SOURCE.format(needle="# FIXED"),
            },
            NO_EXECUTABLE_LINE,
            id="comment-line-the-test-reads",
        ),
        pytest.param(
            {
                "calc.py": CALC.replace(BUG, BUG.rstrip() + "  # FIXED\n"),
                "tests/test_even.py": "import pathlib\n\nfrom calc import median\n\n\ndef test_even():\n"
                "    assert median([3, 1, 2]) == 2 and '# FIXED' in pathlib.Path('calc.py').read_text()\n",
            },
            STRIPPED,
            id="comment-on-a-line-the-test-runs",
        ),
        pytest.param(
            {
                "calc.py": WITH_CONSTANT,
                "tests/test_even.py": READ_SOURCE.format(needle="MEDIAN_FIXED = True"),
            },
            ON_IMPORT,  # Jury imported calc before the tests ran: the constant ran, outside every test
            id="constant-the-test-reads-as-text",
        ),
        pytest.param(
            {
                "calc.py": WITH_CONSTANT,
                "tests/test_even.py": "def test_even():\n    import calc\n\n"
                "    assert calc.median([3, 1, 2]) == 2 and hasattr(calc, 'MEDIAN_FIXED')\n",
            },
            ON_IMPORT,
            id="constant-imported-inside-the-test",
        ),
        pytest.param(
            {
                "calc.py": WITH_CONSTANT,
                "tests/test_even.py": "from calc import MEDIAN_FIXED, median\n\n\ndef test_even():\n"
                "    assert MEDIAN_FIXED and median([3, 1, 2]) == 2\n",
            },
            ON_IMPORT,
            id="constant-imported-by-the-test-module",
        ),
        pytest.param(
            {"calc.py": WITH_MARK, "tests/test_even.py": MARK_TEST.format(body="    import calc\n")},
            MARK_ON_IMPORT,
            id="function-the-module-calls-at-import-imported-inside-the-test",
        ),
        pytest.param(
            {
                "calc.py": WITH_MARK,
                "tests/test_even.py": MARK_TEST.format(
                    body="    import importlib\n\n    import calc\n\n    calc = importlib.reload(calc)\n"
                ),
            },
            MARK_ON_IMPORT,
            id="function-the-module-calls-at-import-reloaded-inside-the-test",
        ),
        pytest.param(
            {
                "calc.py": WITH_MARK,
                "tests/test_even.py": MARK_TEST.format(
                    body="    import sys\n\n    sys.modules.pop('calc', None)\n    import calc\n"
                ),
            },
            MARK_ON_IMPORT,
            id="function-the-module-calls-at-import-dropped-from-sys-modules-inside-the-test",
        ),
        pytest.param(
            {
                # coverage starts a test's context at any function whose name starts with "test"
                "calc.py": WITH_MARK.replace("_mark()", "test_mark()"),
                "tests/test_even.py": MARK_TEST.format(body="    import calc\n"),
            },
            MARK_ON_IMPORT,
            id="function-named-like-a-test-the-module-calls-at-import",
        ),
        pytest.param(
            {
                # the working directory comes first on sys.path: this empty module shadows Jury's plugin
                "jury_preimport.py": "",
                "calc.py": WITH_MARK,
                "tests/test_even.py": MARK_TEST.format(body="    import calc\n"),
            },
            MARK_ON_IMPORT,
            id="function-the-module-calls-at-import-with-jurys-plugin-shadowed",
        ),
        pytest.param(
            {
                "calc.py": CALC.replace("def median", "# the median is broken\ndef median", 1),
                "tests/test_even.py": READ_SOURCE.format(needle="def median"),
            },
            NO_EXECUTABLE_LINE,
            id="comment-line-above-a-def",
        ),
        pytest.param(
            {
                "calc.py": CALC_FIXED.replace(
                    "    n = len(s)\n", "    n = len(s)\n    checked = True  # noqa\n"
                ),
                "tests/test_even.py": "import pathlib\n\nfrom calc import median\n\n\ndef test_even():\n"
                "    assert median([4, 1, 3, 2]) == 2.5\n"
                "    assert 'checked = True' in pathlib.Path('calc.py').read_text()\n",
            },
            # the mutant is bytecode only: the source still holds the line the test reads, and it passes
            "the test still passes with calc.py line 4 deleted: that line is not what the test checks",
            id="dead-line-beside-a-real-fix-read-as-text",
        ),
        pytest.param(
            {
                "calc.py": CALC_FIXED.replace("    n = len(s)\n", "    n = len(s)\n    checked = True\n"),
                "tests/test_even.py": EVEN,
            },
            "the test still passes with calc.py line 4 deleted: that line is not what the test checks",
            id="a-line-the-test-passes-without",
        ),
        pytest.param(
            {
                "calc.py": CALC_FIXED.replace("    n = len(s)\n", "    n = len(s)\n    checked = True\n"),
                "tests/test_even.py": "import pathlib\n\nfrom calc import median\n\n\ndef test_even():\n"
                "    assert median([4, 1, 3, 2]) == 2.5\n"
                "    assert 'checked = True' in pathlib.Path('calc.py').read_text()\n"
                "    assert not list(pathlib.Path('.').rglob('*.pyc'))  # fails on every mutant\n",
            },
            "unverifiable: the test does not pass on the fix loaded from its own bytecode",
            id="a-test-that-notices-the-mutants-bytecode",
        ),
    ],
)
def test_a_vacuous_fix_is_refused(
    pyrepo: Path, wts: Worktrees, tmp_path: Path, files: dict[str, str | None], reason: str
) -> None:
    v = pyverify(pyrepo, wts, tmp_path, files, PYTEST_CMD)
    assert not v.ok
    assert v.reason is not None and v.reason.startswith(reason), v.reason
    # every run was the named tests in the sandbox; none of the cheats reached the suite's trees
    assert {r.tree for r in v.runs} <= {"fixed", "reverted", "stripped", "mutant"}


def test_comment_marker_never_reaches_the_mutants(pyrepo: Path, wts: Worktrees, tmp_path: Path) -> None:
    files = {
        "calc.py": CALC.replace(BUG, BUG.rstrip() + "  # FIXED\n"),
        "tests/test_even.py": "import pathlib\n\nfrom calc import median\n\n\ndef test_even():\n"
        "    assert median([3, 1, 2]) == 2 and '# FIXED' in pathlib.Path('calc.py').read_text()\n",
    }
    v = pyverify(pyrepo, wts, tmp_path, files, PYTEST_CMD)
    # coverage let it through (line 3 is executable and the test ran it inside median) ...
    (cov,) = v.coverage
    assert (cov.status, cov.executed) == ("exercised", [3])
    # ... the stripped copy did not: its test failed there, and no mutant was tried
    assert [(r.tree, r.exit_code == 0) for r in v.runs] == [
        ("fixed", True),
        ("reverted", False),
        ("stripped", False),
    ]
    assert v.mutants == []


def test_a_real_fix_is_accepted_with_each_line_killed(pyrepo: Path, wts: Worktrees, tmp_path: Path) -> None:
    # a comment beside the fix is fine: the test runs the code, not the text
    fixed = CALC_FIXED.replace("    n = len(s)\n", "    n = len(s)  # even lengths average the middle two\n")
    v = pyverify(pyrepo, wts, tmp_path, {"calc.py": fixed, "tests/test_even.py": EVEN}, PYTEST_CMD)
    assert v.ok, v.reason
    assert [(m.path, m.line, m.outcome) for m in v.mutants] == [
        ("calc.py", 3, "killed"),
        ("calc.py", 4, "killed"),
    ]
    assert [(r.tree, r.exit_code == 0) for r in v.runs] == [
        ("fixed", True),
        ("reverted", False),
        ("stripped", True),
        ("mutant", True),  # the control: the fix itself, loaded from bytecode as the mutants are
        ("mutant", False),
        ("mutant", False),
    ]


def test_a_real_fix_imported_inside_the_test_is_accepted(
    pyrepo: Path, wts: Worktrees, tmp_path: Path
) -> None:
    # Jury imports calc before the tests run, so the import inside the test runs none of calc: the lines
    # the test's context holds are the ones median ran when the test called it
    test = "def test_even():\n    from calc import median\n\n    assert median([4, 1, 3, 2]) == 2.5\n"
    v = pyverify(pyrepo, wts, tmp_path, {"calc.py": CALC_FIXED, "tests/test_even.py": test}, PYTEST_CMD)
    assert v.ok, v.reason
    (cov,) = v.coverage
    assert (cov.status, cov.executed) == ("exercised", [3, 4])


UNITTEST_EVEN = (
    "import unittest\n\n\nclass EvenTest(unittest.TestCase):\n    def test_even(self):\n"
    "        import calc\n\n        self.assertEqual({check}, {expected})\n"
)


def test_under_unittest_the_modules_are_imported_before_the_tests_too(
    pyrepo: Path, wts: Worktrees, tmp_path: Path
) -> None:
    cmd = f"{PY} -m unittest tests.test_even"
    marker = {
        "calc.py": WITH_MARK,
        "tests/__init__.py": "",
        "tests/test_even.py": UNITTEST_EVEN.format(check="calc.MARKER", expected="'fixed'"),
    }
    vacuous = pyverify(pyrepo, wts, tmp_path, marker, cmd)
    assert not vacuous.ok
    assert vacuous.reason is not None and vacuous.reason.startswith(MARK_ON_IMPORT), vacuous.reason
    honest = {
        "calc.py": CALC_FIXED,
        "tests/__init__.py": "",
        "tests/test_even.py": UNITTEST_EVEN.format(check="calc.median([4, 1, 3, 2])", expected="2.5"),
    }
    real = pyverify(pyrepo, wts, tmp_path, honest, cmd)
    assert real.ok, real.reason
    (cov,) = real.coverage
    assert (cov.status, cov.executed) == ("exercised", [3, 4])


def test_more_lines_than_the_bound_are_unverifiable(
    pyrepo: Path, wts: Worktrees, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vacuity, "MAX_MUTATED_LINES", 1)
    v = pyverify(pyrepo, wts, tmp_path, {"calc.py": CALC_FIXED, "tests/test_even.py": EVEN}, PYTEST_CMD)
    assert not v.ok
    assert v.reason == (
        "unverifiable: the fix changes 2 executable lines and Jury deletes at most 1 one at a time to see "
        "the test fail; split the fix"
    )
    assert v.mutants == [] and [r.tree for r in v.runs] == ["fixed", "reverted", "stripped"]


SUB = "def sub(a, b):\n    return a + b\n"
# sub with a bad early return under a comment: head of the repository in the test below
SUB_BUGGY = "def sub(a, b):\n    # BUG: adds\n    if a > b:\n        return a + b\n    return a - b\n"
SUB_TEST = "from calc import sub\n\n\ndef test_sub_big():\n    assert sub(5, 1) == 4\n"
COMMENT_TEST = (
    "import pathlib\n\n\ndef test_sub_big():\n    assert 'BUG' not in pathlib.Path('calc.py').read_text()\n"
)


def test_a_deletion_of_code_is_a_fix_and_of_a_comment_is_not(
    pyrepo: Path, wts: Worktrees, tmp_path: Path
) -> None:
    (pyrepo / "calc.py").write_text(CALC.replace(SUB, SUB_BUGGY))
    sh_git(pyrepo, "commit", "-qam", "sub with an early return that adds")
    cmd = f"{PYTEST} -q tests/test_sub_big.py"
    # the fix only deletes the bad early return: no changed line to run, the reverted run judges it
    code = pyverify(
        pyrepo,
        wts,
        tmp_path,
        {
            "calc.py": CALC.replace(SUB, SUB_BUGGY.replace("    if a > b:\n        return a + b\n", "")),
            "tests/test_sub_big.py": SUB_TEST,
        },
        cmd,
    )
    assert code.ok, code.reason
    (cov,) = code.coverage
    assert (cov.status, cov.deletes_code) == ("no executable change", True)
    # the "fix" only deletes the comment its test looks for: no fix
    comment = pyverify(
        pyrepo,
        wts,
        tmp_path,
        {
            "calc.py": CALC.replace(SUB, SUB_BUGGY.replace("    # BUG: adds\n", "")),
            "tests/test_sub_big.py": COMMENT_TEST,
        },
        cmd,
    )
    assert not comment.ok
    assert comment.reason is not None and comment.reason.startswith(NO_EXECUTABLE_LINE), comment.reason
