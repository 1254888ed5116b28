"""The suite does not shrink: the repository's tests on the PR head and on the fixed tree, test by test.

A fix can make its own test pass by breaking another and hiding it: a skip mark, ``collect_ignore``, a
renamed test file, ``--deselect`` in the configuration, an ``xfail``. Each hides the test from an exit
code, none from a comparison of the runner's reports: every test that passed on the head must pass on
the fixed tree. One that is failing, missing (removed, renamed, deselected, no longer collected),
skipped, xfailed or xpassed there is weakening, and the fix is refuted with the test ids. A test that
already failed on the head is not the fix's doing and is listed, not blamed.

The head's side depends only on the tree and the suite command, so it is computed once and kept as an
artifact of the run (``SuiteCache``) that every finding of that tree, on any host, reuses: verification
costs one suite run per fix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Literal, Protocol

from pydantic import BaseModel

from workers.isolation.worktree import git, git_bytes
from workers.verification.testcommand import Runner, TestCommand, suite_command
from workers.verification.testreport import Outcome, TestReport
from workers.verification.weakening import is_test_path

__all__ = [
    "SuiteCache",
    "SuiteDelta",
    "SuiteSide",
    "Weakened",
    "cache_name",
    "checkout",
    "compare",
    "delta_problem",
    "measure",
    "side_of",
    "test_dirs",
]

_SUFFIXES: dict[str, tuple[str, ...]] = {
    "pytest": (".py",),
    "unittest": (".py",),
}


class SuiteCache(Protocol):
    """Where the head's suite result is kept between findings (the run's artifacts)."""

    def get(self, name: str) -> bytes | None: ...

    def put(self, name: str, data: bytes) -> None: ...


class SuiteSide(BaseModel):
    """One run of the suite on one tree: how it ended and each test's outcome by id."""

    tree: Literal["head", "fixed"]
    sha: str
    command: str
    exit_code: int | None
    seconds: float
    outcomes: dict[str, Outcome]
    problems: list[str] = []
    read: bool = True
    timed_out: bool = False
    error: str | None = None
    cached: bool = False

    def summary(self) -> str:
        if self.error:
            return f"could not run: {self.error}"
        if not self.read:
            return "no report"
        counts: dict[str, int] = {}
        for o in self.outcomes.values():
            counts[o] = counts.get(o, 0) + 1
        parts = [f"{n} {o}" for o, n in sorted(counts.items())]
        if self.problems:
            parts.append(f"{len(self.problems)} not collected")
        return ", ".join(parts) or "no tests"


class Weakened(BaseModel):
    """A test that passed on the head and does not pass on the fixed tree."""

    id: str
    head: Outcome
    fixed: str  # an outcome, "missing", or "renamed to <id>"


class SuiteDelta(BaseModel):
    """The suite on both trees and what the fix did to it. ``note`` says why it was not compared."""

    command: str | None = None
    head: SuiteSide | None = None
    fixed: SuiteSide | None = None
    weakened: list[Weakened] = []
    failing_on_head: list[str] = []
    note: str | None = None


def cache_name(tree: str, command: str) -> str:
    """The artifact name of the head's suite result: per tree and per suite command."""
    digest = hashlib.sha256(command.encode()).hexdigest()[:16]
    return f"suites/{tree}.{digest}.json"


def test_dirs(repo: Path, tree: str, runner: Runner | None) -> list[str]:
    """What pytest is pointed at for the suite: the top-level directories holding test files at ``tree``
    (``tests``), and test files at the top level. Other runners discover on their own: empty."""
    suffixes = _SUFFIXES.get(runner or "")
    if runner != "pytest" or suffixes is None:
        return []
    raw = git_bytes(["ls-tree", "-r", "-z", "--name-only", tree], repo).decode("utf-8", "surrogateescape")
    out: set[str] = set()
    for path in filter(None, raw.split("\0")):
        if path.endswith(suffixes) and is_test_path(path) and PurePosixPath(path).name != "conftest.py":
            out.add(path.split("/", 1)[0])
    return sorted(out)


def side_of(
    tree: Literal["head", "fixed"],
    sha: str,
    command: str,
    report: TestReport,
    *,
    exit_code: int | None,
    seconds: float,
    timed_out: bool = False,
    error: str | None = None,
) -> SuiteSide:
    return SuiteSide(
        tree=tree,
        sha=sha,
        command=command,
        exit_code=exit_code,
        seconds=round(seconds, 3),
        outcomes={r.id: r.outcome for r in report.results},
        problems=report.problems[:50],
        read=report.read,
        timed_out=timed_out,
        error=error,
    )


def _test_name(test_id: str) -> str:
    """The part of an id that survives a move to another file or class (the test function's name)."""
    return test_id.replace("::", ".").rsplit(".", 1)[-1]


def compare(head: SuiteSide, fixed: SuiteSide) -> tuple[list[Weakened], list[str]]:
    """(weakened tests, tests already failing on the head). Only a test that passed on the head can be
    weakened; a missing one whose name shows up under a new id is reported as renamed."""
    appeared: dict[str, list[str]] = {}
    for tid in fixed.outcomes.keys() - head.outcomes.keys():
        appeared.setdefault(_test_name(tid), []).append(tid)
    weakened: list[Weakened] = []
    for tid, outcome in sorted(head.outcomes.items()):
        if outcome != "passed":
            continue
        after = fixed.outcomes.get(tid)
        if after == "passed":
            continue
        now: str
        if after is None:
            moved = appeared.get(_test_name(tid))
            now = f"renamed to {moved[0]}" if moved else "missing"
        else:
            now = after
        weakened.append(Weakened(id=tid, head=outcome, fixed=now))
    failing = sorted(t for t, o in head.outcomes.items() if o in ("failed", "error"))
    return weakened, failing


def measure(
    wt: Path,
    tc: TestCommand,
    checks: dict[str, str],
    fixed_tree: str,
    cache: SuiteCache | None,
    run_side: Callable[[TestCommand, Literal["head", "fixed"], str], SuiteSide],
) -> SuiteDelta:
    """The suite on the head (the worktree's HEAD; from ``cache`` when this tree's result is there) and
    on ``fixed_tree``, and the delta. ``run_side`` runs the suite on the tree checked out."""
    head_tree = git(["rev-parse", "HEAD^{tree}"], wt).strip()
    stc = suite_command(tc, checks, test_dirs(wt, head_tree, tc.runner))
    if stc is None or stc.runner is None:
        return SuiteDelta(note="not compared: no suite Jury can read a report from")
    key = cache_name(head_tree, stc.command)
    head: SuiteSide | None = None
    if cache is not None and (hit := cache.get(key)) is not None:
        try:
            head = SuiteSide.model_validate_json(hit).model_copy(update={"cached": True})
        except ValueError:
            head = None  # a torn artifact: run it again
    if head is None:
        checkout(wt, head_tree)
        head = run_side(stc, "head", head_tree)
        if cache is not None:
            cache.put(key, head.model_dump_json().encode())
    checkout(wt, fixed_tree)
    fixed = run_side(stc, "fixed", fixed_tree)
    d = SuiteDelta(command=stc.command, head=head, fixed=fixed)
    if not head.read or head.error:
        return d.model_copy(update={"note": f"not compared: the suite on the head gave {head.summary()}"})
    weakened, failing = compare(head, fixed)
    return d.model_copy(update={"weakened": weakened, "failing_on_head": failing[:50]})


def checkout(wt: Path, tree: str) -> None:
    """Make the worktree's index and files exactly ``tree``, whatever the last run left."""
    git(["read-tree", tree], wt)
    git(["checkout-index", "--all", "--force"], wt)
    git(["clean", "-fdxq"], wt)


def delta_problem(d: SuiteDelta) -> str | None:
    """Why the suite delta refutes the fix, or None."""
    if d.fixed is not None and d.head is not None and d.head.read and not d.head.error:
        if d.fixed.error:
            return f"the suite cannot be run with the fix: {d.fixed.error}"
        if d.fixed.timed_out:
            return "the suite times out with the fix"
        if not d.fixed.read:
            return f"the suite gives no report with the fix ({'; '.join(d.fixed.problems[:2])})"
    if not d.weakened:
        return None
    shown = "; ".join(f"{w.id} passed on the head and is {w.fixed} with the fix" for w in d.weakened[:5])
    more = f" (and {len(d.weakened) - 5} more)" if len(d.weakened) > 5 else ""
    return f"the fix weakens the suite: {shown}{more}"
