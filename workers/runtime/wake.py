"""Waking a run's coordinator: the one place that sends ``jury.coordinate``.

Every path that needs a coordinator pass (a task that ended, a started run, a cancel, a sweep's hundred
runs) calls ``wake``: one message per run, on one broker connection for a batch. A wake is idempotent: a
pass that finds nothing new to do ends at once, and the queue's dedup (``LiveStore.take_wake`` where the
caller holds one) keeps a burst of kicks to one pass in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["COORDINATE", "celery_kick", "wake"]

COORDINATE = "jury.coordinate"  # the coordinator's task name (orchestrator.actions.routes: queue "control")

Kick = Callable[[Sequence[str]], None]


def wake(app: Any, slugs: Sequence[str]) -> None:
    """Send one coordinator pass for each run in ``slugs`` through the Celery ``app``, every message on
    one broker connection."""
    if not slugs:
        return
    with app.producer_or_acquire() as producer:
        for slug in slugs:
            app.send_task(COORDINATE, args=[slug], producer=producer)


def celery_kick(app: Any) -> Kick:
    """``wake`` bound to ``app``: what a sweep calls with the runs it started."""
    return lambda slugs: wake(app, slugs)
