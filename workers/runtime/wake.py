"""Waking a run's coordinator: the one place that sends ``jury.coordinate``.

Every path that needs a coordinator pass (a task that ended, the reaper, a started run, a cancel, a
sweep's hundred runs) ends in ``wake``: one message per run, on one broker connection for a batch.

A wake is deduplicated by the run's pending-kick mark (``LiveStore.claim_kicks``, ``due``): a run whose
coordinate task is queued and not yet started gets no second one, however many of its actions end or
commands touch it before that pass starts. That is safe for every caller because the pass clears the
mark before it reads the log (``coordinator.coordinate``): whatever was appended before a wake found the
mark set is read by the pass already queued. The mark lapses after ``2 x reap_after``, so a lost message
is sent again (the reaper wakes an idle run whose mark is gone).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.store.base import LiveStore

__all__ = ["COORDINATE", "Kick", "celery_kick", "due", "kick_ttl", "wake"]

COORDINATE = "jury.coordinate"  # the coordinator's task name (orchestrator.actions.routes: queue "control")
REAP_AFTER = 30.0  # Settings.reap_after's default, for a caller that has no settings at hand

Kick = Callable[[Sequence[str]], None]


def kick_ttl(reap_after: float) -> float:
    """How long a pending-kick mark holds: twice the reaper's period, so a lost message is sent again."""
    return 2 * reap_after


def due(store: LiveStore, slugs: Sequence[str], reap_after: float) -> list[str]:
    """The runs of ``slugs`` (each once, in order) whose pending-kick mark this call set: the only ones to
    send a coordinate task for. One round trip for the batch."""
    wanted = list(dict.fromkeys(slugs))
    if not wanted:
        return []
    claimed = store.claim_kicks(wanted, kick_ttl(reap_after))
    return [slug for slug, ok in zip(wanted, claimed, strict=True) if ok]


def wake(
    app: Any, slugs: Sequence[str], *, store: LiveStore | None = None, reap_after: float = REAP_AFTER
) -> list[str]:
    """Send one coordinator pass for each run in ``slugs`` through the Celery ``app``, every message on
    one broker connection; returns the runs a message was sent for.

    With ``store``: only the runs ``due`` there (no pass of theirs already waiting). Without: each run
    (the caller has claimed the marks itself: ``Runtime.wake``, the reaper's batch)."""
    sending = due(store, slugs, reap_after) if store is not None else list(dict.fromkeys(slugs))
    if not sending:
        return []
    with app.producer_or_acquire() as producer:
        for slug in sending:
            app.send_task(COORDINATE, args=[slug], producer=producer)
    return sending


def celery_kick(app: Any, store: LiveStore | None = None, reap_after: float = REAP_AFTER) -> Kick:
    """``wake`` bound to ``app`` (and the store whose marks dedup it): what a sweep calls with the runs it
    started or cancelled, and what ``orchestrator.start.start_run`` is handed."""

    def kick(slugs: Sequence[str]) -> None:
        wake(app, slugs, store=store, reap_after=reap_after)

    return kick
