"""The suite delta and the coverage judgement, as tables (issue 9, parts 3 and 4): pure functions."""

from __future__ import annotations

import json

import pytest

from jury_cli.progress import table_lines
from workers.verification.coverage_check import IMPORT_ONLY, coverage_problem, read_coverage
from workers.verification.suite import SuiteDelta, SuiteSide, compare, delta_problem
from workers.verification.testreport import Outcome


def side(tree: str, outcomes: dict[str, Outcome], **kw) -> SuiteSide:
    return SuiteSide(
        tree=tree, sha="t", command="pytest tests", exit_code=0, seconds=1.0, outcomes=outcomes, **kw
    )


HEAD = {"t::a": "passed", "t::b": "passed", "t::c": "failed", "t::d": "skipped"}


@pytest.mark.parametrize(
    ("fixed", "weakened"),
    [
        pytest.param({**HEAD, "t::new": "passed"}, [], id="a-test-added"),
        pytest.param({**HEAD, "t::c": "passed"}, [], id="a-failing-test-fixed"),
        pytest.param({**HEAD, "t::a": "failed"}, [("t::a", "failed")], id="failing"),
        pytest.param({**HEAD, "t::a": "skipped"}, [("t::a", "skipped")], id="skipped"),
        pytest.param({**HEAD, "t::a": "xfailed"}, [("t::a", "xfailed")], id="xfailed"),
        pytest.param({**HEAD, "t::a": "error"}, [("t::a", "error")], id="error"),
        pytest.param({k: v for k, v in HEAD.items() if k != "t::a"}, [("t::a", "missing")], id="removed"),
        pytest.param(
            {**{k: v for k, v in HEAD.items() if k != "t::a"}, "old::a": "passed"},
            [("t::a", "renamed to old::a")],
            id="renamed",
        ),
        pytest.param({}, [("t::a", "missing"), ("t::b", "missing")], id="nothing-collected"),
    ],
)
def test_compare(fixed: dict[str, Outcome], weakened: list[tuple[str, str]]) -> None:
    got, failing = compare(side("head", HEAD), side("fixed", fixed))
    assert [(w.id, w.fixed) for w in got] == weakened
    assert failing == ["t::c"]  # already failing on the head: never the fix's doing


def test_delta_problem() -> None:
    head = side("head", HEAD)
    ok = SuiteDelta(command="pytest tests", head=head, fixed=side("fixed", HEAD))
    assert delta_problem(ok) is None
    weak, _ = compare(head, side("fixed", {**HEAD, "t::a": "skipped"}))
    assert delta_problem(ok.model_copy(update={"weakened": weak})) == (
        "the fix weakens the suite: t::a passed on the head and is skipped with the fix"
    )
    unread = side("fixed", {}, read=False, problems=["the runner wrote no junit report"])
    assert delta_problem(ok.model_copy(update={"fixed": unread})) == (
        "the suite gives no report with the fix (the runner wrote no junit report)"
    )
    timeout = side("fixed", {}, timed_out=True)
    assert delta_problem(ok.model_copy(update={"fixed": timeout})) == "the suite times out with the fix"
    # a head that could not be read is no evidence against the fix
    blind = SuiteDelta(head=side("head", {}, read=False), fixed=unread, note="not compared")
    assert delta_problem(blind) is None


def cov_json(files: dict[str, dict[str, object]]) -> str:
    return json.dumps({"files": files})


CHANGED = {"calc.py": {3, 4, 9}, "data.json": {1}}


@pytest.mark.parametrize(
    ("entry", "status", "executed"),
    [
        pytest.param(
            {
                "executed_lines": [1, 3, 4],
                "missing_lines": [9],
                "contexts": {"3": [""], "4": ["t.test_x"]},
            },
            "exercised",
            [4],  # line 3 is the def: running it says nothing
            id="run-by-a-test",
        ),
        pytest.param(
            # the def line ran in the test's context: the test imported (or reloaded) the module, so the
            # body line may have run because the module called it at import
            {
                "executed_lines": [1, 3, 4],
                "missing_lines": [9],
                "contexts": {"3": ["", "t.test_x"], "4": ["t.test_x"]},
            },
            "not exercised",
            [],
            id="run-while-a-test-imported-the-module",
        ),
        pytest.param(
            # another test that ran the module's body does not taint one that only called the function
            {
                "executed_lines": [1, 3, 4],
                "missing_lines": [9],
                "contexts": {"3": ["t.test_import"], "4": ["t.test_import", "t.test_x"]},
            },
            "exercised",
            [4],
            id="called-by-a-test-that-did-not-import-it",
        ),
        pytest.param(
            # calc calls its own test_mark() at import: coverage names that a test's context, it is none
            {
                "executed_lines": [1, 3, 4],
                "missing_lines": [9],
                "contexts": {"3": [""], "4": ["calc.test_mark", "calc.Marks.test_mark"]},
            },
            "not exercised",
            [],
            id="run-by-a-function-of-the-module-named-like-a-test",
        ),
        pytest.param(
            {"executed_lines": [1, 2], "missing_lines": [3, 4, 9], "contexts": {"1": [""], "2": [""]}},
            "not exercised",
            [],
            id="never-run",
        ),
        pytest.param(
            {"executed_lines": [3], "missing_lines": [4], "contexts": {"3": [""]}},
            "not exercised",
            [],
            id="only-a-def-line-run-on-import",
        ),
        pytest.param(
            {"executed_lines": [9], "missing_lines": [3, 4], "contexts": {"9": [""]}},
            "not exercised",
            [],
            id="a-module-level-line-run-on-import",
        ),
        pytest.param(
            # the test imported the module inside the test function: the constant ran in its context
            {"executed_lines": [9], "missing_lines": [3, 4], "contexts": {"9": ["t.test_x"]}},
            "not exercised",
            [],
            id="a-module-level-line-run-by-an-import-inside-a-test",
        ),
        pytest.param(
            {"executed_lines": [1], "missing_lines": [2]}, "no executable change", [], id="comments-only"
        ),
        pytest.param(
            {"executed_lines": [], "missing_lines": [], "excluded_lines": [3, 4]},
            "not exercised",
            [],
            id="pragma-no-cover-counts",
        ),
    ],
)
def test_read_coverage(entry: dict[str, object], status: str, executed: list[int]) -> None:
    inside = {"calc.py": {4, 5}}  # line 3 is a def, 4 its body; line 9 is at module level
    files = read_coverage(cov_json({"calc.py": entry}), CHANGED, inside=inside)
    calc = next(f for f in files if f.path == "calc.py")
    assert (calc.status, calc.executed) == (status, executed)
    data = next(f for f in files if f.path == "data.json")
    assert (data.status, data.note) == ("not measured", "not a Python file")


def test_a_context_of_the_changed_package_is_no_test() -> None:
    # src/pkg/__init__.py changed: pkg.test_mark is its own function; pkg.tests.test_x a test module's
    entry = {"executed_lines": [4], "missing_lines": [], "contexts": {"4": ["pkg.test_mark"]}}
    changed = {"src/pkg/__init__.py": {4}}
    inside = {"src/pkg/__init__.py": {4}}
    (own,) = read_coverage(cov_json({"src/pkg/__init__.py": entry}), changed, inside=inside)
    assert own.status == "not exercised"
    entry["contexts"] = {"4": ["pkg.tests.test_x"]}
    (test,) = read_coverage(cov_json({"src/pkg/__init__.py": entry}), changed, inside=inside)
    assert (test.status, test.executed) == ("exercised", [4])


def test_a_deletion_has_no_executable_change() -> None:
    # only lines deleted (an unused import): nothing of the fixed tree to run, so nothing to refute
    entry = {"executed_lines": [1, 5], "missing_lines": [6]}
    files = read_coverage(cov_json({"calc.py": entry}), {"calc.py": set()}, deletes_code={"calc.py": True})
    assert [(f.status, f.note) for f in files] == [("no executable change", "only lines deleted")]
    assert read_coverage(cov_json({}), {"calc.py": set()})[0].status == "no executable change"


def test_coverage_problem() -> None:
    never = read_coverage(cov_json({}), {"calc.py": {3, 4, 5, 9}})
    assert never[0].note == "never imported"
    assert coverage_problem(never) == "the test does not exercise the fix: calc.py lines 3-5, 9 not run"
    unmeasured = read_coverage(None, {"calc.py": {3}}, "the test run left no coverage data")
    assert (
        coverage_problem(unmeasured)
        == "coverage of the fix could not be measured: the test run left no coverage data"
    )


def test_import_only_and_comment_only_fixes_are_no_fix() -> None:
    inside = {"calc.py": {4}}
    # a module-level constant the test imports and looks up: it ran, but only on import
    const = {"executed_lines": [1, 9], "missing_lines": [4], "contexts": {"9": ["t.test_x"]}}
    (f,) = read_coverage(cov_json({"calc.py": const}), {"calc.py": {9}}, inside=inside)
    assert (f.status, f.note) == ("not exercised", IMPORT_ONLY)
    assert coverage_problem([f]) == (
        "the test does not exercise the fix: calc.py lines 9 run only on import, never inside a function "
        "a test called (a module-level marker is not a fix)"
    )
    # beside a changed line a test did run inside a function, a module-level line is the mutants' to judge
    body = {"executed_lines": [1, 4], "missing_lines": [], "contexts": {"4": ["t.test_x"]}}
    run = read_coverage(cov_json({"mid.py": body}), {"mid.py": {4}}, inside={"mid.py": {4}})
    assert run[0].status == "exercised" and coverage_problem([f, *run]) is None
    # a comment: no executable change anywhere
    (c,) = read_coverage(
        cov_json({"calc.py": {"executed_lines": [1], "missing_lines": [4]}}), {"calc.py": {2}}
    )
    assert c.status == "no executable change"
    assert coverage_problem([c]) == (
        "the fix changes no executable line (only comments, docstrings or blank lines: calc.py): "
        "a marker is not a fix"
    )
    # only deletions: of a comment no fix, of a statement the reverted run's to judge
    gone = read_coverage(cov_json({}), {"calc.py": set()}, deletes_code={"calc.py": True})
    assert gone[0].deletes_code and coverage_problem(gone) is None
    comment_gone = read_coverage(cov_json({}), {"calc.py": set()})
    assert coverage_problem(comment_gone) is not None
    # a fix of only a file that is not Python, under a Python runner: nothing executable changed
    assert coverage_problem(read_coverage(cov_json({}), {"data.json": {1}})) is not None


def test_table_lines_in_words() -> None:
    table = {
        "ok": False,
        "reason": "the fix weakens the suite: t::a passed on the head and is skipped with the fix",
        "runner": "pytest",
        "seconds": 4.25,
        "tests": [{"id": "t::even", "fixed": "passed", "reverted": "failed", "changed": True}],
        "coverage": [{"path": "calc.py", "status": "exercised", "changed": [3, 4], "executed": [3, 4]}],
        "suite": {
            "command": "pytest tests",
            "head": {"summary": "2 passed", "seconds": 1.0, "cached": True},
            "fixed": {"summary": "1 passed, 1 skipped", "seconds": 1.5},
            "weakened": [{"id": "t::a", "head": "passed", "fixed": "skipped"}],
            "failing_on_head": ["t::c"],
        },
        "configChanges": ["conftest.py: test configuration added"],
    }
    assert table_lines("f1", table) == [
        "  f1 verification (pytest, 4.2 s): refuted: the fix weakens the suite: "
        "t::a passed on the head and is skipped with the fix",
        "    test t::even: passed with the fix, failed without",
        "    coverage calc.py: 2 of 2 changed lines run by the test",
        "    suite: `pytest tests`: head 2 passed (1.0 s, cached); fixed 1 passed, 1 skipped (1.5 s); "
        "weakened: t::a (skipped); already failing on the head (not blamed): t::c",
        "    test configuration: conftest.py: test configuration added",
    ]
    go = table_lines(
        "f2", {"ok": True, "runner": "go", "seconds": 1, "coverageNote": "coverage not measured (go)"}
    )
    assert go == ["  f2 verification (go, 1.0 s): verified", "    coverage not measured (go)"]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("#!/opt/venv/bin/python3.11\nimport pytest\n", "/opt/venv/bin/python3.11"),
        ("#!/usr/bin/env python3\n", "python3"),
        (
            "#!/bin/sh\n'''exec' /very/long/venv/bin/python \"$0\" \"$@\"\n' '''\n",
            "/very/long/venv/bin/python",
        ),
        ("#!/usr/bin/env bash\nexec pyenv exec pytest\n", "python3"),  # a shim is no interpreter
        ("not a script", "python3"),
    ],
)
def test_interpreter_of_a_console_script(tmp_path, script: str, expected: str) -> None:
    from workers.verification.coverage_check import interpreter_of

    (tmp_path / "bin").mkdir()
    path = tmp_path / "bin" / "pytest"
    path.write_text(script)
    path.chmod(0o755)
    assert interpreter_of("pytest", tmp_path, str(tmp_path / "bin")) == expected
    assert interpreter_of("bin/pytest", tmp_path, "") == expected
    assert interpreter_of("no-such-program", tmp_path, str(tmp_path / "bin")) == "python3"
