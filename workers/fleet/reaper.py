"""What every worker does beside its tasks: keep its presence fresh and, one worker per period, reap.

No worker is special. Each one, once ready, starts ``FleetDuties``: a presence thread
(``workers.fleet.presence``) and a reaper thread. Every quarter of ``JURY_REAP_EVERY`` (with jitter, so the
fleet does not move in step) the reaper thread tries the reaper's lock, ``SET <prefix>:reaper <worker id> NX
PX <period>``: whoever sets it runs ``workers.runtime.coordinator.reap`` and nobody else does until it lapses.
While the pass runs, a heartbeat (``ReaperHeartbeat``) extends the lock by a period every third of one, so a
pass longer than the period (tens of thousands of runs, a slow Redis) is never joined by a second reaper; the
pass asks between batches whether the lock is still its own, and stops after ``PASS_AT_MOST`` periods, after
which the lock lapses a period later.
So with N workers up, N-1 may die and reaping goes on, about once per period; a dead worker's actions
are handed out again within ``JURY_LEASE_TTL`` + ``JURY_REAP_EVERY`` + a quarter period
(``recovery_bound``: under a minute by default), since its leases lapse at most one TTL after its last
heartbeat and ``reap`` sends a taken action whose lease lapsed again at once. ``reap`` is idempotent,
so a reap run twice (a heartbeat that could not reach Redis for a whole period) costs a pass and
changes nothing.

The threads touch Redis only: nothing a task does (a CPU-bound parser, an agent blocking its thread)
holds anything they wait for.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

import redis
import structlog
from redis.exceptions import RedisError

from orchestrator.config import Settings
from orchestrator.errors import StoreError
from orchestrator.store import keys as store_keys
from orchestrator.store.base import LiveStore
from workers.fleet.presence import Presence

log = structlog.get_logger()

PRESENCE_EVERY = 5.0  # seconds between presence refreshes
PRESENCE_TTL = 20.0  # a worker silent this long is no longer listed
TRIES_PER_PERIOD = 4  # the reaper's lock is tried this often per reap period


def next_try(period: float) -> float:
    """Seconds until a worker tries the reaper's lock again: a ``TRIES_PER_PERIOD``-th of the period,
    jittered down by up to half (the fleet does not move in step)."""
    return period / TRIES_PER_PERIOD * random.uniform(0.5, 1.0)


def recovery_bound(lease_ttl: float, reap_every: float) -> float:
    """The longest a dead worker's action waits before a reaper sends it out again: its lease lapses at
    most ``lease_ttl`` after the worker's last heartbeat; the reaper's lock, taken at most then, lapses a
    period later, and some worker tries it within one ``next_try`` after (the longest: a quarter period);
    that reap sends the action again at once (``coordinator.reap``: taken, lease lapsed)."""
    return lease_ttl + reap_every + reap_every / TRIES_PER_PERIOD


def take_reaper_lock(
    client: redis.Redis, worker_id: str, period: float, prefix: str = store_keys.PREFIX
) -> bool:
    """Take the reaper's lock for one ``period`` if nobody holds it; True if this worker reaps now."""
    try:
        return bool(client.set(store_keys.reaper(prefix), worker_id, nx=True, px=max(1, int(period * 1000))))
    except RedisError as exc:
        raise StoreError(f"cannot take the reaper's lock: {exc}") from exc


def reaper_holder(client: redis.Redis, prefix: str = store_keys.PREFIX) -> str | None:
    """The worker id that holds the reaper's lock now (the latest to reap, within one period), if any."""
    try:
        value = client.get(store_keys.reaper(prefix))
    except RedisError as exc:
        raise StoreError(f"cannot read the reaper's lock: {exc}") from exc
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


# Extend the reaper's lock by one period if this worker still holds it.
#   KEYS[1]  the lock (keys.reaper)   ARGV[1]  the worker id   ARGV[2]  the period, ms
# Returns 1 if extended, 0 if another worker holds it (or nobody: it lapsed).
EXTEND_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

BEATS_PER_PERIOD = 3  # the lock is extended this often per period while a pass runs
PASS_AT_MOST = 4  # periods a pass may run; past that it stops and the lock lapses a period later


class ReaperHeartbeat:
    """Keeps the reaper's lock while this worker's pass runs: extends it by a period every third of one,
    so a pass longer than the period (tens of thousands of runs, a slow Redis) is never joined by a second
    reaper. ``holding`` is what the pass asks between batches: False once the lock was lost (an extension
    found another holder or failed past the lock's life) or the pass ran ``PASS_AT_MOST`` periods; the
    heartbeat then stops extending, so the lock lapses at most a period later and reaping moves on."""

    def __init__(
        self, client: redis.Redis, worker_id: str, period: float, prefix: str = store_keys.PREFIX
    ) -> None:
        self.client, self.worker_id, self.period, self.prefix = client, worker_id, period, prefix
        self._extend = client.register_script(EXTEND_LUA)
        self.lost = threading.Event()
        self.stopping = threading.Event()
        self.beats = 0  # extensions made (tests wait on it)
        self.beat = threading.Condition()
        self.until = time.monotonic() + PASS_AT_MOST * period
        self._thread = threading.Thread(target=self._run, name="jury-reaper-lock", daemon=True)

    def holding(self) -> bool:
        """Whether the pass may go on: the lock is still this worker's, and the pass within its bound."""
        return not self.lost.is_set() and time.monotonic() < self.until

    def __enter__(self) -> ReaperHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self._thread.join()

    def _run(self) -> None:
        held_until = time.monotonic() + self.period
        while not self.stopping.wait(self.period / BEATS_PER_PERIOD):
            if not self.holding():
                return
            try:
                extended = self._extend(
                    keys=[store_keys.reaper(self.prefix)],
                    args=[self.worker_id, max(1, int(self.period * 1000))],
                )
            except RedisError as exc:
                log.warning("reap.lock_unextended", worker=self.worker_id, error=str(exc))
                if time.monotonic() >= held_until:
                    self.lost.set()  # it lapsed meanwhile: another worker may hold it now
                continue
            if not extended:
                log.warning("reap.lock_lost", worker=self.worker_id)
                self.lost.set()
                return
            held_until = time.monotonic() + self.period
            with self.beat:
                self.beats += 1
                self.beat.notify_all()


class ReaperHost(Protocol):
    """What a worker's duties need of it (``workers.runtime.context.Runtime`` is one): its settings (the
    reap period), its Redis client and key prefix (the reaper's lock) and its store (pruning)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def client(self) -> redis.Redis: ...
    @property
    def prefix(self) -> str: ...
    @property
    def store(self) -> LiveStore: ...


Host = TypeVar("Host", bound=ReaperHost)


class FleetDuties(Generic[Host]):
    """A worker's background threads: its presence, and its turn at reaping."""

    def __init__(
        self,
        rt: Host,
        presence: Presence,
        *,
        reap: Callable[[Host, Callable[[], bool]], object],
        presence_every: float = PRESENCE_EVERY,
    ) -> None:
        self.rt, self.presence, self.reap = rt, presence, reap
        self.presence_every = presence_every
        self.period = rt.settings.reap_every
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.heartbeat: ReaperHeartbeat | None = None  # the latest pass's (tests watch it)

    def start(self) -> None:
        for name, loop in (("jury-presence", self._presence_loop), ("jury-reaper", self._reaper_loop)):
            thread = threading.Thread(target=loop, name=name, daemon=True)
            thread.start()
            self.threads.append(thread)
        log.info("worker.duties_started", worker=self.presence.id, reap_every=self.period)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop both threads and remove the presence record (a clean exit)."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout)
        try:
            self.presence.remove()
        except StoreError as exc:
            log.warning("presence.remove_failed", worker=self.presence.id, error=str(exc))

    def _presence_loop(self) -> None:
        while True:
            try:
                self.presence.refresh()
            except StoreError as exc:
                log.warning("presence.refresh_failed", worker=self.presence.id, error=str(exc))
            if self.stopping.wait(self.presence_every):
                return

    def reap_turn(self) -> bool:
        """One try: reap if this worker takes the lock. True if it reaped."""
        if not take_reaper_lock(self.rt.client, self.presence.id, self.period, self.rt.prefix):
            return False
        started = time.time()
        with ReaperHeartbeat(self.rt.client, self.presence.id, self.period, self.rt.prefix) as heartbeat:
            self.heartbeat = heartbeat
            recovered = self.reap(self.rt, heartbeat.holding)
            prune = getattr(self.rt.store, "prune", None)  # the Redis store's expired runs, batch by batch
            if callable(prune) and heartbeat.holding():
                prune()
        self.presence.update(reaped_at=started)
        log.info(
            "reap.done",
            worker=self.presence.id,
            recovered=len(recovered) if isinstance(recovered, list) else None,
            seconds=round(time.time() - started, 3),
        )
        return True

    def _reaper_loop(self) -> None:
        while True:  # a first try at once: a worker that starts looks for work the dead left behind
            try:
                self.reap_turn()
            except (StoreError, RedisError) as exc:
                log.warning("reap.failed", worker=self.presence.id, error=str(exc))
            except Exception:  # a reaper that dies is a fleet that stops recovering: log and go on
                log.exception("reap.crashed", worker=self.presence.id)
            if self.stopping.wait(next_try(self.period)):
                return
