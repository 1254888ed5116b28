"""What a reaper pass needs of a run, read cheaply: its state, whether it awaits publishing, and its
actions in flight (kind and key), nothing else.

A full fold (``orchestrator.run_reader.read_state``) validates the whole run state from the coordinator's
snapshot: most of a millisecond a run, so tens of seconds a pass over tens of thousands of active runs. So
every coordinator pass writes, inside the snapshot it writes anyway, a **digest** of those three things
(``digest``), and the store hands a batch of runs' digests back in one round trip without the snapshot's
body (``LiveStore.reap_digests``), only where the digest is the log's whole truth: the snapshot is of this
log (its origin), its position is still in the log and nothing was appended after it. Any other run (a
worker's report after the last pass, no snapshot yet, another fold version) is folded in full, as before.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from orchestrator.decide import awaiting_publish
from orchestrator.fold import FOLD_VERSION, KINDS, RunState
from orchestrator.run_reader import state_from
from orchestrator.store.base import LiveStore


class ReapView(NamedTuple):
    """A run as a reaper pass sees it."""

    state: str
    publishing: bool  # ended, and its publishing still to do: it stays active
    inflight: list[tuple[str, str]]  # (kind, key) of each action dispatched and not done


def digest(state: RunState) -> dict[str, Any]:
    """The digest the coordinator keeps in its snapshot (``doc["reap"]``), of the fold it snapshots."""
    return {
        "version": FOLD_VERSION,
        "kinds": KINDS,
        "state": state.state,
        "publishing": awaiting_publish(state),
        "inflight": [[a.kind, a.key] for a in state.inflight()],
    }


def view_of(state: RunState) -> ReapView:
    return ReapView(state.state, awaiting_publish(state), [(a.kind, a.key) for a in state.inflight()])


def from_digest(doc: object) -> ReapView | None:
    """The view a digest gives, or None when it is not one this code wrote (then the run is folded)."""
    if not isinstance(doc, dict) or doc.get("version") != FOLD_VERSION or doc.get("kinds") != KINDS:
        return None
    state, publishing, inflight = doc.get("state"), doc.get("publishing"), doc.get("inflight")
    if not isinstance(state, str) or not isinstance(publishing, bool) or not isinstance(inflight, list):
        return None
    pairs = [tuple(p) for p in inflight if isinstance(p, list) and len(p) == 2]
    if len(pairs) != len(inflight) or not all(isinstance(x, str) for p in pairs for x in p):
        return None
    return ReapView(state, publishing, [(str(kind), str(key)) for kind, key in pairs])


def views(store: LiveStore, slugs: list[str]) -> list[ReapView]:
    """Each run's view: from its digest where the store vouches for it, else from a full fold (the
    runs without one read at once, ``read_from_snapshots``)."""
    found = [from_digest(d) for d in store.reap_digests(slugs)]
    missing = [slug for slug, view in zip(slugs, found, strict=True) if view is None]
    folded = iter(
        view_of(state_from(store, slug, read)[0])
        for slug, read in zip(missing, store.read_from_snapshots(missing), strict=True)
    )
    return [view if view is not None else next(folded) for view in found]
