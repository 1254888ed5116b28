"""One function per operation (issue 45): each of these is done in one module, and every other module
calls it. Read from the source (AST), so a new caller that does the operation itself fails here:

- waking a coordinator: ``jury.coordinate`` is sent only by ``workers/runtime/wake.py``;
- folding a run: only ``orchestrator/run_reader.py`` folds what a store's whole log reads (the files
  record's writer and the coordinator's own catch-up excepted);
- cancelling: only ``orchestrator/cancel.py`` appends a ``run.cancel`` and sets the cancel flag;
- starting a run: only ``orchestrator/start.py`` claims a PR head with a start, resumes a run, and
  takes a cancel flag down; the console's resume calls it, not the CLI's ``run_review``.

Behaviour of each is tested in tests/integration/test_operations.py."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("orchestrator", "workers", "jury_cli")
COORDINATE = "jury.coordinate"


def modules(packages: tuple[str, ...] = PACKAGES) -> Iterator[tuple[str, ast.Module]]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), parsed(path)


@cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def called(node: ast.Call) -> str:
    """The name a call calls: ``f`` of ``f(...)``, ``m`` of ``x.m(...)``."""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and called(n) == name]


def where(name: str, packages: tuple[str, ...] = PACKAGES) -> set[str]:
    """The modules that call ``name``."""
    return {path for path, tree in modules(packages) if calls(tree, name)}


def test_only_wake_sends_the_coordinate_task() -> None:
    """The task's name is written out only in wake.py and the routing table (which the deciding side
    keeps without importing the workers); a ``send_task`` elsewhere sends an action's task, by name."""
    literal = {
        path
        for path, tree in modules((*PACKAGES, "bench"))
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and n.value == COORDINATE
    }
    assert literal == {"workers/runtime/wake.py", "orchestrator/actions.py"}
    for path, tree in modules():
        for call in calls(tree, "send_task"):
            first = call.args[0] if call.args else None
            by_kind = isinstance(first, ast.Call) and called(first) == "task_name"
            assert path == "workers/runtime/wake.py" or by_kind, f"{path}:{call.lineno} sends a task itself"


def reads_whole_log(node: ast.AST | None, assigned: dict[str, ast.AST]) -> bool:
    """Whether ``node`` is (or is built from) a read of a store's whole log: ``x.read(...)``,
    ``read_run(...)``, ``x.read_after(slug, None)``, directly or through a name assigned from one."""
    if node is None:
        return False
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in assigned and assigned[n.id] is not node:
            if reads_whole_log(assigned.pop(n.id), assigned):
                return True
        if isinstance(n, ast.Call) and called(n) in ("read", "read_run"):
            return True
        if isinstance(n, ast.Call) and called(n) == "read_after" and len(n.args) > 1:
            second = n.args[1]
            if isinstance(second, ast.Constant) and second.value is None:
                return True
    return False


def whole_log_folds(tree: ast.Module) -> list[int]:
    """The lines of ``fold(...)`` calls over what a store's whole log reads, function by function."""
    found = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
        assigned: dict[str, ast.AST] = {}
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                assigned[n.targets[0].id] = n.value
        for call in calls(fn, "fold"):
            if isinstance(call.func, ast.Name) and reads_whole_log(
                call.args[0] if call.args else None, dict(assigned)
            ):
                found.append(call.lineno)
    return found


FOLDERS = {
    "orchestrator/run_reader.py",  # the one reader
    "orchestrator/store/files.py",  # the files record's writer (``record``, ``mirror``)
    "workers/runtime/coordinator.py",  # the snapshot's writer, folding again what interleaved with it
}


def test_only_the_run_reader_folds_a_whole_log() -> None:
    folding = {path: lines for path, tree in modules() if (lines := whole_log_folds(tree))}
    assert set(folding) <= FOLDERS, {p: ls for p, ls in folding.items() if p not in FOLDERS}
    assert "orchestrator/run_reader.py" in folding  # the checker still sees what it looks for


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("RunCancel", {"orchestrator/cancel.py"}),
        ("set_cancel_flag", {"orchestrator/cancel.py"}),
        ("start_swept", {"orchestrator/start.py"}),
        ("RunResumed", {"orchestrator/start.py"}),
        ("clear_cancel_flag", {"orchestrator/start.py"}),
    ],
)
def test_one_module_does_it(name: str, home: set[str]) -> None:
    """Cancel and start are each one function's: nobody else appends a cancel, flags one, starts a PR's
    run, resumes a run or takes a cancel flag down (the stores themselves define these, not call them)."""
    assert where(name) == home


def test_the_console_resumes_through_start_run() -> None:
    tree = ast.parse((ROOT / "jury_cli/web/actions.py").read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert "run_review" not in names and "start_run" in names
    assert "jury_cli/web/actions.py" in where("start_run")
    assert {"jury_cli/review.py", "jury_cli/web/actions.py"} <= where("start_run")
    assert "workers/fleet/sweep.py" in where("start_runs")
