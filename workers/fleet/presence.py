"""Which workers are alive: each worker keeps a presence record in Redis, refreshed by a thread of its own.

A record is one JSON string per worker under ``<prefix>:worker:<id>`` with a TTL (a worker that dies
vanishes once it lapses) and a score in ``<prefix>:workers`` (when it was last refreshed), so a reader
finds the fleet without scanning the database. ``live_workers`` is what the metrics and the console read;
``Presence`` is what a worker writes (``workers.fleet.reaper.FleetDuties`` refreshes it).

Keys come from ``orchestrator.store.keys`` (``worker``, ``workers``).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from datetime import UTC, datetime
from typing import Literal, cast

import redis
import structlog
from pydantic import BaseModel, ConfigDict, ValidationError
from redis.exceptions import RedisError

from orchestrator.errors import StoreError
from orchestrator.store import keys as store_keys

log = structlog.get_logger()

WorkerState = Literal["running", "draining"]


class WorkerPresence(BaseModel):
    """One worker as it last said it was: who, where, what it consumes, and since when."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int | None = None
    pool: str | None = None
    started: float  # epoch seconds
    last_seen: float  # epoch seconds: the latest refresh
    state: WorkerState = "running"  # draining: shutting down, taking no new task
    reaped_at: float | None = None  # epoch seconds of the latest reap this worker ran

    def started_at(self) -> datetime:
        return datetime.fromtimestamp(self.started, UTC)


def new_worker_id() -> str:
    """A fresh id: host, pid and a random tail (a restarted worker with a recycled pid is a new one)."""
    host = "".join(c if c.isalnum() or c in "-_." else "-" for c in socket.gethostname())[:64] or "host"
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Presence:
    """A worker's own presence record: ``refresh`` it more often than ``ttl``, ``remove`` it on exit."""

    def __init__(
        self,
        client: redis.Redis,
        me: WorkerPresence,
        *,
        ttl: float,
        prefix: str = store_keys.PREFIX,
    ) -> None:
        if ttl <= 0:
            raise ValueError(f"presence ttl must be positive, got {ttl}")
        self.client, self.prefix, self.ttl = client, prefix, ttl
        self.me = me

    @property
    def id(self) -> str:
        return self.me.id

    def update(self, **changes: object) -> WorkerPresence:
        """Change the record (``state``, ``reaped_at``); written at the next ``refresh``."""
        self.me = self.me.model_copy(update=changes)
        return self.me

    def refresh(self) -> None:
        """Write the record with a fresh ``last_seen`` and TTL, and its score in the index."""
        now = time.time()
        self.me = self.me.model_copy(update={"last_seen": now})
        key = store_keys.worker(self.prefix, self.me.id)
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.set(key, self.me.model_dump_json(), px=max(1, int(self.ttl * 1000)))
            pipe.zadd(store_keys.workers(self.prefix), {self.me.id: now})
            pipe.execute()
        except RedisError as exc:
            raise StoreError(f"cannot refresh worker presence {self.me.id!r}: {exc}") from exc

    def remove(self) -> None:
        """Delete the record: the worker is gone (a clean exit; a dead one's record lapses by its TTL)."""
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(store_keys.worker(self.prefix, self.me.id))
            pipe.zrem(store_keys.workers(self.prefix), self.me.id)
            pipe.execute()
        except RedisError as exc:
            raise StoreError(f"cannot remove worker presence {self.me.id!r}: {exc}") from exc


def live_workers(client: redis.Redis, prefix: str = store_keys.PREFIX) -> list[WorkerPresence]:
    """The workers whose presence has not lapsed, oldest first; ids of lapsed ones are pruned from the
    index on the way. A record that does not parse (another release's, damaged) is skipped."""
    index = store_keys.workers(prefix)
    try:
        members = cast(list[bytes], client.zrange(index, 0, -1))
        ids = [m.decode() if isinstance(m, bytes) else str(m) for m in members]
        if not ids:
            return []
        raws = cast(list[bytes | None], client.mget([store_keys.worker(prefix, i) for i in ids]))
        gone = [i for i, raw in zip(ids, raws, strict=True) if raw is None]
        if gone:
            client.zrem(index, *gone)
    except RedisError as exc:
        raise StoreError(f"cannot list live workers: {exc}") from exc
    found: list[WorkerPresence] = []
    for worker_id, raw in zip(ids, raws, strict=True):
        if raw is None:
            continue
        try:
            found.append(WorkerPresence.model_validate_json(raw))
        except ValidationError as exc:
            log.warning("presence.unreadable", worker=worker_id, error=str(exc)[:200])
    return sorted(found, key=lambda w: (w.started, w.id))
