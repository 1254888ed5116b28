"""A function past 80 lines does several things in a row, and each of them deserves a name: every function
of Jury's packages (methods and nested functions included) stays under it. One that grows past it is split
into named steps, as ``run_supervised`` became its setup, its wait and its reaping."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("orchestrator", "workers", "jury_cli")
MOST = 80


def modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def long_functions(source: str, most: int = MOST) -> list[tuple[str, int]]:
    """Each function (def or async def, at any depth) longer than ``most`` lines, from its ``def`` line to
    its last line, with its length."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > most:
                found.append((node.name, length))
    return found


def test_the_packages_hold_modules() -> None:
    assert len(modules()) > 100  # the walk sees the code, so the test below is about something


def test_a_long_method_or_nested_function_is_seen() -> None:
    inner_body = "".join(f"            x{i} = {i}\n" for i in range(MOST))
    source = (
        "class C:\n    def m(self):\n        def inner():\n"
        + inner_body
        + "        return inner\n\n    async def short(self):\n        return 1\n"
    )
    assert sorted(long_functions(source)) == [("inner", MOST + 1), ("m", MOST + 3)]
    flat_body = "".join(f"    x{i} = {i}\n" for i in range(MOST - 1))
    assert long_functions(f"def f():\n{flat_body}") == []  # exactly MOST lines is allowed
    assert long_functions(f"async def f():\n{flat_body}    y = 0\n") == [("f", MOST + 1)]


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_function_is_over_80_lines(path: Path) -> None:
    relative = str(path.relative_to(ROOT))
    long = [f"{name} ({length} lines)" for name, length in long_functions(path.read_text(encoding="utf-8"))]
    assert not long, f"{relative}: {', '.join(long)} over {MOST} lines: split into named steps"
