"""``fold.apply`` has a case for every event kind: a new event without one is a type error for mypy
(``assert_never``) and, should it reach the fold anyway, a clear error at run time, never an event
silently ignored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

import orchestrator.fold
from orchestrator.domain import EventBase, RunCancel
from orchestrator.fold import RunState, apply

FOLD = Path(orchestrator.fold.__file__)
ROOT = FOLD.parent.parent


class Unfolded(EventBase):
    t: Literal["test.unfolded"] = "test.unfolded"


def test_an_event_without_a_case_is_a_clear_error_at_run_time() -> None:
    with pytest.raises(TypeError, match="fold.apply has no case for the event kind 'test.unfolded'"):
        apply(RunState(slug="s"), Unfolded(eid="x"))  # type: ignore[arg-type]


def test_every_event_kind_has_its_case() -> None:
    s = RunState(slug="s")
    apply(s, RunCancel(eid="c"))
    assert s.cancel_requested  # a kind with its case folds as before


def mypy(*paths: Path, cache: Path) -> str:
    """mypy's report on ``paths``, with the repository's configuration and imports."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), "--no-error-summary", *map(str, paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.stdout + done.stderr


def test_a_missing_case_is_a_type_error(tmp_path: Path) -> None:
    pytest.importorskip("mypy")  # in the dev extras
    case = "        case RunCancel():\n            s.cancel_requested = True\n"
    text = FOLD.read_text()
    assert case in text
    copy = tmp_path / "fold_without_a_case.py"
    copy.write_text(text.replace(case, ""))
    report = mypy(FOLD, copy, cache=tmp_path / "cache")
    never = [line for line in report.splitlines() if "assert_never" in line]
    assert len(never) == 1, report
    assert never[0].startswith(str(copy)) and 'incompatible type "RunCancel"' in never[0], report
