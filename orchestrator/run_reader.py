"""Reading a run: its fold from the coordinator's snapshot and the events after the snapshot's cursor.

One reader for everything that shows or acts on a run (the coordinator's pass, the reaper, a task loading
its job, the CLI, the console, metrics and the fleet's view), so none of them costs the run's age and the
log stays the only truth: a snapshot that does not match is never trusted, the whole log is folded instead.
"""

from __future__ import annotations

from typing import Any

import structlog

from orchestrator.domain import Event
from orchestrator.fold import RunState, apply, fold, restore
from orchestrator.store.base import LiveStore, Tail

__all__ = ["read_state", "state_from"]

log = structlog.get_logger()


def read_state(store: LiveStore, slug: str) -> tuple[RunState, str | None, str | None, list[Event]]:
    """The run's fold, the log position it covers, the log's origin and the events folded now.

    From the coordinator's snapshot and the events after its position when it matches this code and this
    log; else (none, another fold version or set of event kinds, another log, a position no longer in the
    log) from the whole log, so the log stays the only truth and a snapshot is only ever a shortcut.
    Every reader on a worker (the coordinator's pass, the reaper, a task loading its job) goes through
    here, so none of them costs the run's age.
    """
    return state_from(store, slug, store.read_from_snapshot(slug))  # one round trip


def state_from(
    store: LiveStore, slug: str, read: tuple[str | None, dict[str, Any] | None, Tail]
) -> tuple[RunState, str | None, str | None, list[Event]]:
    """``read_state`` from what ``read_from_snapshot`` answered (alone, or in a batch of runs:
    ``read_from_snapshots``); the whole log is read only when the snapshot does not match."""
    origin, doc, tail = read
    restored = restore(doc, origin)
    if restored is not None:
        state, position = restored
        if tail is not None:
            for _, e in tail:
                apply(state, e)
            return state, tail[-1][0] if tail else position, origin, [e for _, e in tail]
        log.info("fold.snapshot_unmatched", slug=slug, position=position)
    every = store.read_after(slug, None) or []
    state = fold((e for _, e in every), slug)
    return state, every[-1][0] if every else None, origin, [e for _, e in every]
