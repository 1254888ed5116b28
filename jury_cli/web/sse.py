"""Server-sent events that follow a run's log: each event once, in log order, with the log's own position
as its id, so a page that lost the connection resumes with ``Last-Event-ID`` where it stopped.

    event: log      id: <position>   data: the event's JSON (its wire form)
    event: alive    data: [the agents' latest liveness ticks]   (kept beside the log, not in it)
    event: reset    data: {}   the position asked for is not in the log (it was deleted or begun again):
                               what follows is the log from its start
    event: problem  data: {"error": ...}   the store did not answer; the stream keeps trying
    : ping          every HEARTBEAT seconds, so proxies and the browser keep the connection
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio.to_thread

from jury_cli.web.views import log_stamp, read_since, ticks_of
from orchestrator.domain import dump_event
from orchestrator.errors import StoreError
from orchestrator.store.base import EventStore

POLL_SECONDS = 0.5
HEARTBEAT_SECONDS = 15.0


def frame(event: str, data: str, id_: str | None = None) -> str:
    """One SSE message; ``data`` is one line (JSON never holds a raw newline)."""
    head = f"id: {id_}\n" if id_ is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n"


async def follow(
    store: EventStore, slug: str, position: str | None, disconnected: Any, poll: float = POLL_SECONDS
) -> AsyncIterator[str]:
    """Frames for the run's events after ``position``, then for each new one, until the client leaves."""
    ticks_seen: list[str] | None = None
    stamp_seen: tuple[int, int] | None = None
    beat = time.monotonic()
    yield "retry: 2000\n\n"
    while not await disconnected():
        try:
            stamp = await anyio.to_thread.run_sync(log_stamp, store, slug)
            if stamp is None or stamp != stamp_seen:  # a files record that did not change is not read again
                found, reset = await anyio.to_thread.run_sync(read_since, store, slug, position)
                stamp_seen = stamp
            else:
                found, reset = [], False
            ticks = await anyio.to_thread.run_sync(ticks_of, store, slug)
        except StoreError as exc:
            yield frame("problem", json.dumps({"error": str(exc)}))
            await anyio.sleep(poll * 4)
            continue
        if reset:
            yield frame("reset", "{}")
        for pos, event in found:
            yield frame("log", dump_event(event), pos)
            position = pos
        latest = [t.model_dump_json() for t in ticks]
        if latest != ticks_seen:
            ticks_seen = latest
            yield frame("alive", json.dumps([t.wire() for t in ticks]))
        if found or reset:
            beat = time.monotonic()
        elif time.monotonic() - beat >= HEARTBEAT_SECONDS:
            beat = time.monotonic()
            yield ": ping\n\n"
        await anyio.sleep(poll)
