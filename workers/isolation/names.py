"""What names a run's checkouts and scratch folders on a host: never shared by two runs, never a path."""

from __future__ import annotations

import re

from orchestrator.fold import RunState

__all__ = ["run_key", "safe_name"]


def safe_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", key)


def run_key(state: RunState) -> str:
    """What names the run's checkouts and scratch folders: its slug and its unique ``run_id``, so two runs
    never share one, nor remove each other's as stale; a run recorded before ``run_id``: its slug."""
    run_id = state.target.run_id
    return f"{state.slug}.{safe_name(run_id)}" if run_id else state.slug
