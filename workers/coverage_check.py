"""Does the judge's test run the fix? coverage.py over the named tests, read against the changed lines.

On the fixed tree the named tests run under ``python -m coverage run`` with the interpreter the test
command uses. The interpreter need not have coverage installed: Jury puts a directory holding only its
own ``coverage`` package on ``PYTHONPATH`` (no plugin, nothing else of Jury's environment), and points
coverage at Jury's rcfile so the repository's configuration cannot omit files or exclude lines. Lines are
recorded per test function (``dynamic_context = test_function``): a line counts only when a test ran it,
so the ``def`` lines that merely importing a module executes do not make a test "exercise" a fix.

At least one changed executable line of each non-test Python file the fix touched must have run, else the
claim is refuted: "the test does not exercise the fix". Other files, and runners Jury has no coverage for,
are "not measured", never "passed".
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel

from workers.worktree import git

__all__ = [
    "RCFILE",
    "FileCoverage",
    "changed_lines",
    "coverage_problem",
    "headers",
    "interpreter_of",
    "json_argv",
    "measure",
    "prepare",
    "read_coverage",
]

# Jury's own configuration: per-test contexts, nothing excluded (a "# pragma: no cover" on the fix counts).
RCFILE = "[run]\ndynamic_context = test_function\n\n[report]\nexclude_lines =\n"
_PY_SUFFIXES = (".py",)

Status = Literal["exercised", "not exercised", "no executable change", "not measured"]


class FileCoverage(BaseModel):
    """One non-test file the fix touched: its changed executable lines and which of them a test ran."""

    path: str
    status: Status
    changed: list[int] = []
    executed: list[int] = []
    note: str | None = None


_HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def changed_lines(repo: Path, old: str, new: str, path: str) -> set[int]:
    """Line numbers of ``path`` in tree ``new`` that differ from tree ``old`` (added or changed). Lines
    that were only deleted are in no tree to run: a deletion has no changed executable line."""
    raw = git(
        ["diff", "-U0", "--no-color", "--no-ext-diff", "--no-textconv", old, new, "--", path],
        repo,
        env={"GIT_LITERAL_PATHSPECS": "1"},
    )
    out: set[int] = set()
    for line in raw.splitlines():
        m = _HUNK_RE.match(line)
        if m:
            start, count = int(m[1]), int(m[2]) if m[2] is not None else 1
            out.update(range(start, start + count))
    return out


def prepare(scratch: Path) -> tuple[Path, Path]:
    """(rcfile, PYTHONPATH directory) in ``scratch``: Jury's coverage configuration, and a directory that
    holds only a link to Jury's ``coverage`` package."""
    import coverage

    rc = scratch / "coveragerc"
    rc.write_text(RCFILE)
    shim = scratch / "pythonpath"
    shim.mkdir(exist_ok=True)
    link = shim / "coverage"
    if not link.exists():
        link.symlink_to(Path(coverage.__file__).resolve().parent, target_is_directory=True)
    return rc, shim


def json_argv(
    python: str, py_flags: tuple[str, ...], scratch: Path, rcfile: Path, files: list[str]
) -> list[str]:
    """The argv that turns the data file in ``scratch`` into ``scratch/coverage.json`` for ``files``."""
    return [
        python,
        *py_flags,
        "-m",
        "coverage",
        "json",
        f"--rcfile={rcfile}",
        f"--data-file={scratch / 'coverage.data'}",
        "-o",
        str(scratch / "coverage.json"),
        "--show-contexts",
        "--include=" + ",".join(files),
    ]


def is_python(path: str) -> bool:
    return path.endswith(_PY_SUFFIXES)


_HEADER_RE = re.compile(r"^\s*(?:@|(?:async\s+)?def\s|class\s)")


def headers(text: str) -> set[int]:
    """Lines that start a ``def``, a ``class`` or a decorator: importing the module runs them, so their
    running says nothing about a test calling the code."""
    return {n for n, line in enumerate(text.splitlines(), 1) if _HEADER_RE.match(line)}


def read_coverage(
    report: str | None,
    changed: dict[str, set[int]],
    why: str = "",
    skip: dict[str, set[int]] | None = None,
) -> list[FileCoverage]:
    """Judge each changed file against coverage's JSON ``report`` (None: there is none, ``why``).

    A file's changed executable lines are the changed lines coverage counts as statements (run or not).
    The file is ``exercised`` when a test function ran one of them, or when one ran at all that is not a
    ``def``/``class`` header (``skip``: those lines per file) — a module-level line runs only on import.
    A file the fix only deleted lines from has no executable change. A Python file absent from the
    report was never imported by the tests: nothing of it ran.
    """
    files: dict[str, dict[str, object]] = {}
    if report is not None:
        try:
            doc = json.loads(report)
            files = doc.get("files", {}) if isinstance(doc, dict) else {}
        except (ValueError, RecursionError):  # the reviewed code can write it: nested past reach is unread
            report, why = None, "coverage's JSON report does not parse"
    out: list[FileCoverage] = []
    for path, lines in sorted(changed.items()):
        if not is_python(path):
            out.append(FileCoverage(path=path, status="not measured", note="not a Python file"))
            continue
        if report is None:
            out.append(FileCoverage(path=path, status="not measured", note=why or "no coverage data"))
            continue
        if not lines:
            out.append(FileCoverage(path=path, status="no executable change", note="only lines deleted"))
            continue
        entry = files.get(path)
        if not isinstance(entry, dict):
            out.append(
                FileCoverage(path=path, status="not exercised", changed=sorted(lines), note="never imported")
            )
            continue
        statements = set(_ints(entry.get("executed_lines"))) | set(_ints(entry.get("missing_lines")))
        statements |= set(_ints(entry.get("excluded_lines")))
        contexts = entry.get("contexts")
        by_test = {
            int(n)
            for n, ctx in (contexts.items() if isinstance(contexts, dict) else [])
            if str(n).isdigit() and isinstance(ctx, list) and any(c for c in ctx)
        }
        executable = sorted(lines & statements)
        if not executable:
            out.append(FileCoverage(path=path, status="no executable change"))
            continue
        executed = set(_ints(entry.get("executed_lines"))) - (skip or {}).get(path, set())
        ran = sorted(set(executable) & (by_test | executed))
        status: Status = "exercised" if ran else "not exercised"
        out.append(FileCoverage(path=path, status=status, changed=executable, executed=ran))
    return out


def _ints(value: object) -> list[int]:
    return [v for v in value if isinstance(v, int)] if isinstance(value, list) else []


def measure(
    wt: Path,
    code: list[tuple[str, str]],
    fixed_tree: str,
    data: Path | None,
    run_json: Callable[[list[str]], tuple[str | None, str]],
) -> list[FileCoverage]:
    """Coverage of the changed lines of each non-test file the fix touched (``code``: status and path,
    against the worktree's HEAD), by the run that left ``data``; ``run_json(files)`` turns the data into
    coverage's JSON report (text, or None and why)."""
    changed = {p: changed_lines(wt, "HEAD", fixed_tree, p) for s, p in code if s != "D"}
    out = [
        FileCoverage(path=p, status="not measured", note="deleted by the fix") for s, p in code if s == "D"
    ]
    py = [p for p in changed if is_python(p)]
    if data is None or not py:
        return out + read_coverage(None, changed, "the test run left no coverage data" if py else "")
    report, why = run_json(py)
    # read from the tree, not the checkout: the test run may have rewritten the files
    skip = {p: headers(git(["show", f"{fixed_tree}:{p}"], wt)) for p in py}
    return out + read_coverage(report, changed, why, skip)


def coverage_problem(files: list[FileCoverage]) -> str | None:
    """Why the coverage refutes the claim, or None: a changed Python file none of whose changed
    executable lines a test ran, or Python files that could not be measured at all."""
    missed = [f for f in files if f.status == "not exercised"]
    if missed:
        shown = "; ".join(f"{f.path} lines {_ranges(f.changed)} not run" for f in missed)
        return f"the test does not exercise the fix: {shown}"
    unmeasured = [f for f in files if f.status == "not measured" and is_python(f.path)]
    if unmeasured:
        return f"coverage of the fix could not be measured: {unmeasured[0].note}"
    return None


def _ranges(lines: list[int]) -> str:
    spans: list[str] = []
    for n in lines:
        if spans and "-" not in spans[-1] and int(spans[-1]) == n - 1:
            spans[-1] = f"{spans[-1]}-{n}"
        elif spans and "-" in spans[-1] and int(spans[-1].split("-")[1]) == n - 1:
            spans[-1] = f"{spans[-1].split('-')[0]}-{n}"
        else:
            spans.append(str(n))
    return ", ".join(spans[:8]) + (" ..." if len(spans) > 8 else "")


_PYTHON_NAME_RE = re.compile(r"^(?:python(?:\d(?:\.\d+)?)?|pypy3?)$")
_SH_EXEC_RE = re.compile(r"""^'''exec' (\S+) """, re.M)


def interpreter_of(program: str, cwd: Path, path_env: str) -> str:
    """The Python interpreter a console script (``pytest``) runs under: its shebang, followed through
    ``/usr/bin/env`` and the ``/bin/sh`` trampoline pip writes for long paths; ``python3`` when unknown."""
    where = str(cwd / program) if "/" in program else shutil.which(program, path=path_env)
    if where is None:
        return "python3"
    try:
        with open(where, "rb") as fh:
            head = fh.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return "python3"
    first = head.splitlines()[0] if head else ""
    if not first.startswith("#!"):
        return "python3"
    words = first[2:].split()
    if not words:
        return "python3"
    if PurePosixPath(words[0]).name == "env":
        rest = [w for w in words[1:] if not w.startswith("-")]
        found = rest[0] if rest else "python3"
    elif PurePosixPath(words[0]).name in ("sh", "bash") and (m := _SH_EXEC_RE.search(head)):
        found = m[1]
    else:
        found = words[0]
    # a wrapper that is no interpreter (a pyenv shim is a bash script): the PATH's python3 then
    return found if _PYTHON_NAME_RE.match(PurePosixPath(found).name) else "python3"
