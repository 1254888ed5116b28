"""The fleet page's data: workers, queues and their depths, runs in flight, today's spend against the
fleet's ceiling, the schedules.

A section this console cannot read says so (``available: false`` and why) instead of showing nothing as
if nothing were there: a console over a files record has no fleet at all.
"""

from __future__ import annotations

from typing import Any

from orchestrator.config import Settings
from orchestrator.store.base import EventStore, LiveStore


def missing(why: str) -> dict[str, Any]:
    return {"available": False, "why": why}


def fleet(store: EventStore, settings: Settings) -> dict[str, Any]:
    if not isinstance(store, LiveStore) or not settings.redis_url:
        why = f"no fleet: runs are read from the files under {settings.dir} (set JURY_REDIS_URL for a fleet)"
        return {
            "redis": False,
            "workers": missing(why),
            "queues": missing(why),
            "inflight": missing(why),
            "spend": missing(why),
            "schedules": missing(why),
        }
    return {
        "redis": True,
        "workers": workers(store, settings),
        "queues": queues(store, settings),
        "inflight": inflight(store),
        "spend": spend_today(store, settings),
        "schedules": schedules(store, settings),
    }


def workers(store: LiveStore, settings: Settings) -> dict[str, Any]:
    return missing("worker presence is not available in this release (workers/presence.py)")


def queues(store: LiveStore, settings: Settings) -> dict[str, Any]:
    return missing("queue depths are not available in this release (workers/fleetview.py)")


def inflight(store: LiveStore) -> dict[str, Any]:
    """The active runs (the reaper's set): each with its state and the actions it has out."""
    from orchestrator.fold import fold

    rows = []
    for slug in store.active_runs():
        try:
            s = fold(store.read(slug), slug)
        except Exception as exc:  # one unreadable run never blanks the page
            rows.append({"slug": slug, "state": "unreadable", "error": str(exc), "actions": []})
            continue
        rows.append(
            {
                "slug": slug,
                "state": s.state,
                "actions": [{"key": a.key, "kind": a.kind, "agent": a.agent} for a in s.inflight()],
            }
        )
    return {"available": True, "runs": rows}


def spend_today(store: LiveStore, settings: Settings) -> dict[str, Any]:
    """Today's (UTC) spend and reservations of the whole fleet against ``JURY_FLEET_DAY_CEILING``."""
    from workers.ledger import Ledger, utc_day

    client = getattr(store, "client", None)
    if client is None:
        return missing("the ledger lives in Redis; this store has none")
    totals = Ledger(client, getattr(store, "prefix", "jury")).day_totals()
    return {
        "available": True,
        "day": utc_day(),
        "spentUsd": totals.spent,
        "reservedUsd": totals.reserved,
        "unknownCalls": totals.unknown_calls,
        "ceilingUsd": settings.fleet_day_ceiling,
    }


def schedules(store: LiveStore, settings: Settings) -> dict[str, Any]:
    return missing("schedules are not available in this release (workers/scheduler.py)")
