"""Leases with heartbeats and done markers: how a task delivered twice makes its effect happen once.

Redis delivers a Celery task at least once (a visibility timeout, a lost worker). A task guards its effect
with a ``Lease`` (one holder at a time, kept alive by a heartbeat thread) and a done marker written after
the effect; ``once`` puts the two together. Every key comes from ``orchestrator.store.keys``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Literal, TypeVar, cast

import redis
import structlog
from redis.exceptions import RedisError

from orchestrator.errors import StoreError
from orchestrator.store import keys as store_keys

log = structlog.get_logger()

T = TypeVar("T")

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
#   ARGV[1]  our token
#   ARGV[2]  the marker's TTL in seconds
#   ARGV[3]  the marker's value (the writer's wall-clock time, for humans)
# Returns 1 if the lease was still ours (and is now deleted), 0 if it had been lost.
FINISH_LUA = """
redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[2])
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
"""

DAY_SECONDS = 86400


@contextmanager
def _errors(what: str, key: str) -> Iterator[None]:
    try:
        yield
    except RedisError as exc:
        raise StoreError(f"cannot {what} {key!r}: {exc}") from exc


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


class Lease:
    """An exclusive, expiring claim on the effect named ``key``, held by a random token.

    ``lost`` is set when a renewal finds the lease gone or taken: the holder should stop, since another
    may now hold it.
    """

    def __init__(
        self,
        client: redis.Redis,
        key: str,
        *,
        ttl: float = 60.0,
        prefix: str = store_keys.PREFIX,
        token: str | None = None,
    ) -> None:
        if ttl <= 0:
            raise ValueError(f"lease ttl must be positive, got {ttl}")
        self.client = client
        self.key = key
        self.name = store_keys.lease(prefix, key)
        self.ttl = ttl
        self.token = token or uuid.uuid4().hex
        self.lost = threading.Event()
        self._renew = client.register_script(RENEW_LUA)
        self._release = client.register_script(RELEASE_LUA)

    def acquire(self) -> bool:
        """Take the lease if nobody holds it (SET NX PX); True if we now hold it."""
        with _errors("acquire lease", self.key):
            taken = bool(self.client.set(self.name, self.token, nx=True, px=_ms(self.ttl)))
        if taken:
            self.lost.clear()
        log.debug("lease.acquire", key=self.key, acquired=taken)
        return taken

    def renew(self) -> bool:
        """Extend the lease by ``ttl`` if it is still ours."""
        with _errors("renew lease", self.key):
            return int(cast(int, self._renew(keys=[self.name], args=[self.token, _ms(self.ttl)]))) == 1

    def release(self) -> bool:
        """Delete the lease if it is still ours; True if it was."""
        with _errors("release lease", self.key):
            released = int(cast(int, self._release(keys=[self.name], args=[self.token]))) == 1
        log.debug("lease.release", key=self.key, released=released)
        return released

    def held(self) -> bool:
        """Whether the lease currently holds our token (a read, for checks and tests)."""
        with _errors("read lease", self.key):
            value = self.client.get(self.name)
        if isinstance(value, bytes):
            value = value.decode()
        return value == self.token

    @contextmanager
    def heartbeat(self, interval: float | None = None) -> Iterator[Lease]:
        """Renew every ``interval`` (default ``ttl / 3``) in a daemon thread; release on exit.

        The lease must already be held. A renewal that finds it gone sets ``lost`` and ends the heartbeat;
        Redis errors are retried until ``ttl`` has passed since the last good renewal, then count as lost.
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


def mark_done(client: redis.Redis, key: str, prefix: str = store_keys.PREFIX, ttl_days: float = 7) -> None:
    """Record that the effect named ``key`` happened (the marker expires after ``ttl_days``)."""
    with _errors("mark done", key):
        client.set(store_keys.done(prefix, key), f"{time.time():.3f}", ex=max(1, int(ttl_days * DAY_SECONDS)))


def is_done(client: redis.Redis, key: str, prefix: str = store_keys.PREFIX) -> bool:
    """Whether the effect named ``key`` is marked done."""
    with _errors("read done marker", key):
        return bool(client.exists(store_keys.done(prefix, key)))


def expired_without_done(
    client: redis.Redis, keys: Iterable[str], prefix: str = store_keys.PREFIX
) -> list[str]:
    """The keys with neither a live lease nor a done marker: work a reaper may hand out again.

    One pipelined read, not a transaction: a key may change right after. That is safe because whoever
    redoes the work goes through ``once``, which re-checks under the lease.
    """
    wanted = list(keys)
    if not wanted:
        return []
    with _errors("scan leases", wanted[0]):
        pipe = client.pipeline(transaction=False)
        for key in wanted:
            pipe.exists(store_keys.lease(prefix, key), store_keys.done(prefix, key))
        counts = cast(list[int], pipe.execute())
    return [key for key, count in zip(wanted, counts, strict=True) if int(count) == 0]


Outcome = Literal["ran", "done", "busy"]


def once(
    client: redis.Redis,
    key: str,
    fn: Callable[[], T],
    *,
    prefix: str = store_keys.PREFIX,
    ttl: float = 60.0,
    done_ttl_days: float = 7,
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
    if is_done(client, key, prefix):
        return "done", None
    lease = Lease(client, key, ttl=ttl, prefix=prefix)
    if not lease.acquire():
        return ("done" if is_done(client, key, prefix) else "busy"), None
    with lease.heartbeat():
        # Re-check under the lease: a holder may have finished between our first check and the acquire.
        if is_done(client, key, prefix):
            return "done", None
        log.info("lease.once_run", key=key)
        result = fn()
        finish = client.register_script(FINISH_LUA)
        ttl_s = max(1, int(done_ttl_days * DAY_SECONDS))
        with _errors("finish", key):
            kept = int(
                cast(
                    int,
                    finish(
                        keys=[store_keys.done(prefix, key), store_keys.lease(prefix, key)],
                        args=[lease.token, ttl_s, f"{time.time():.3f}"],
                    ),
                )
            )
        if not kept or lease.lost.is_set():
            log.warning("lease.once_lost", key=key)
    log.info("lease.once_done", key=key)
    return "ran", result
