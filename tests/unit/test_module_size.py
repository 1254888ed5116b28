"""The house keeps each module to one concern, and a module past 600 lines has been taking on a second
one: every module of Jury's packages (and the bench) stays under it. A module that grows past it is split
along its concerns, as ``orchestrator/spec.py`` left ``domain.py`` and ``store/redis_scripts.py`` left
``store/redis.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("orchestrator", "workers", "jury_cli", "bench")
MOST = 600


def modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_the_packages_hold_modules() -> None:
    assert len(modules()) > 100  # the walk sees the code, so the test below is about something


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_600_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MOST, f"{path.relative_to(ROOT)} has {lines} lines: split it along its concerns"
