"""Leases with heartbeats and done markers: how a task delivered twice makes its effect happen once.

Redis delivers a Celery task at least once (a visibility timeout, a lost worker). A task guards its effect
with a lease (one holder at a time, kept alive by a heartbeat thread) and a done marker written after the
effect; ``once`` puts the two together.

Where leases and markers live is a ``Leases``: ``RedisLeases`` for a fleet (every key from
``orchestrator.store.keys``, every compare-and-set one Lua script) and ``MemoryLeases`` for one process,
its TTLs driven by a clock a test moves by hand. Both pass ``tests/integration/test_lease.py``.
"""

from __future__ import annotations

import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Literal, Protocol, TypeVar, cast

import redis
import structlog
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from orchestrator.errors import StoreError
from orchestrator.store import keys as store_keys
from orchestrator.store.memory import Clock
from orchestrator.store.redis_marks import call_by_sha, execute_multi
from orchestrator.store.redis_scripts import KEEP_WITH_RUN_LUA, name_in_run

log = structlog.get_logger()

T = TypeVar("T")

# Take the lease if nobody holds it (SET NX PX), and name it in its run's key set (if the run keeps one).
#   KEYS[1]  the lease          (store_keys.lease)
#   KEYS[2]  the key set of the run the lease belongs to (store_keys.index_of)
#   ARGV[1]  our token
#   ARGV[2]  the TTL in milliseconds
# Returns 1 if taken, 0 if another holder has it.
TAKE_LUA = (
    "if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end\n"
    + name_in_run("KEYS[2]", "KEYS[1]")
    + "return 1\n"
)

# Extend the lease only if we still hold it.
#   KEYS[1]  the lease          (store_keys.lease)
#   ARGV[1]  our token
#   ARGV[2]  the new TTL in milliseconds
# Returns 1 if extended, 0 if the lease is gone or held by another token.
RENEW_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# Delete the lease only if we still hold it (never someone else's).
#   KEYS[1]  the lease          (store_keys.lease)
#   ARGV[1]  our token
# Returns 1 if deleted, 0 otherwise.
RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# Mark the effect done and drop our lease in one step, so no reader sees "no lease, not done" in between.
#   KEYS[1]  the done marker    (store_keys.done)
#   KEYS[2]  the lease          (store_keys.lease)
#   KEYS[3]  the key set of the run the marker belongs to (store_keys.index_of): the marker is named
#            there, if the run keeps one
#   ARGV[1]  our token
#   ARGV[2]  the marker's TTL in seconds
#   ARGV[3]  the marker's value (the writer's wall-clock time, for humans)
# Returns 1 if the lease was still ours (and is now deleted), 0 if it had been lost.
FINISH_LUA = (
    name_in_run("KEYS[3]", "KEYS[1]")
    + """
redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[2])
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
"""
)

DAY_SECONDS = 86400
DONE_TTL_DAYS = 7.0
# A renewal that gets no answer this long is a failed one (tried again on the next beat until the TTL
# has passed): a connection a NAT or a firewall dropped in silence must not hold the heartbeat for the
# default client's retries (5 s a try, four tries with backoff), most of a lease's TTL.
RENEW_TIMEOUT = 3.0


@contextmanager
def _errors(what: str, key: str) -> Iterator[None]:
    try:
        yield
    except RedisError as exc:
        raise StoreError(f"cannot {what} {key!r}: {exc}") from exc


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _done_seconds(ttl_days: float) -> int:
    return max(1, int(ttl_days * DAY_SECONDS))


class Claim(ABC):
    """An exclusive, expiring claim on the effect named ``key``, held by a random token.

    ``lost`` is set when a renewal finds the lease gone or taken: the holder should stop, since another
    may now hold it. Subclasses say where the lease lives; the heartbeat is the same for all.
    """

    def __init__(self, key: str, *, ttl: float, token: str | None) -> None:
        if ttl <= 0:
            raise ValueError(f"lease ttl must be positive, got {ttl}")
        self.key = key
        self.ttl = ttl
        self.token = token or uuid.uuid4().hex
        self.lost = threading.Event()

    @abstractmethod
    def _take(self) -> bool:
        """Set the lease to our token for ``ttl`` if nobody holds it."""

    @abstractmethod
    def renew(self) -> bool:
        """Extend the lease by ``ttl`` if it is still ours."""

    @abstractmethod
    def _drop(self) -> bool:
        """Delete the lease if it is still ours."""

    @abstractmethod
    def held(self) -> bool:
        """Whether the lease currently holds our token (a read, for checks and tests)."""

    @abstractmethod
    def finish(self, done_ttl_days: float = DONE_TTL_DAYS) -> bool:
        """Mark the effect done and drop our lease in one step; True if the lease was still ours."""

    def acquire(self) -> bool:
        """Take the lease if nobody holds it; True if we now hold it (not re-entrant)."""
        taken = self._take()
        if taken:
            self.lost.clear()
        log.debug("lease.acquire", key=self.key, acquired=taken)
        return taken

    def release(self) -> bool:
        """Delete the lease if it is still ours; True if it was."""
        released = self._drop()
        log.debug("lease.release", key=self.key, released=released)
        return released

    @contextmanager
    def heartbeat(self, interval: float | None = None) -> Iterator[Claim]:
        """Renew every ``interval`` (default ``ttl / 3``) in a daemon thread; release on exit.

        The lease must already be held. A renewal that finds it gone sets ``lost`` and ends the heartbeat;
        store errors are retried until ``ttl`` has passed since the last good renewal, then count as lost.
        The thread shares nothing with the task but the GIL (a task blocked, or spinning in Python, in a
        threads pool or a prefork child, leaves it renewing: tests/integration/test_fleet_duties.py); only
        C code holding the GIL for longer than ``ttl`` could starve it.
        """
        every = interval if interval is not None else self.ttl / 3
        if every <= 0:
            raise ValueError(f"heartbeat interval must be positive, got {every}")
        stop = threading.Event()

        def beat() -> None:
            last_ok = time.monotonic()
            while not stop.wait(every):
                try:
                    if self.renew():
                        last_ok = time.monotonic()
                        continue
                    log.warning("lease.lost", key=self.key, reason="taken or expired")
                except StoreError as exc:
                    if time.monotonic() - last_ok < self.ttl:
                        log.warning("lease.renew_failed", key=self.key, error=str(exc))
                        continue
                    log.warning("lease.lost", key=self.key, reason="renewals failed", error=str(exc))
                self.lost.set()
                return

        thread = threading.Thread(target=beat, name=f"lease-heartbeat:{self.key}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
            try:
                self.release()
            except StoreError as exc:
                # It expires on its own after ttl; nothing else to undo.
                log.warning("lease.release_failed", key=self.key, error=str(exc))


class Leases(Protocol):
    """Where leases and done markers live: one per deployment, shared by every task of it."""

    def lease(self, key: str, *, ttl: float = 60.0, token: str | None = None) -> Claim:
        """A claim on ``key`` (not yet acquired)."""
        ...

    def is_done(self, key: str) -> bool:
        """Whether the effect named ``key`` is marked done."""
        ...

    def mark_done(self, key: str, ttl_days: float = DONE_TTL_DAYS) -> None:
        """Record that the effect named ``key`` happened (the marker expires after ``ttl_days``)."""
        ...

    def expired_without_done(self, keys: Iterable[str]) -> list[str]:
        """The keys with neither a live lease nor a done marker, in order: work a reaper may hand out
        again. Not atomic across keys: whoever redoes the work goes through ``once`` (or ``run_task``),
        which checks again under the lease."""
        ...


# -- in Redis ------------------------------------------------------------------------------------------------


def renewal_client(client: redis.Redis, timeout: float = RENEW_TIMEOUT) -> redis.Redis:
    """A client to the same server as ``client`` with a pool of its own and socket timeouts: what the
    heartbeats renew through, so no connection a task holds, and no silently dropped one, can stall them."""
    pool = client.connection_pool
    kwargs = dict(pool.connection_kwargs)
    # No retries of its own: the heartbeat retries on its next beat, and counts the TTL down meanwhile.
    kwargs.update(socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0))
    own = redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
    return redis.Redis(connection_pool=own)


class Lease(Claim):
    """A claim in Redis: Lua to take it (``SET NX PX``), to renew, release and finish only our own token.
    Its key and its done marker are named in the key set of the run that ``key`` belongs to
    (``<slug>:<action>``), if the run keeps one, so the run's expiry finds them without a SCAN.

    Renewals go through ``renewer`` (default: ``client``), a client of their own in a fleet
    (``RedisLeases``: ``renewal_client``)."""

    def __init__(
        self,
        client: redis.Redis,
        key: str,
        *,
        ttl: float = 60.0,
        prefix: str = store_keys.PREFIX,
        token: str | None = None,
        renewer: redis.Redis | None = None,
    ) -> None:
        super().__init__(key, ttl=ttl, token=token)
        self.client = client
        self.prefix = prefix
        self.name = store_keys.lease(prefix, key)
        self._renew = (renewer or client).register_script(RENEW_LUA)
        self._release = client.register_script(RELEASE_LUA)
        self._finish = client.register_script(FINISH_LUA)
        self._take_script = client.register_script(TAKE_LUA)

    def _take(self) -> bool:
        with _errors("acquire lease", self.key):
            taken = self._take_script(
                keys=[self.name, store_keys.index_of(self.prefix, self.key)], args=[self.token, _ms(self.ttl)]
            )
        return int(cast(int, taken)) == 1

    def renew(self) -> bool:
        """Extend the lease by ``ttl`` if it is still ours (RENEW_LUA)."""
        with _errors("renew lease", self.key):
            return int(cast(int, self._renew(keys=[self.name], args=[self.token, _ms(self.ttl)]))) == 1

    def _drop(self) -> bool:
        with _errors("release lease", self.key):
            return int(cast(int, self._release(keys=[self.name], args=[self.token]))) == 1

    def held(self) -> bool:
        """Whether the lease key holds our token."""
        with _errors("read lease", self.key):
            value = self.client.get(self.name)
        if isinstance(value, bytes):
            value = value.decode()
        return value == self.token

    def finish(self, done_ttl_days: float = DONE_TTL_DAYS) -> bool:
        """FINISH_LUA: the done marker and the end of our lease, atomically."""
        with _errors("finish", self.key):
            kept = self._finish(
                keys=[
                    store_keys.done(self.prefix, self.key),
                    self.name,
                    store_keys.index_of(self.prefix, self.key),
                ],
                args=[self.token, _done_seconds(done_ttl_days), f"{time.time():.3f}"],
            )
        return int(cast(int, kept)) == 1


class RedisLeases:
    """``Leases`` in Redis under ``prefix``: ``lease:<key>`` and ``done:<key>`` (``store.keys``). Its
    leases renew through a client of their own (``renewal_client``), made on first use."""

    def __init__(self, client: redis.Redis, prefix: str = store_keys.PREFIX) -> None:
        self.client = client
        self.prefix = prefix
        self._renewer: redis.Redis | None = None
        self._renewer_lock = threading.Lock()
        self._keep_with_run = client.register_script(KEEP_WITH_RUN_LUA)

    @property
    def renewer(self) -> redis.Redis:
        with self._renewer_lock:
            if self._renewer is None:
                self._renewer = renewal_client(self.client)
            return self._renewer

    def lease(self, key: str, *, ttl: float = 60.0, token: str | None = None) -> Lease:
        """A Redis claim on ``key``."""
        return Lease(self.client, key, ttl=ttl, prefix=self.prefix, token=token, renewer=self.renewer)

    def is_done(self, key: str) -> bool:
        """EXISTS on the done marker."""
        with _errors("read done marker", key):
            return bool(self.client.exists(store_keys.done(self.prefix, key)))

    def mark_done(self, key: str, ttl_days: float = DONE_TTL_DAYS) -> None:
        """MULTI: SET the done marker (this host's wall-clock time, for humans) with its TTL, named in its
        run's key set (if the run keeps one)."""
        name = store_keys.done(self.prefix, key)
        run = [store_keys.index_of(self.prefix, key), store_keys.events_of(self.prefix, key)]

        def write(pipe: redis.client.Pipeline) -> None:
            pipe.set(name, f"{time.time():.3f}", ex=_done_seconds(ttl_days))
            call_by_sha(pipe, self._keep_with_run, [*run, name], ["1"])

        with _errors("mark done", key):
            execute_multi(self.client, self._keep_with_run, write)

    def expired_without_done(self, keys: Iterable[str]) -> list[str]:
        """One MGET of every key's lease and done marker (both strings): one command however many keys,
        which the reaper asks of every action in flight of a batch of runs at once."""
        wanted = list(keys)
        if not wanted:
            return []
        names = [
            n
            for key in wanted
            for n in (store_keys.lease(self.prefix, key), store_keys.done(self.prefix, key))
        ]
        with _errors("scan leases", wanted[0]):
            values = cast(list[bytes | None], self.client.mget(names))
        return [key for i, key in enumerate(wanted) if values[2 * i] is None and values[2 * i + 1] is None]


# -- in memory -----------------------------------------------------------------------------------------------


class MemoryLease(Claim):
    """A claim in a ``MemoryLeases``: the same compare-and-set rules as the Lua scripts, under its lock."""

    def __init__(self, home: MemoryLeases, key: str, *, ttl: float, token: str | None) -> None:
        super().__init__(key, ttl=ttl, token=token)
        self.home = home

    def _take(self) -> bool:
        with self.home.lock:
            if self.home.holder(self.key) is not None:
                return False
            self.home.leases[self.key] = (self.token, self.home.clock() + self.ttl)
            return True

    def renew(self) -> bool:
        """Extend the lease by ``ttl`` of the clock if it is still ours."""
        with self.home.lock:
            if self.home.holder(self.key) != self.token:
                return False
            self.home.leases[self.key] = (self.token, self.home.clock() + self.ttl)
            return True

    def _drop(self) -> bool:
        with self.home.lock:
            if self.home.holder(self.key) != self.token:
                return False
            del self.home.leases[self.key]
            return True

    def held(self) -> bool:
        """Whether the live lease is ours."""
        with self.home.lock:
            return self.home.holder(self.key) == self.token

    def finish(self, done_ttl_days: float = DONE_TTL_DAYS) -> bool:
        """The done marker and the end of our lease, in one step under the lock."""
        with self.home.lock:
            self.home.mark_done(self.key, done_ttl_days)
            return self._drop()


class MemoryLeases:
    """``Leases`` in this process's memory, expiring by ``clock`` (epoch seconds). Thread-safe."""

    def __init__(self, clock: Clock = time.time) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.leases: dict[str, tuple[str, float]] = {}  # key -> (token, expiry)
        self.done: dict[str, float] = {}  # key -> expiry

    def holder(self, key: str) -> str | None:
        """The token of the live lease on ``key``, None when nobody holds it (an expired one is dropped)."""
        with self.lock:
            lease = self.leases.get(key)
            if lease is not None and lease[1] <= self.clock():
                del self.leases[key]
                lease = None
            return lease[0] if lease is not None else None

    def lease(self, key: str, *, ttl: float = 60.0, token: str | None = None) -> MemoryLease:
        """A claim on ``key`` in this memory."""
        return MemoryLease(self, key, ttl=ttl, token=token)

    def is_done(self, key: str) -> bool:
        """Whether ``key`` has a done marker that has not expired."""
        with self.lock:
            expiry = self.done.get(key)
            if expiry is not None and expiry <= self.clock():
                del self.done[key]
                expiry = None
            return expiry is not None

    def mark_done(self, key: str, ttl_days: float = DONE_TTL_DAYS) -> None:
        """Set ``key``'s done marker until ``ttl_days`` from now."""
        with self.lock:
            self.done[key] = self.clock() + _done_seconds(ttl_days)

    def expired_without_done(self, keys: Iterable[str]) -> list[str]:
        """The keys with neither a live lease nor a done marker."""
        with self.lock:
            return [key for key in keys if self.holder(key) is None and not self.is_done(key)]


Outcome = Literal["ran", "done", "busy"]


def once(
    leases: Leases,
    key: str,
    fn: Callable[[], T],
    *,
    ttl: float = 60.0,
    done_ttl_days: float = DONE_TTL_DAYS,
) -> tuple[Outcome, T | None]:
    """Run ``fn`` unless its effect is done or another holder is running it.

    Returns ``("done", None)`` if already marked done, ``("busy", None)`` if another holder has the lease,
    else ``("ran", fn())`` after running it under a heartbeat lease and marking it done. If ``fn`` raises,
    nothing is marked and the exception propagates (the lease is released so another delivery may retry).

    The guarantee: while leases stay alive, at most one holder runs ``fn`` at a time and no holder runs it
    after the done marker is written. A holder that dies after ``fn``'s effect but before the marker lets
    the lease expire and a later delivery runs ``fn`` again, so an exactly-once *effect* relies on ``fn``
    being idempotent itself (e.g. events deduplicated by eid). A lease lost mid-run (``lost``) is logged.
    """
    if leases.is_done(key):
        return "done", None
    lease = leases.lease(key, ttl=ttl)
    if not lease.acquire():
        return ("done" if leases.is_done(key) else "busy"), None
    with lease.heartbeat():
        # Re-check under the lease: a holder may have finished between our first check and the acquire.
        if leases.is_done(key):
            return "done", None
        log.info("lease.once_run", key=key)
        result = fn()
        if not lease.finish(done_ttl_days) or lease.lost.is_set():
            log.warning("lease.once_lost", key=key)
    log.info("lease.once_done", key=key)
    return "ran", result
