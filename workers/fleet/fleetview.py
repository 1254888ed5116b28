"""What a fleet is doing, read from its Redis: runs by state, queue depths, tasks in flight, spend.

The fleet's read model: the one place that reads the fleet's state for people. ``jury metrics``, every
worker's ``/metrics`` and the console read it through these small functions (an import-linter contract
keeps the console off the fleet's other modules). Numbers that ``jury show`` also prints (a run's state,
its spend) come from the same place ``jury show`` takes them, the fold of the run's event log, never
from counters a process kept, so the two always agree.

Queue depths and tasks in flight are Celery's, read from its Redis transport (kombu), which keeps in the
same database as Jury's keys:

- one list per queue, named as the queue (``control``, ``review`` ...), holding the messages no worker
  has taken yet; a message sent with a priority goes to a sub-queue list ``<queue>\\x06\\x16<step>``
  (steps 3, 6, 9; 0 is the queue's own list). Jury sends no priorities, but a depth counts every list of
  the queue, so a message is never missed and a sub-queue is never taken for a queue of its own;
- the hash ``unacked``: every message delivered to a worker and not yet acknowledged, the value a JSON
  ``[message, exchange, routing_key]``. Jury's tasks are acknowledged late (when they end), so this is
  what runs now plus what a worker has reserved (prefetch 1 per slot).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import redis
import structlog

from orchestrator.actions import queues
from orchestrator.config import Settings
from orchestrator.errors import StoreError
from orchestrator.fold import RunState
from orchestrator.run_reader import Kept, advance
from orchestrator.spec import TERMINAL_STATES
from orchestrator.store.base import LiveStore
from orchestrator.store.redis import RedisStore
from workers.fleet.presence import WorkerPresence, live_workers

if TYPE_CHECKING:
    from workers.fleet.ledger import LedgerTotals
    from workers.fleet.scheduler import FiringRecord

QUEUES = queues()  # every queue a worker consumes, in order (the same list the Celery app routes to)

log = structlog.get_logger()

# kombu's Redis transport (kombu.transport.redis.Channel): the separator of a priority sub-queue's name,
# the priority steps (0 is the queue's own list) and the hash of delivered, unacknowledged messages.
PRIORITY_SEP = "\x06\x16"
PRIORITY_STEPS = (0, 3, 6, 9)
UNACKED = "unacked"
# The most messages the reaper reads from the queues in one pass to tell a waiting action from a lost one:
# about 1 kB each, so a pass reads 10 MB at the most (a sweep of 1,000 PRs queues about 3,000).
QUEUED_AT_MOST = 10_000
STATES: tuple[str, ...] = ("queued", "review", "converged", "human", "failed", "cancelled")


def queue_lists(queue: str) -> list[str]:
    """The Redis lists holding ``queue``'s waiting messages: its own and its priority sub-queues'."""
    return [queue if step == 0 else f"{queue}{PRIORITY_SEP}{step}" for step in PRIORITY_STEPS]


def queue_depths(client: redis.Redis, queues: Sequence[str] = QUEUES) -> dict[str, int]:
    """Messages waiting in each queue (no worker has taken them yet), sub-queues counted in."""
    pipe = client.pipeline(transaction=False)
    for q in queues:
        for name in queue_lists(q):
            pipe.llen(name)
    lengths = cast(list[int], pipe.execute())
    per = len(PRIORITY_STEPS)
    return {q: sum(lengths[i * per : (i + 1) * per]) for i, q in enumerate(queues)}


def tasks_in_flight(client: redis.Redis, queues: Sequence[str] = QUEUES) -> dict[str, int]:
    """Messages of each queue delivered to a worker and not yet acknowledged (running, or reserved)."""
    counts = dict.fromkeys(queues, 0)
    for raw in cast(list[bytes], client.hvals(UNACKED)):
        queue = _routing_key(raw)
        if queue is not None:
            counts[queue] = counts.get(queue, 0) + 1
    return counts


def queued_actions(
    client: redis.Redis, queues: Sequence[str] = QUEUES, at_most: int = QUEUED_AT_MOST
) -> set[tuple[str, str]] | None:
    """``(slug, key)`` of every action task waiting in a queue, taken by no worker yet; None when the
    queues hold more than ``at_most`` messages (reading them all would cost more than the copies it
    saves). The reaper asks before it sends an untaken action again: one still waiting in its queue will
    be delivered, and a copy would only lengthen a backlog; one in no queue may be lost."""
    names = [name for q in queues for name in queue_lists(q)]
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.llen(name)
    depths = cast(list[int], pipe.execute())
    if sum(depths) > at_most:
        return None
    pipe = client.pipeline(transaction=False)
    for name, depth in zip(names, depths, strict=True):
        if depth:
            pipe.lrange(name, 0, -1)
    found: set[tuple[str, str]] = set()
    for messages in cast(list[list[bytes]], pipe.execute()):
        for raw in messages:
            match _task_args(raw):
                case [str() as slug, str() as key]:  # an action's task (a coordinate task has one)
                    found.add((slug, key))
                case _:
                    pass
    return found


def _task_args(raw: bytes) -> list[object] | None:
    """A waiting message's positional arguments (Celery's message protocol 2: the body, base64 in kombu's
    Redis transport, is ``[args, kwargs, embed]``), or None for one that is not of that shape."""
    try:
        message = json.loads(raw)
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        payload = json.loads(body)
    except (ValueError, TypeError, KeyError, AttributeError, binascii.Error):
        return None
    if isinstance(payload, list) and payload and isinstance(payload[0], list):
        return cast(list[object], payload[0])
    return None


def _routing_key(raw: bytes) -> str | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if isinstance(value, list) and len(value) == 3 and isinstance(value[2], str):
        return value[2]
    return None


class RunFolds:
    """Every run's fold, kept between reads: a read folds only what each log gained since the last one.

    A run is folded from the coordinator's snapshot when it matches (``orchestrator.run_reader``) plus
    the events after it, else from its whole log; a log that is gone or begun again (another ``origin``)
    is folded again. One instance per reader (a metrics endpoint keeps one for its life); the folds it
    hands out are its cache: read them, never change them.
    """

    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self._cache: dict[str, Kept] = {}  # slug -> its fold, origin and position

    def runs(self) -> dict[str, RunState]:
        """slug -> fold, for every run in the index (a run that cannot be read is left out and logged).

        One round trip tells which logs changed since the last read (their ends); only those are read."""
        folds: dict[str, RunState] = {}
        slugs = self.store.runs()
        ends = self.store.log_ends(slugs)
        for slug in slugs:
            cached, end = self._cache.get(slug), ends.get(slug)
            if cached is not None and end is not None and (cached.origin, cached.position) == end:
                folds[slug] = cached.state  # unchanged since the last read
                continue
            try:
                state = self.fold(slug)
            except (StoreError, redis.RedisError) as exc:
                log.warning("fleetview.unreadable_run", slug=slug, error=str(exc))
                continue
            if state is not None:
                folds[slug] = state
        for gone in set(self._cache) - set(slugs):
            del self._cache[gone]
        return folds

    def fold(self, slug: str) -> RunState | None:
        """The run's fold now (``orchestrator.run_reader.advance``: the one reader); None when its log is
        empty (gone)."""
        kept = advance(self.store, slug, self._cache.get(slug))
        if kept is None:
            self._cache.pop(slug, None)
            return None
        self._cache[slug] = kept
        return kept.state


def runs_by_state(folds: Iterable[RunState]) -> dict[str, int]:
    """How many runs are in each state (every state named, zero or not)."""
    counts = Counter(s.state for s in folds)
    return {name: counts.get(name, 0) for name in (*STATES, *sorted(set(counts) - set(STATES)))}


def spend(folds: Iterable[RunState]) -> dict[tuple[str, str], float]:
    """(agent, model) -> USD spent over the given runs, as ``jury show`` adds it up (the fold's ``spent``:
    known costs, and what an unknown one was charged at ``usd_per_minute``). The model is the one the
    run's configuration gave the agent ("" when none)."""
    total: dict[tuple[str, str], float] = {}
    for s in folds:
        agents = s.config.agents if s.config else {}
        for agent, usd in s.spent.items():
            spec = agents.get(agent)
            label = (agent, (spec.model if spec else None) or "")
            total[label] = round(total.get(label, 0.0) + usd, 6)
    return total


def unknown_costs(folds: Iterable[RunState]) -> int:
    """Agent calls whose cost is unknown, over the given runs."""
    return sum(s.unknown_costs for s in folds)


def actions_in_flight(folds: Iterable[RunState]) -> dict[str, int]:
    """Actions dispatched and not yet done, per kind, over the runs that have not ended."""
    counts: Counter[str] = Counter()
    for s in folds:
        if s.state not in TERMINAL_STATES:
            counts.update(a.kind for a in s.inflight())
    return dict(counts)


def workers_by_state(workers: Iterable[WorkerPresence]) -> dict[str, int]:
    """Live workers (their presence records, ``workers.fleet.presence``) by state: running, draining."""
    counts = Counter(w.state for w in workers)
    return {name: counts.get(name, 0) for name in ("running", "draining")}


def worker_slots(workers: Iterable[WorkerPresence], queues: Sequence[str] = QUEUES) -> dict[str, int]:
    """Task slots (concurrency) of the running workers that consume each queue: 0 means nobody takes it."""
    slots = dict.fromkeys(queues, 0)
    for w in workers:
        if w.state == "running":
            for q in w.queues:
                slots[q] = slots.get(q, 0) + (w.concurrency or 1)
    return slots


@dataclass
class Fleet:
    """One reading of the fleet (``read``)."""

    runs: dict[str, RunState] = field(default_factory=dict)  # slug -> fold
    queues: dict[str, int] = field(default_factory=dict)  # queue -> messages waiting
    in_flight: dict[str, int] = field(default_factory=dict)  # queue -> delivered, not acknowledged
    workers: list[WorkerPresence] = field(default_factory=list)  # the live workers

    @property
    def by_state(self) -> dict[str, int]:
        return runs_by_state(self.runs.values())

    @property
    def spend(self) -> dict[tuple[str, str], float]:
        return spend(self.runs.values())


def read(folds: RunFolds, queues: Sequence[str] = QUEUES) -> Fleet:
    """The fleet now: every run's fold, every queue's depth and tasks in flight, the live workers."""
    client = folds.store.client
    return Fleet(
        runs=folds.runs(),
        queues=queue_depths(client, queues),
        in_flight=tasks_in_flight(client, queues),
        workers=live_workers(client, folds.store.prefix),
    )


# --- the console's fleet page reads the fleet only through these ------------------------------------------


def active_runs(store: LiveStore) -> list[tuple[str, RunState | Exception]]:
    """Each active run (the reaper's set) with its state read from its snapshot cursor
    (``orchestrator.run_reader``), or the error that kept it from being read: one unreadable run never
    blanks a page."""
    from orchestrator.run_reader import read_state

    found: list[tuple[str, RunState | Exception]] = []
    for slug in store.active_runs():
        try:
            found.append((slug, read_state(store, slug)[0]))
        except Exception as exc:
            found.append((slug, exc))
    return found


def day_spend(client: redis.Redis, prefix: str) -> tuple[str, LedgerTotals]:
    """Today's (UTC) day and the whole fleet's spend and reservations on it, from the spend ledger."""
    from workers.fleet.ledger import Ledger, utc_day

    return utc_day(), Ledger(client, prefix).day_totals()


def last_firings(settings: Settings, names: Iterable[str]) -> dict[str, FiringRecord | None]:
    """Each schedule's last firing, as the fleet's Redis keeps it (``workers.fleet.scheduler``)."""
    from workers.fleet.scheduler import store_for

    schedules = store_for(settings)
    return {name: schedules.last(name) for name in names}


def slot_time(slot: float) -> str:
    """A schedule's slot as people read it (the scheduler's own format)."""
    from workers.fleet import scheduler

    return scheduler.slot_time(slot)
