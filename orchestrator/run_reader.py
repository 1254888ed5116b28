"""Reading a run: its fold from the coordinator's snapshot and the events after the snapshot's cursor.

One reader for everything that shows or acts on a run (the coordinator's pass, the reaper, a task loading
its job, the CLI, the console, metrics and the fleet's view), so none of them costs the run's age and the
log stays the only truth: a snapshot that does not match is never trusted, the whole log is folded instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from orchestrator.domain import Event
from orchestrator.fold import RunState, apply, fold, restore
from orchestrator.store.base import EventStore, LiveStore, Tail, check_slug, read_run

__all__ = ["Kept", "advance", "fold_named", "fold_run", "read_state", "state_from"]

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


def fold_run(store: EventStore, slug: str) -> RunState:
    """The run's fold now, whatever the store: a live store's from its snapshot (``read_state``), a files
    record's from its log (it keeps no snapshot). An empty fold (``events == 0``) when it holds nothing."""
    if isinstance(store, LiveStore):
        return read_state(store, slug)[0]
    return fold(store.read(slug), slug)


def fold_named(store: EventStore, slug: str, record_root: Path | None = None) -> RunState:
    """The fold of a run someone asked for by name (``jury show``, ``jury fetch``): from the snapshot when
    the live store holds it, else ``read_run``'s errors (unknown: UsageError; gone from the live store:
    RunVanished; a files record with no readable event: JuryError). ``record_root`` as ``read_run``'s."""
    if isinstance(store, LiveStore) and store.exists(check_slug(slug)):
        state = read_state(store, slug)[0]
        if state.events:
            return state
    return fold(read_run(store, slug, record_root), slug)


@dataclass
class Kept:
    """A run's fold kept by a reader between reads (the console's run list, the fleet's metrics): the
    log it folds (``origin``) and the position it covers."""

    state: RunState
    origin: str
    position: str


def advance(store: LiveStore, slug: str, kept: Kept | None) -> Kept | None:
    """``kept`` brought up to date with the events logged after its position (changed in place); when it
    does not line up (none kept, the log deleted or begun again, its position gone from the log), the
    run read afresh through ``read_state``. None when the run's log is empty (gone)."""
    if kept is not None and kept.origin == store.origin(slug):
        after = store.read_after(slug, kept.position)
        if after is not None:
            for at, event in after:
                apply(kept.state, event)
                kept.position = at
            return kept
    state, position, origin, _ = read_state(store, slug)
    if origin is None or position is None or state.events == 0:
        return None
    return Kept(state, origin, position)
