"""What counts as a test command Jury can verify (issue 9, part 1), and how it is run with a report."""

from __future__ import annotations

import pytest

from workers.verification.testcommand import (
    NOT_A_TEST,
    TestCommand,
    added_test_names,
    instrument,
    read_test_command,
    split_command,
    suite_command,
)

CHANGED = ["tests/test_even.py"]
ADDED = ["test_even", "TestMedianEven", "median_even", "median of an even list"]
CHECKS = {"test": "make test", "lint": "ruff check ."}


def read(command: str, checks: dict[str, str] | None = None) -> TestCommand | str:
    return read_test_command(command, checks=checks or {}, changed_tests=CHANGED, added_names=ADDED)


@pytest.mark.parametrize(
    ("command", "runner", "targets", "files"),
    [
        ("pytest tests/test_even.py", "pytest", ("tests/test_even.py",), ("tests/test_even.py",)),
        ("python -m pytest -q tests/test_even.py::test_even", "pytest", None, ("tests/test_even.py",)),
        ("python3.11 -B -m pytest -x -k 'even or odd' tests/test_even.py", "pytest", None, None),
        (
            "/usr/bin/python3 -m pytest --tb=short -p no:cacheprovider tests/test_even.py",
            "pytest",
            None,
            None,
        ),
        (
            ".venv/bin/python -m pytest tests/test_even.py tests/",
            "pytest",
            None,
            ("tests/test_even.py", "tests"),
        ),
        ("PYTHONPATH=src pytest tests/test_even.py", "pytest", None, None),
        ("python3 -m unittest tests.test_even", "unittest", None, ("tests/test_even.py",)),
        (
            "python3 -m unittest -v tests.test_even.EvenTest.test_even",
            "unittest",
            None,
            ("tests/test_even.py",),
        ),
        ("python3 -m unittest tests/test_even.py", "unittest", None, ("tests/test_even.py",)),
        ("go test -run 'TestMedianEven$' ./stats", "go", ("TestMedianEven$",), ()),
        ("cargo test median_even", "cargo", ("median_even",), ()),
        ("node --test tests/test_even.py", "node", None, ("tests/test_even.py",)),
        ("npx jest tests/test_even.py", "jest", None, None),
        ("npx vitest run tests/test_even.py", "vitest", None, None),
    ],
)
def test_test_commands_jury_understands(
    command: str, runner: str, targets: tuple[str, ...] | None, files: tuple[str, ...] | None
) -> None:
    tc = read(command)
    assert isinstance(tc, TestCommand), tc
    assert tc.runner == runner and tc.command == command and tc.declared is None
    if targets is not None:
        assert tc.targets == targets
    if files is not None:
        assert tc.files == files


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("python3 tests/check_median.py", "`python3` is not pytest"),
        ("test -f fixed.marker", "`test` is not pytest"),
        ("bash -c 'pytest tests/test_even.py'", "`bash` is not pytest"),
        ("make test", "`make` is not pytest"),
        ("python3 -c 'import tests.test_even'", "`python3` is not pytest"),
        ("python3 -I -m pytest tests/test_even.py", "`python3` is not pytest"),  # -I would drop PYTHONPATH
        ("pytest", "it names no test"),
        ("pytest tests/test_stats.py", "it names no test the fix added or changed"),
        ("pytest /etc/passwd tests/test_even.py", "'/etc/passwd' is outside the repository"),
        ("pytest ../other/tests/test_even.py", "is outside the repository"),
        ("pytest -p evil tests/test_even.py", "loading a plugin"),
        ("pytest -c other.ini tests/test_even.py", "option '-c' is not allowed"),
        ("pytest --deselect tests/test_even.py::x tests/test_even.py", "option '--deselect' is not allowed"),
        ("pytest -o addopts= tests/test_even.py", "option '-o' is not allowed"),
        ("pytest --co tests/test_even.py", "option '--co' is not allowed"),
        ("pytest tests/test_even.py -- -x", "options after --"),
        ("python3 -m unittest discover", "unittest discover names no test"),
        ("python3 -m unittest tests.test_stats", "it names no test the fix added"),
        ("go test ./...", "go test needs -run"),
        ("go test -run TestOther ./...", "matches no test the fix adds"),
        ("cargo test", "cargo test needs exactly one test NAME"),
        ("cargo test unrelated", "names no test the fix adds"),
        ("node --test tests/other.test.js", "it names no test the fix added"),
    ],
)
def test_refused_before_it_runs(command: str, why: str) -> None:
    got = read(command)
    assert isinstance(got, str) and got.startswith(NOT_A_TEST) and why in got, got


@pytest.mark.parametrize(
    ("command", "why"),
    [("pytest 'x", "cannot split"), ("pytest tests/test_even.py | tee log", "needs a shell (|)")],
)
def test_commands_that_cannot_be_split(command: str, why: str) -> None:
    got = read(command)
    assert isinstance(got, str) and why in got


def test_a_declared_check_is_a_test_command() -> None:
    opaque = read("make test", CHECKS)
    assert isinstance(opaque, TestCommand) and opaque.runner is None and opaque.declared == "test"
    known = read("python3 -m pytest -q", {"test": "python3  -m pytest -q"})  # same argv, other spacing
    assert isinstance(known, TestCommand) and known.runner == "pytest" and known.declared == "test"
    assert known.targets == ()  # the operator's own command names no test: the whole suite it runs


def test_instrument_pytest_under_coverage() -> None:
    tc = read("python3 -B -m pytest -q tests/test_even.py")
    assert isinstance(tc, TestCommand)
    inst = instrument(tc, "/s", python="python3", rcfile="/s/rc")
    assert inst.argv == [
        "python3",
        "-B",
        "-m",
        "coverage",
        "run",
        "--rcfile=/s/rc",
        "--data-file=/s/coverage.data",
        "-m",
        "pytest",
        "-q",
        "tests/test_even.py",
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",
        "--junitxml=/s/junit.xml",
        "-o",
        "junit_family=xunit1",
        "-p",
        "jury_preimport",
    ]
    assert (inst.kind, inst.path, inst.coverage) == ("junit", "/s/junit.xml", "/s/coverage.data")
    plain = instrument(tc, "/s")
    assert plain.argv[:5] == ["python3", "-B", "-m", "pytest", "-q"] and plain.coverage is None
    # unittest has no plugins: Jury's module runs it, with the changed modules imported first
    unit = read("python3 -m unittest tests.test_even")
    assert not isinstance(unit, str)
    assert instrument(unit, "/s", python="python3", rcfile="/s/rc").argv[-4:] == [
        "-m",
        "jury_preimport",
        "-v",
        "tests.test_even",
    ]


@pytest.mark.parametrize(
    ("command", "argv", "kind"),
    [
        (
            "python3 -m unittest tests.test_even",
            ["python3", "-m", "unittest", "-v", "tests.test_even"],
            "unittest",
        ),
        (
            "go test -run TestMedianEven ./...",
            ["go", "test", "-json", "-run", "TestMedianEven", "./..."],
            "go",
        ),
        ("cargo test median_even", ["cargo", "test", "median_even"], "cargo"),
        (
            "node --test-reporter=spec --test tests/test_even.py",
            ["node", "--test-reporter=tap", "--test", "tests/test_even.py"],
            "tap",
        ),
        (
            "npx jest tests/test_even.py",
            ["npx", "jest", "tests/test_even.py", "--json", "--outputFile=/s/report.json"],
            "jest",
        ),
    ],
)
def test_instrument_other_runners(command: str, argv: list[str], kind: str) -> None:
    tc = read(command)
    assert isinstance(tc, TestCommand), tc
    inst = instrument(tc, "/s")
    assert inst.argv == argv and inst.kind == kind


def test_suite_command() -> None:
    tc = read("python3 -m pytest -q -k even tests/test_even.py")
    assert isinstance(tc, TestCommand)
    suite = suite_command(tc, {}, ["tests"])
    assert suite is not None and suite.argv == ["python3", "-m", "pytest", "tests"]
    declared = suite_command(tc, {"test": "pytest -q tests/unit"}, ["tests"])
    assert (
        declared is not None
        and declared.argv == ["pytest", "-q", "tests/unit"]
        and declared.declared == "test"
    )
    opaque = suite_command(tc, {"test": "make test"}, ["tests"])  # unreadable: the runner's own suite instead
    assert opaque is not None and opaque.argv == ["python3", "-m", "pytest", "tests"]
    unit = read("python3 -m unittest tests.test_even")
    assert isinstance(unit, TestCommand)
    assert suite_command(unit, {}, []).argv == ["python3", "-m", "unittest"]  # type: ignore[union-attr]


def test_added_test_names() -> None:
    diff = (
        "+++ b/tests/test_even.py\n+def test_even():\n+    pass\n-def test_gone():\n"
        "+func TestMedianEven(t *testing.T) {\n+    fn median_even() {\n"
        "+  it('median of an even list', () => {\n"
    )
    assert added_test_names(diff) == ["test_even", "TestMedianEven", "median_even", "median of an even list"]


def test_split_command_keeps_assignments() -> None:
    assert split_command("A=1 pytest x") == (["pytest", "x"], {"A": "1"})
