"""Does the judge's test run the fix? coverage.py over the named tests, read against the changed lines.

On the fixed tree the named tests run under ``python -m coverage run`` with the interpreter the test
command uses. The interpreter need not have coverage installed: Jury puts a directory holding only its
own ``coverage`` package on ``PYTHONPATH`` (no plugin, nothing else of Jury's environment), and points
coverage at Jury's rcfile so the repository's configuration cannot omit files or exclude lines. Lines are
recorded per test function (``dynamic_context = test_function``): a line counts only when a test ran it
and it lies inside a function body (``source_lines.function_body_lines``), so nothing that merely
importing a module executes — a ``def`` line, a module-level constant, an import — makes a test
"exercise" a fix. What the module runs at import runs before any test: Jury's pytest plugin (and, for
unittest, its runner: ``workers.verification.preimport_plugin``) imports the changed modules first, so an
import inside a test finds them loaded. A test in whose context a module-level line of a file still ran
executed that module itself (popped it, reloaded it, or the pre-import failed or was shadowed): none of
its lines of that file count. Nor does a context that names a function of a changed file (coverage
takes any ``test*`` function for a test, ``test_mark()`` called at import included).

At least one changed executable line of each non-test Python file the fix touched must have run so, else
the claim is refuted: "the test does not exercise the fix"; and a fix whose Python files change no
executable line (comments, docstrings, blank lines) is no fix. Other files, and runners Jury has no
coverage for, are "not measured", never "passed".
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel

from workers.isolation.worktree import git
from workers.verification.preimport_plugin import ENV as PREIMPORT_ENV
from workers.verification.source_lines import deletes_statements, function_body_lines, statement_lines
from workers.verification.testcommand import PREIMPORT_PLUGIN

__all__ = [
    "RCFILE",
    "IMPORT_ONLY",
    "PREIMPORT_ENV",
    "FileCoverage",
    "changed_lines",
    "coverage_problem",
    "deleted_lines",
    "interpreter_of",
    "json_argv",
    "measure",
    "prepare",
    "read_coverage",
]

# Jury's own configuration: per-test contexts, nothing excluded (a "# pragma: no cover" on the fix counts).
RCFILE = "[run]\ndynamic_context = test_function\n\n[report]\nexclude_lines =\n"
_PY_SUFFIXES = (".py",)

IMPORT_ONLY = "run only on import: no changed line inside a function a test called"
Status = Literal["exercised", "not exercised", "no executable change", "not measured"]


class FileCoverage(BaseModel):
    """One non-test file the fix touched: its changed executable lines and which of them a test ran."""

    path: str
    status: Status
    changed: list[int] = []
    executed: list[int] = []
    note: str | None = None
    deletes_code: bool = False  # lines only deleted, and some of them were statements


_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _hunks(repo: Path, old: str, new: str, path: str) -> tuple[set[int], set[int]]:
    """(lines of ``path`` in tree ``old`` the diff removes, lines in tree ``new`` it adds or changes)."""
    raw = git(
        ["diff", "-U0", "--no-color", "--no-ext-diff", "--no-textconv", old, new, "--", path],
        repo,
        env={"GIT_LITERAL_PATHSPECS": "1"},
    )
    removed: set[int] = set()
    added: set[int] = set()
    for line in raw.splitlines():
        if m := _HUNK_RE.match(line):
            o_start, o_count = int(m[1]), int(m[2]) if m[2] is not None else 1
            n_start, n_count = int(m[3]), int(m[4]) if m[4] is not None else 1
            removed.update(range(o_start, o_start + o_count))
            added.update(range(n_start, n_start + n_count))
    return removed, added


def changed_lines(repo: Path, old: str, new: str, path: str) -> set[int]:
    """Line numbers of ``path`` in tree ``new`` that differ from tree ``old`` (added or changed). Lines
    that were only deleted are in no tree to run: a deletion has no changed executable line."""
    return _hunks(repo, old, new, path)[1]


def deleted_lines(repo: Path, old: str, new: str, path: str) -> set[int]:
    """Line numbers of ``path`` in tree ``old`` that tree ``new`` no longer has as they were."""
    return _hunks(repo, old, new, path)[0]


def prepare(scratch: Path) -> tuple[Path, Path]:
    """(rcfile, PYTHONPATH directory) in ``scratch``: Jury's coverage configuration, and a directory that
    holds only a link to Jury's ``coverage`` package and the pytest plugin that imports the changed
    modules before the tests run (``workers.verification.preimport_plugin``)."""
    import coverage

    rc = scratch / "coveragerc"
    rc.write_text(RCFILE)
    shim = scratch / "pythonpath"
    shim.mkdir(exist_ok=True)
    link = shim / "coverage"
    if not link.exists():
        link.symlink_to(Path(coverage.__file__).resolve().parent, target_is_directory=True)
    # a copy, not a link: the sandbox need not see Jury's source
    shutil.copyfile(Path(__file__).with_name("preimport_plugin.py"), shim / f"{PREIMPORT_PLUGIN}.py")
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


def read_coverage(
    report: str | None,
    changed: dict[str, set[int]],
    why: str = "",
    inside: dict[str, set[int]] | None = None,
    deletes_code: dict[str, bool] | None = None,
    parsed: dict[str, set[int]] | None = None,
) -> list[FileCoverage]:
    """Judge each changed file against coverage's JSON ``report`` (None: there is none, ``why``).

    A file's changed executable lines are the changed lines coverage counts as statements (run or not).
    The file is ``exercised`` when a test function ran one of them that lies inside a function body
    (``inside``: those lines per file; a file missing from it has none). A line outside any function runs
    on import, and an import inside a test runs it in the test's context: it proves nothing, and neither
    does any line of that file in that context (the module may have called it at import). A file the
    fix only deleted lines from has no executable change (``deletes_code``: some were statements). A
    Python file absent from the report was never imported by the tests: nothing of it ran, and its
    statements are the ones its syntax tree has (``parsed``; without it, every changed line counts).
    """
    files: dict[str, dict[str, object]] = {}
    own = _own_contexts(changed)
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
        deletes = (deletes_code or {}).get(path, False)
        if not lines:
            note = "only lines deleted" if deletes else "only comments or blank lines deleted"
            out.append(
                FileCoverage(path=path, status="no executable change", note=note, deletes_code=deletes)
            )
            continue
        entry = files.get(path)
        if not isinstance(entry, dict):
            stated = sorted(lines & parsed[path]) if parsed is not None and path in parsed else sorted(lines)
            if not stated:
                note = "only comments, docstrings or blank lines changed"
                out.append(FileCoverage(path=path, status="no executable change", note=note))
                continue
            out.append(FileCoverage(path=path, status="not exercised", changed=stated, note="never imported"))
            continue
        statements = set(_ints(entry.get("executed_lines"))) | set(_ints(entry.get("missing_lines")))
        statements |= set(_ints(entry.get("excluded_lines")))
        contexts = entry.get("contexts")
        ctx_of = {
            int(n): {c for c in ctx if isinstance(c, str) and c and not own(c)}
            for n, ctx in (contexts.items() if isinstance(contexts, dict) else [])
            if str(n).isdigit() and isinstance(ctx, list)
        }
        body = (inside or {}).get(path, set())
        # a test in whose context a line outside every function ran executed the module itself (imported
        # it first, reloaded it): whatever the module calls at import ran in that context too
        importing = {c for n, ctx in ctx_of.items() if n not in body for c in ctx}
        by_test = {n for n, ctx in ctx_of.items() if ctx - importing}
        executable = sorted(lines & statements)
        if not executable:
            note = "only comments, docstrings or blank lines changed"
            out.append(
                FileCoverage(path=path, status="no executable change", note=note, deletes_code=deletes)
            )
            continue
        ran = sorted(set(executable) & by_test & body)
        executed = set(_ints(entry.get("executed_lines")))
        on_import = IMPORT_ONLY if not ran and set(executable) & executed else None
        status: Status = "exercised" if ran else "not exercised"
        out.append(FileCoverage(path=path, status=status, changed=executable, executed=ran, note=on_import))
    return out


def _own_contexts(changed: dict[str, set[int]]) -> Callable[[str], bool]:
    """Whether a context names a function of a file the fix changed: coverage starts a test's context at
    any function whose name starts with ``test`` (``module.function`` or ``module.Class.method``), so a
    ``test_mark()`` the fixed module calls at import would pass for a test. The module is known only up
    to the ``sys.path`` entry it is imported from: any dotted tail of the path names it. A package's
    ``__init__.py`` is matched as ``package.function`` only: ``package.x.test_y`` may be a test module's."""
    modules: set[str] = set()
    packages: set[str] = set()
    for path in changed:
        if not is_python(path):
            continue
        parts = PurePosixPath(path).with_suffix("").parts
        init = parts[-1:] == ("__init__",)
        parts = parts[:-1] if init else parts
        for i in range(len(parts)):
            (packages if init else modules).add(".".join(parts[i:]))

    def own(context: str) -> bool:
        head1, head2 = context.rsplit(".", 1)[0], context.rsplit(".", 2)[0]
        return head1 in modules or head1 in packages or (head2 in modules and head2 != head1)

    return own


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
    # read from the trees, not the checkout: the test run may have rewritten the files
    sources = {p: git(["show", f"{fixed_tree}:{p}"], wt) for p in py}
    inside = {p: function_body_lines(text) for p, text in sources.items()}
    parsed = {p: statement_lines(text) for p, text in sources.items()}
    deletes = {
        p: deletes_statements(git(["show", f"HEAD:{p}"], wt), deleted_lines(wt, "HEAD", fixed_tree, p))
        for s, p in code
        if s == "M" and p in py and not changed[p]
    }
    return out + read_coverage(report, changed, why, inside, deletes, parsed)


def coverage_problem(files: list[FileCoverage]) -> str | None:
    """Why the coverage refutes the claim, or None: a changed Python file none of whose changed
    executable lines ran, Python files that could not be measured at all, or no Python file with a
    changed line a test ran from inside a function — only lines run on import (a module-level constant
    a test looks up), or no executable line at all (a comment is a marker, not a fix)."""
    missed = [f for f in files if f.status == "not exercised" and f.note != IMPORT_ONLY]
    if missed:
        shown = "; ".join(f"{f.path} lines {_ranges(f.changed)} not run" for f in missed)
        return f"the test does not exercise the fix: {shown}"
    unmeasured = [f for f in files if f.status == "not measured" and is_python(f.path)]
    if unmeasured:
        return f"coverage of the fix could not be measured: {unmeasured[0].note}"
    python = [f for f in files if is_python(f.path)]
    if any(f.status == "exercised" or f.deletes_code for f in python):
        return None
    if on_import := [f for f in python if f.note == IMPORT_ONLY]:
        shown = "; ".join(f"{f.path} lines {_ranges(f.changed)}" for f in on_import)
        return (
            f"the test does not exercise the fix: {shown} run only on import, never inside a function a "
            "test called (a module-level marker is not a fix)"
        )
    shown = ", ".join(f.path for f in python) or "no Python file"
    return (
        f"the fix changes no executable line (only comments, docstrings or blank lines: {shown}): "
        "a marker is not a fix"
    )


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
