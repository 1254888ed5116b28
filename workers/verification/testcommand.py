"""What counts as a test command, and how Jury runs one so that it reports which tests ran (pure).

A judge's ``test_command`` is verified only when Jury can read what it did: a declared ``[checks]``
command, or an invocation of a runner Jury understands that names tests the fix added or changed —

- pytest (``pytest`` / ``python -m pytest``) with paths or node ids,
- ``python -m unittest`` with test ids or paths,
- ``go test -run REGEX``, ``cargo test NAME``, ``node --test PATH``, jest / vitest with paths.

Anything else (a plain program, a shell line, a runner with options that change what is collected) is
refused before it runs: "not a test command Jury can verify". Options are an allow-list per runner, so
an unknown option is refused rather than guessed at.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Literal

from orchestrator.refute.commands import split_command

__all__ = [
    "NOT_A_TEST",
    "PREIMPORT_PLUGIN",
    "Instrumented",
    "Runner",
    "TestCommand",
    "added_test_names",
    "instrument",
    "module_of",
    "read_test_command",
    "suite_command",
]

Runner = Literal["pytest", "unittest", "go", "cargo", "node", "jest", "vitest"]
ReportKind = Literal["junit", "unittest", "go", "cargo", "tap", "jest", "none"]

NOT_A_TEST = "not a test command Jury can verify"
_RUNNERS = "pytest, python -m unittest, go test, cargo test, node --test, jest or vitest"

_PYTHON_RE = re.compile(r"^(?:python(?:\d(?:\.\d+)?)?|pypy3?)$")
# Interpreter options that leave the environment (and so PYTHONPATH) honoured.
_PY_FLAGS = frozenset({"-B", "-u", "-b", "-bb", "-O", "-OO", "-q"})
_PY_VALUE = frozenset({"-X", "-W"})


@dataclass(frozen=True)
class TestCommand:
    """A test command Jury understands. ``prefix`` starts the runner (``python3 -m pytest``, ``go test``),
    ``args`` are its options and targets; ``python`` is the interpreter of a ``python -m`` runner and
    ``py_flags`` its options. ``targets`` are the tests named, ``files`` the repository files they name.
    ``declared`` is the ``[checks]`` name when it is a declared command; ``runner`` None is a declared
    command Jury cannot read a report from (only its exit code counts)."""

    __test__ = False

    command: str
    runner: Runner | None
    prefix: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    targets: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    python: str | None = None
    py_flags: tuple[str, ...] = ()
    declared: str | None = None

    @property
    def argv(self) -> list[str]:
        return [*self.prefix, *self.args]


# --- options per runner: (flags without a value, options taking one value) -----------------------------

_PYTEST_FLAGS = frozenset(
    {"-q", "-v", "-vv", "-vvv", "-x", "-s", "-l", "--quiet", "--verbose", "--exitfirst", "--no-header"}
    | {"--strict-markers", "--disable-warnings", "--showlocals", "--capture=no", "-ra", "-rA", "-rf", "-rs"}
)
_PYTEST_VALUE = frozenset({"-k", "-W", "--tb", "--maxfail", "-p"})
_UNIT_FLAGS = frozenset({"-v", "-q", "-f", "-b", "-c", "--locals", "--failfast", "--buffer", "--catch"})
_UNIT_VALUE = frozenset({"-k"})
_GO_FLAGS = frozenset({"-v", "-race", "-short", "-failfast", "-json"})
_GO_VALUE = frozenset({"-run", "-count", "-timeout", "-p"})
_CARGO_FLAGS = frozenset({"--offline", "--lib", "--locked", "--frozen", "-q", "--quiet", "--release"})
_CARGO_VALUE = frozenset({"-p", "--package", "--test", "-j", "--jobs", "--features"})
_NODE_FLAGS = frozenset({"--test"})
_NODE_VALUE = frozenset({"--test-name-pattern", "--test-reporter", "--test-concurrency"})
_JEST_FLAGS = frozenset({"--runInBand", "-i", "--ci", "--silent", "--verbose", "--run", "run"})
_JEST_VALUE = frozenset({"-t", "--testNamePattern"})


def _options(
    args: Sequence[str], flags: frozenset[str], valued: frozenset[str]
) -> tuple[list[tuple[str, str]], list[str]] | str:
    """``([(option, value)], [positional])`` of ``args`` under an allow-list, or the first refused option.
    ``-k x`` and ``-k=x`` / ``--tb=short`` forms are both read; ``-p`` takes only ``no:<plugin>`` values."""
    opts: list[tuple[str, str]] = []
    positional: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return "options after -- are not allowed"
        if not a.startswith("-") or a == "-":
            positional.append(a)
        elif a in flags:
            opts.append((a, ""))
        else:
            name, eq, value = a.partition("=")
            if name not in valued:
                return f"option {a!r} is not allowed"
            if not eq:
                if i + 1 >= len(args):
                    return f"option {a!r} needs a value"
                i += 1
                value = args[i]
            if name == "-p" and not value.startswith("no:"):
                return f"loading a plugin ({a} {value}) is not allowed"
            opts.append((name, value))
        i += 1
    return opts, positional


def _repo_path(target: str) -> str | None:
    """A repo-relative path of ``target`` (its part before ``::``), or None when it leaves the repo."""
    path = target.split("::", 1)[0]
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or not path:
        return None
    return str(p)


def module_of(path: str) -> str:
    """The dotted module of a repo-relative ``.py`` path (``tests/test_x.py`` -> ``tests.test_x``)."""
    return path.removesuffix(".py").replace("/", ".")


def _recognize(argv: list[str]) -> tuple[Runner, int, str | None, tuple[str, ...]] | None:
    """(runner, length of the prefix, interpreter, interpreter flags) of ``argv``, or None."""
    prog = PurePosixPath(argv[0]).name
    if _PYTHON_RE.match(prog):
        i, flags = 1, []
        while i < len(argv) and argv[i] != "-m":
            a = argv[i]
            if a in _PY_FLAGS:
                flags.append(a)
            elif a in _PY_VALUE and i + 1 < len(argv):
                flags += [a, argv[i + 1]]
                i += 1
            elif a[:2] in _PY_VALUE and len(a) > 2:
                flags.append(a)
            else:
                return None
            i += 1
        if i + 1 < len(argv) and argv[i + 1] in ("pytest", "unittest"):
            runner: Runner = "pytest" if argv[i + 1] == "pytest" else "unittest"
            return runner, i + 2, argv[0], tuple(flags)
        return None
    if prog in ("pytest", "py.test"):
        return "pytest", 1, None, ()
    if prog == "go" and argv[1:2] == ["test"]:
        return "go", 2, None, ()
    if prog == "cargo" and argv[1:2] == ["test"]:
        return "cargo", 2, None, ()
    if prog == "node" and "--test" in argv[1:]:
        return "node", 1, None, ()
    rest = argv[1:] if prog in ("npx", "yarn", "pnpm", "bunx") else argv
    tool = PurePosixPath(rest[0]).name if rest else ""
    if tool == "jest":
        return "jest", len(argv) - len(rest) + 1, None, ()
    if tool == "vitest":
        return "vitest", len(argv) - len(rest) + 1, None, ()
    return None


_ADDED_NAME_RES = (
    re.compile(r"^\+\s*(?:async\s+)?def\s+(test\w*)"),
    re.compile(r"^\+\s*func\s+(Test\w+)"),
    re.compile(r"^\+\s*(?:pub\s+)?(?:async\s+)?fn\s+(\w+)"),
    re.compile(r"^\+\s*(?:it|test)(?:\.\w+)?\(\s*['\"`](.+?)['\"`]"),
)


def added_test_names(diff: str) -> list[str]:
    """Names of the tests a unified diff adds (``def test_x``, ``func TestX``, ``fn x``, ``it("x")``)."""
    out: list[str] = []
    for line in diff.splitlines():
        if line.startswith("+++"):
            continue
        for rx in _ADDED_NAME_RES:
            m = rx.match(line)
            if m:
                out.append(m[1])
                break
    return out


def read_test_command(
    command: str,
    *,
    checks: dict[str, str],
    changed_tests: Iterable[str],
    added_names: Iterable[str] = (),
) -> TestCommand | str:
    """The ``TestCommand`` of ``command``, or why Jury refuses it (the text starts with ``NOT_A_TEST``
    unless the command cannot be split at all).

    ``changed_tests`` are the test files the fix added or changed; ``added_names`` the tests its diff adds
    (for ``go test -run`` and ``cargo test NAME``, which name tests, not files).
    """
    split = split_command(command)
    if isinstance(split, str):
        return split
    argv, env = split
    declared = next((n for n, c in checks.items() if split_command(c) == split), None)
    known = _recognize(argv)
    if known is None:
        if declared is not None:
            return TestCommand(command=command, runner=None, prefix=tuple(argv), env=env, declared=declared)
        return f"{NOT_A_TEST}: `{argv[0]}` is not {_RUNNERS}"
    runner, n, python, py_flags = known
    base = TestCommand(
        command=command,
        runner=runner,
        prefix=tuple(argv[:n]),
        args=tuple(argv[n:]),
        env=env,
        python=python,
        py_flags=py_flags,
        declared=declared,
    )
    named = _named(base, set(changed_tests), list(added_names))
    if isinstance(named, str):
        if declared is not None:  # the operator's own command: trusted as written, read as far as possible
            return replace(base, targets=(), files=())
        return f"{NOT_A_TEST}: {named}"
    return named


def _named(tc: TestCommand, changed: set[str], added: list[str]) -> TestCommand | str:
    """``tc`` with its targets and the files they name, or why they do not name a test the fix changed."""
    table = {
        "pytest": (_PYTEST_FLAGS, _PYTEST_VALUE),
        "unittest": (_UNIT_FLAGS, _UNIT_VALUE),
        "go": (_GO_FLAGS, _GO_VALUE),
        "cargo": (_CARGO_FLAGS, _CARGO_VALUE),
        "node": (_NODE_FLAGS, _NODE_VALUE),
        "jest": (_JEST_FLAGS, _JEST_VALUE),
        "vitest": (_JEST_FLAGS, _JEST_VALUE),
    }
    assert tc.runner is not None
    parsed = _options(tc.args, *table[tc.runner])
    if isinstance(parsed, str):
        return parsed
    opts, positional = parsed
    if tc.runner == "unittest" and positional[:1] == ["discover"]:
        return "unittest discover names no test; name the test ids"
    if tc.runner == "go":
        pattern = next((v for o, v in opts if o == "-run"), None)
        if pattern is None:
            return "go test needs -run naming the new test"
        try:
            rx = re.compile(pattern)
        except re.error:
            return f"-run {pattern!r} is not a pattern Jury can read"
        if not any(rx.search(name) for name in added):
            return f"-run {pattern!r} matches no test the fix adds"
        return replace(tc, targets=(pattern,))
    if tc.runner == "cargo":
        if len(positional) != 1:
            return "cargo test needs exactly one test NAME"
        if not any(positional[0] in name for name in added):
            return f"cargo test {positional[0]!r} names no test the fix adds"
        return replace(tc, targets=tuple(positional))
    if tc.runner == "vitest" and positional[:1] == ["run"]:
        positional = positional[1:]
    if not positional:
        return "it names no test (give the test file or id of the new test)"
    files: list[str] = []
    for target in positional:
        if tc.runner == "unittest" and not target.endswith(".py"):
            hit = next(
                (f for f in changed if target == module_of(f) or target.startswith(module_of(f) + ".")), None
            )
            if hit is None and not re.fullmatch(r"[\w.]+", target):
                return f"{target!r} is not a test id"
            files.append(hit or target)
            continue
        path = _repo_path(target)
        if path is None:
            return f"{target!r} is outside the repository"
        files.append(path)
    if not changed.intersection(files):
        return f"it names no test the fix added or changed ({', '.join(sorted(changed)) or 'none'})"
    return replace(tc, targets=tuple(positional), files=tuple(dict.fromkeys(files)))


# --- running with a report ---------------------------------------------------------------------------

# the pytest plugin (``workers.verification.preimport_plugin``) the coverage run loads from Jury's PYTHONPATH
# directory, and the module that runs unittest there
PREIMPORT_PLUGIN = "jury_preimport"


@dataclass(frozen=True)
class Instrumented:
    """The argv that runs ``TestCommand`` with a report: ``kind`` says how to read it, ``path`` is the
    report file (None: the runner's output is the report) and ``coverage`` the data file, if measured."""

    argv: list[str]
    kind: ReportKind
    path: str | None = None
    coverage: str | None = None
    stream: Literal["stdout", "stderr"] = "stdout"


def instrument(
    tc: TestCommand, scratch: str, *, python: str | None = None, rcfile: str | None = None
) -> Instrumented:
    """How to run ``tc`` so that it leaves a report in ``scratch`` (a directory outside the worktree).

    With ``python`` and ``rcfile`` (Python runners), the run goes under ``python -m coverage run`` with
    its data file in ``scratch``: the same interpreter the command uses, the repository's own coverage
    configuration ignored (``rcfile`` is Jury's); pytest loads ``PREIMPORT_PLUGIN`` from the directory
    Jury puts on the run's PYTHONPATH beside its ``coverage`` package.
    """
    if tc.runner is None:
        return Instrumented(argv=tc.argv, kind="none")
    if tc.runner in ("pytest", "unittest"):
        if tc.runner == "pytest":
            xml = f"{scratch}/junit.xml"
            args = [*tc.args, "-p", "no:cacheprovider", "--continue-on-collection-errors"]
            args += [f"--junitxml={xml}", "-o", "junit_family=xunit1"]
            kind: ReportKind = "junit"
            path: str | None = xml
        else:
            args, kind, path = ["-v", *tc.args], "unittest", None
        stream: Literal["stdout", "stderr"] = "stderr" if kind == "unittest" else "stdout"
        if python is not None and rcfile is not None:
            if tc.runner == "pytest":
                args += ["-p", PREIMPORT_PLUGIN]
            data = f"{scratch}/coverage.data"
            cov = [python, *tc.py_flags, "-m", "coverage", "run", f"--rcfile={rcfile}", f"--data-file={data}"]
            # unittest has no plugins: the module runs it, with the changed modules imported first
            runner = PREIMPORT_PLUGIN if tc.runner == "unittest" else tc.runner
            return Instrumented([*cov, "-m", runner, *args], kind, path, data, stream)
        return Instrumented([*tc.prefix, *args], kind, path, None, stream)
    if tc.runner == "go":
        return Instrumented([*tc.prefix, "-json", *(a for a in tc.args if a != "-json")], "go")
    if tc.runner == "cargo":
        return Instrumented(tc.argv, "cargo")
    if tc.runner == "node":
        args = [a for a in tc.args if not a.startswith("--test-reporter")]
        return Instrumented([*tc.prefix, "--test-reporter=tap", *args], "tap")
    out = f"{scratch}/report.json"
    flags = (
        ["--json", f"--outputFile={out}"]
        if tc.runner == "jest"
        else ["--reporter=json", f"--outputFile={out}"]
    )
    return Instrumented([*tc.prefix, *tc.args, *flags], "jest", out)


def suite_command(tc: TestCommand, checks: dict[str, str], test_dirs: Sequence[str]) -> TestCommand | None:
    """The repository's suite: the declared ``test`` check when Jury can read its runner, else ``tc``'s
    runner over ``test_dirs`` (pytest) or its own discovery. None: no suite Jury can read.

    The same command runs on the PR head and on the fixed tree, so what it collects is compared test by
    test; the judge's options and targets are not kept (they narrow the run)."""
    declared = checks.get("test")
    if declared is not None:
        split = split_command(declared)
        if not isinstance(split, str) and (known := _recognize(split[0])) is not None:
            runner, n, python, py_flags = known
            argv, env = split
            return TestCommand(
                command=declared,
                runner=runner,
                prefix=tuple(argv[:n]),
                args=tuple(argv[n:]),
                env=env,
                python=python,
                py_flags=py_flags,
                declared="test",
            )
    if tc.runner is None:
        return None
    args = {
        "pytest": list(test_dirs),
        "unittest": [],
        "go": ["./..."],
        "cargo": [],
        "node": ["--test"],
        "jest": [],
        "vitest": ["run"],
    }[tc.runner]
    return TestCommand(
        command=shlex.join([*tc.prefix, *args]),
        runner=tc.runner,
        prefix=tc.prefix,
        args=tuple(args),
        env=dict(tc.env),
        python=tc.python,
        py_flags=tc.py_flags,
    )
