"""Is the fix a fix, or a marker its test looks for? Two kinds of run of the named tests, in the sandbox.

Coverage (``coverage_check``) already demands a changed line a test ran from inside a function. A judge
can still leave a marker beside real-looking code: a comment the test reads from the source file, or a
line the test needs only because it reads it. So, on the fixed tree:

1. the stripped copy: every changed non-test Python file with its comments removed and its code
   re-formatted (``source_lines.stripped``); the named tests must still pass. A test that reads the
   source for a comment, or for the fix's exact spelling, fails here. Non-Python files are copied as
   they are: Jury cannot tell a comment from content in a format it does not parse, and coverage
   already refuses a fix with no executable Python change.
2. one mutant per changed executable line (``source_lines.mutant``: the statement deleted, an ``elif``
   made ``False``, an ``except`` made to catch nothing); the named tests must FAIL on each. A line the
   test passes without is not the fix the test checks. The mutant is bytecode only: the source file
   stays the fixed one, and the mutant goes in ``__pycache__`` as an unchecked-hash ``.pyc``, which the
   import system loads without looking at the source. So a test that reads the source for a dead line
   (``checked = True``) still finds it and passes: the line survives, the fix is refused. (A test that
   fails on any bytecode of the source rather than on behaviour is not caught here.) Each mutant is one
   more run of the named tests, so at most ``MAX_MUTATED_LINES`` lines are tried: a fix with more
   changed executable lines, or with a line Jury cannot delete on its own, is unverifiable and refused
   as such, never accepted untried. The bytecode is compiled in the sandbox by the test command's own
   interpreter and flags (``compile_pyc``), so its magic number and cache tag are the ones it reads.

The runs go through the caller's ``run`` (``verify``'s sandboxed runner); this module checks trees out
and writes the files. The worktree is left at the fixed tree.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from workers.isolation.worktree import git
from workers.verification.coverage_check import FileCoverage, is_python
from workers.verification.source_lines import mutant, stripped
from workers.verification.suite import checkout

__all__ = ["MAX_MUTATED_LINES", "PYC_SCRIPT", "CompilePyc", "LineMutant", "RunNamed", "check"]

MAX_MUTATED_LINES = 16  # mutant runs per fix, one per changed executable line

# label -> None when the named tests passed on the checkout, else what happened instead
RunNamed = Callable[[str], str | None]
# (file holding the mutant's text, the source's path in the worktree) -> None when the .pyc is written
CompilePyc = Callable[[Path, str], str | None]

# Run by the test command's interpreter: the mutant's bytecode where that interpreter looks for the
# source's, as a .pyc it loads without checking the source against it.
PYC_SCRIPT = (
    "import importlib.util, py_compile, sys\n"
    "py_compile.compile(sys.argv[1], cfile=importlib.util.cache_from_source(sys.argv[2]), dfile=sys.argv[2],"
    " doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n"
)


class LineMutant(BaseModel):
    """One changed executable line deleted on its own, and what the named tests did without it."""

    path: str
    line: int
    outcome: Literal["killed", "survived", "unverifiable"]
    detail: str | None = None


def _write(wt: Path, path: str, text: str) -> None:
    (wt / path).write_text(text, encoding="utf-8")


def _bytecode(scratch: Path, name: str, text: str, path: str, compile_pyc: CompilePyc) -> str | None:
    """``text`` as the bytecode the interpreter loads for ``path`` (None), or why it could not be."""
    (held := scratch / f"{name}.py").write_text(text, encoding="utf-8")
    return compile_pyc(held, path)


def _control(
    wt: Path, fixed_tree: str, sources: dict[str, str], compile_pyc: CompilePyc, scratch: Path, run: RunNamed
) -> str | None:
    """The fixed code itself loaded the mutants' way (unchecked .pyc) must pass: else a test that notices
    the bytecode, not the deleted line, would kill every mutant."""
    checkout(wt, fixed_tree)
    for i, (path, text) in enumerate(sources.items()):
        if (why := _bytecode(scratch, f"control-{i}", text, path, compile_pyc)) is not None:
            return f"unverifiable: {path} could not be compiled to bytecode: {why[:200]}"
    if (failed := run("mutant-control")) is not None:
        return (
            "unverifiable: the test does not pass on the fix loaded from its own bytecode, the way each "
            f"line is deleted to see it fail ({failed})"
        )
    return None


def check(
    wt: Path,
    fixed_tree: str,
    coverage: list[FileCoverage],
    run: RunNamed,
    compile_pyc: CompilePyc,
    scratch: Path,
    most: int | None = None,
) -> tuple[list[LineMutant], str | None]:
    """The mutants tried and why the fix is vacuous or unverifiable (None: the test checks the fix).

    ``coverage``: the fix's non-test files as measured; their ``changed`` lines are the changed
    executable lines of the fixed tree; ``most`` (default ``MAX_MUTATED_LINES``) bounds the mutants,
    whose texts go in ``scratch`` (outside the worktree) for ``compile_pyc``. Stops at the first
    problem."""
    most = MAX_MUTATED_LINES if most is None else most
    sources = {
        f.path: git(["show", f"{fixed_tree}:{f.path}"], wt)
        for f in coverage
        if is_python(f.path) and f.status != "not measured"
    }
    checkout(wt, fixed_tree)
    for path, source in sources.items():
        _write(wt, path, stripped(source))
    if (failed := run("stripped")) is not None:
        checkout(wt, fixed_tree)
        return [], (
            "the test does not pass once comments are stripped and the code re-formatted "
            f"({', '.join(sources)}): it reads the source, not the fix's behaviour ({failed})"
        )
    lines = [(f.path, n) for f in coverage if f.path in sources for n in f.changed]
    if len(lines) > most:
        checkout(wt, fixed_tree)
        return [], (
            f"unverifiable: the fix changes {len(lines)} executable lines and Jury deletes at most {most} "
            "one at a time to see the test fail; split the fix"
        )
    tried: list[LineMutant] = []
    problem = _control(wt, fixed_tree, sources, compile_pyc, scratch, run) if lines else None
    for i, (path, n) in enumerate([] if problem else lines):
        checkout(wt, fixed_tree)
        if (mutated := mutant(sources[path], n)) is None:
            tried.append(LineMutant(path=path, line=n, outcome="unverifiable"))
            problem = f"unverifiable: {path} line {n} cannot be deleted on its own to see the test fail"
            break
        if (why := _bytecode(scratch, f"mutant-{i}", mutated, path, compile_pyc)) is not None:
            tried.append(LineMutant(path=path, line=n, outcome="unverifiable", detail=why[:200]))
            problem = f"unverifiable: the mutant of {path} line {n} could not be compiled: {why[:200]}"
            break
        failed = run(f"mutant-{i}")
        if failed is None:
            tried.append(LineMutant(path=path, line=n, outcome="survived"))
            problem = (
                f"the test still passes with {path} line {n} deleted: that line is not what the test "
                "checks (a marker, or code the fix does not need)"
            )
            break
        tried.append(LineMutant(path=path, line=n, outcome="killed", detail=failed[:200]))
    checkout(wt, fixed_tree)
    return tried, problem
