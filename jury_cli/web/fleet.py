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
            "schedules": schedules(settings, None),
        }
    return {
        "redis": True,
        "workers": workers(store, settings),
        "queues": queues(store),
        "inflight": inflight(store),
        "spend": spend_today(store, settings),
        "schedules": schedules(settings, store),
    }


def workers(store: LiveStore, settings: Settings) -> dict[str, Any]:
    """The live workers (their presence records in Redis, ``workers.fleet.presence``): a dead one lapses."""
    from datetime import UTC, datetime

    from workers.fleet.presence import live_workers

    client = getattr(store, "client", None)
    if client is None:
        return missing("worker presence lives in Redis; this store has none")

    def iso(t: float | None) -> str | None:
        return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds") if t else None

    found = live_workers(client, getattr(store, "prefix", "jury"))
    return {
        "available": True,
        "workers": [
            {
                "id": w.id,
                "host": w.host,
                "pid": w.pid,
                "queues": w.queues,
                "concurrency": w.concurrency,
                "state": w.state,
                "started": iso(w.started),
                "lastSeen": iso(w.last_seen),
                "reapedAt": iso(w.reaped_at),
            }
            for w in found
        ],
    }


def queues(store: LiveStore) -> dict[str, Any]:
    """Each queue's waiting messages and the ones delivered to a worker, not yet done (Celery's lists in
    the fleet's Redis, read by ``workers.fleet.fleetview``, as ``jury metrics`` reads them)."""
    from workers.fleet.fleetview import queue_depths, tasks_in_flight

    client = getattr(store, "client", None)
    if client is None:
        return missing("the queues live in Redis; this store has none")
    depths, taken = queue_depths(client), tasks_in_flight(client)
    return {
        "available": True,
        "queues": [{"name": q, "depth": n, "inFlight": taken.get(q, 0)} for q, n in depths.items()],
    }


def inflight(store: LiveStore) -> dict[str, Any]:
    """The active runs (the reaper's set): each with its state and the actions it has out."""
    from orchestrator.run_reader import fold_run

    rows: list[dict[str, Any]] = []
    for slug in store.active_runs():
        try:
            s = fold_run(store, slug)
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
    from workers.fleet.ledger import Ledger, utc_day

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


def schedules(settings: Settings, store: LiveStore | None) -> dict[str, Any]:
    """The operator's ``[[schedules]]`` with their last firing (kept in the fleet's Redis) and next slot,
    as ``jury schedules`` shows them."""
    import time

    from orchestrator.config import load_schedules, operator_config_file
    from orchestrator.errors import JuryError
    from orchestrator.schedules import slot_after
    from workers.fleet.scheduler import slot_time, store_for

    try:
        found = load_schedules(operator_config_file(settings, None))
    except JuryError as exc:
        return missing(f"the operator's [[schedules]] cannot be read: {exc}")
    last_note = None if store is not None else "last firings unknown: they are kept in the fleet's Redis"
    lasts: dict[str, Any] = {}
    if store is not None and found:
        try:
            sched = store_for(settings)
            lasts = {s.name: sched.last(s.name) for s in found}
        except JuryError as exc:
            last_note = f"last firings unknown: {exc}"
    now = time.time()
    rows = []
    for s in found:
        last = lasts.get(s.name)
        rows.append(
            {
                "name": s.name,
                "kind": s.kind,
                "cron": s.cron_text(),
                "repos": list(s.repos),
                "last": None
                if last is None
                else {"slot": slot_time(last.slot), "ok": last.ok, "by": last.by, "outcome": last.outcome},
                "next": slot_time(slot_after(s, now)),
            }
        )
    return {"available": True, "schedules": rows, "note": last_note}
