"""Leases, heartbeats, done markers and ``once``: one contract, run against ``RedisLeases`` (the test Redis,
``JURY_TEST_REDIS_URL``, db 0, under a random key prefix deleted afterwards) and ``MemoryLeases`` (no Redis;
its TTLs run on a ``ManualClock`` that a test moves instead of waiting). Then each one's own details.

No test waits for a TTL to pass in real time, so none depends on how fast the machine is: a Redis lease
is aged or expired on command (``PEXPIRE``) and a memory lease by moving its clock; every lease a test
does not expire on purpose lives far longer than any scheduler stall.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pytest
import redis
from structlog.testing import capture_logs

from orchestrator.store import keys
from orchestrator.store.memory import ManualClock
from workers.runtime.lease import Claim, Leases, MemoryLeases, RedisLeases, once

DAY = 86400


# A deadline for a condition a passing test waits on: reached only by a test that fails.
PATIENCE = 30.0

# A lease a heartbeat keeps alive: so long that no stall between two renewals can lose it.
HEARTBEAT_TTL = 30.0


def _wait_until(predicate: Callable[[], bool], seconds: float = PATIENCE) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        threading.Event().wait(0.02)
    return True


@dataclass
class Backend:
    """A ``Leases`` under test, and what a test does to it that the protocol does not offer."""

    leases: Leases
    client: redis.Redis | None = None
    prefix: str = ""
    clock: ManualClock | None = None

    @property
    def memory(self) -> MemoryLeases:
        assert isinstance(self.leases, MemoryLeases)
        return self.leases

    def holder(self, key: str) -> str | None:
        """The token of whoever holds the lease on ``key`` now."""
        if self.client is not None:
            value = self.client.get(keys.lease(self.prefix, key))
            return value.decode() if isinstance(value, bytes) else value
        return self.memory.holder(key)

    def ttl(self, key: str, kind: str = "lease") -> float:
        """Seconds left on the lease (or the done marker) of ``key``."""
        if self.client is not None:
            name = keys.lease(self.prefix, key) if kind == "lease" else keys.done(self.prefix, key)
            return int(self.client.pttl(name)) / 1000
        assert self.clock is not None
        table = self.memory.leases if kind == "lease" else self.memory.done
        entry = table[key]
        expiry = entry[1] if isinstance(entry, tuple) else entry
        return expiry - self.clock()

    def age(self, key: str, seconds: float, ttl: float) -> None:
        """As if ``seconds`` had passed since the lease of ``ttl`` was taken or renewed."""
        if self.client is not None:
            self.client.pexpire(keys.lease(self.prefix, key), max(1, int((ttl - seconds) * 1000)))
        else:
            assert self.clock is not None
            self.clock.advance(seconds)

    def expire(self, key: str) -> None:
        """Let the lease on ``key`` run out (Redis: its TTL cut to a millisecond, then Redis's own expiry;
        memory: move the clock past it)."""
        if (client := self.client) is not None:
            name = keys.lease(self.prefix, key)
            client.pexpire(name, 1)
            assert _wait_until(lambda: not client.exists(name))
            return
        assert self.clock is not None
        self.clock.advance(max(0.0, self.memory.leases[key][1] - self.clock()) + 0.001)
        assert self.memory.holder(key) is None

    def steal(self, key: str, token: str = "thief") -> None:
        """Another holder takes the lease on ``key`` (a holder frozen past its TTL, then replaced)."""
        if self.client is not None:
            self.client.set(keys.lease(self.prefix, key), token.encode(), keepttl=True)
        else:
            with self.memory.lock:
                self.memory.leases[key] = (token, self.memory.leases[key][1])

    def outlive_a_ttl_renewed(self, key: str, ttl: float) -> None:
        """Let more than one whole ``ttl`` pass while a heartbeat renews the lease on ``key``.

        Twice over: age the lease by two thirds of ``ttl`` (Redis: its TTL cut to the last third;
        memory: the clock moved), then wait (with a deadline) for the heartbeat's renewal to push the
        expiry back past two thirds. Without renewals the lease would be gone by the second ageing.
        """
        for _ in range(2):
            self.age(key, ttl * 2 / 3, ttl=ttl)
            assert _wait_until(lambda: self.ttl(key) > ttl * 2 / 3), "the heartbeat did not renew"


@pytest.fixture(params=["redis", "memory"])
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "redis":
        client: redis.Redis = request.getfixturevalue("client")
        prefix: str = request.getfixturevalue("prefix")
        return Backend(RedisLeases(client, prefix), client=client, prefix=prefix)
    clock = ManualClock()
    return Backend(MemoryLeases(clock), clock=clock)


# -- the contract --------------------------------------------------------------------------------------------


def test_acquire_twice_second_refused(backend: Backend) -> None:
    first = backend.leases.lease("task-a", ttl=5)
    second = backend.leases.lease("task-a", ttl=5)
    assert first.acquire()
    assert not second.acquire()
    assert not first.acquire()  # not re-entrant either
    assert first.held() and not second.held()
    assert backend.holder("task-a") == first.token
    assert 0 < backend.ttl("task-a") <= 5


def test_release_by_non_holder_does_nothing(backend: Backend) -> None:
    holder = backend.leases.lease("task-b", ttl=5)
    other = backend.leases.lease("task-b", ttl=5)
    assert holder.acquire()
    assert not other.release()
    assert not other.renew()
    assert backend.holder("task-b") == holder.token
    assert holder.release()
    assert backend.holder("task-b") is None
    assert not holder.release()  # twice: nothing left to release


def test_after_release_another_can_acquire(backend: Backend) -> None:
    holder = backend.leases.lease("task-c", ttl=5)
    other = backend.leases.lease("task-c", ttl=5)
    assert holder.acquire()
    assert not other.acquire()
    assert holder.release()
    assert other.acquire()
    assert other.held() and not holder.held()


def test_expiry_frees_the_lease(backend: Backend) -> None:
    holder = backend.leases.lease("task-d", ttl=30)
    other = backend.leases.lease("task-d", ttl=5)
    assert holder.acquire()
    assert not other.acquire()
    backend.expire("task-d")
    assert not holder.held()
    assert not holder.renew()  # too late: renew does not resurrect an expired lease
    assert other.acquire()


def test_renew_extends(backend: Backend) -> None:
    lease = backend.leases.lease("task-e", ttl=10)
    assert lease.acquire()
    backend.age("task-e", 9.5, ttl=10)
    assert backend.ttl("task-e") <= 0.5
    assert lease.renew()
    assert backend.ttl("task-e") > 5


def test_a_token_given_is_the_token_held(backend: Backend) -> None:
    lease = backend.leases.lease("task-t", ttl=5, token="mine")
    assert lease.token == "mine" and lease.acquire()
    assert backend.holder("task-t") == "mine"


def test_heartbeat_keeps_a_lease_alive_then_releases(backend: Backend) -> None:
    """Five TTLs and more pass on the store's clock while the heartbeat runs; the lease is never lost."""
    lease = backend.leases.lease("task-f", ttl=HEARTBEAT_TTL)
    rival = backend.leases.lease("task-f", ttl=5)
    assert lease.acquire()
    with lease.heartbeat(interval=0.02):
        for _ in range(5):
            backend.outlive_a_ttl_renewed("task-f", HEARTBEAT_TTL)
            assert not lease.lost.is_set() and lease.held()
            assert not rival.acquire()
    assert not lease.lost.is_set()
    assert not lease.held()  # released on exit, not left to expire
    assert rival.acquire()


def test_heartbeat_sets_lost_when_lease_is_taken(backend: Backend) -> None:
    lease = backend.leases.lease("task-g", ttl=5)
    assert lease.acquire()
    with capture_logs() as logs, lease.heartbeat(interval=0.05):
        backend.steal("task-g")
        assert lease.lost.wait(PATIENCE)
    assert backend.holder("task-g") == "thief"  # exit did not delete the thief's lease
    assert "lease.lost" in [e["event"] for e in logs]


def test_finish_marks_done_and_ends_only_our_own_lease(backend: Backend) -> None:
    ours = backend.leases.lease("task-h", ttl=5)
    assert ours.acquire()
    assert ours.finish()
    assert backend.leases.is_done("task-h") and backend.holder("task-h") is None

    lost = backend.leases.lease("task-i", ttl=5)
    assert lost.acquire()
    backend.steal("task-i")
    assert not lost.finish()  # the effect happened: marked done all the same
    assert backend.leases.is_done("task-i") and backend.holder("task-i") == "thief"


def test_done_markers(backend: Backend) -> None:
    leases = backend.leases
    assert not leases.is_done("effect-1")
    leases.mark_done("effect-1")
    assert leases.is_done("effect-1")
    assert not leases.is_done("effect-2")
    assert 7 * DAY - 60 < backend.ttl("effect-1", "done") <= 7 * DAY
    leases.mark_done("effect-2", ttl_days=1)
    assert DAY - 60 < backend.ttl("effect-2", "done") <= DAY


def test_expired_without_done(backend: Backend) -> None:
    leases = backend.leases
    assert leases.lease("live", ttl=DAY).acquire()  # outlives the expiry of "expired", on any clock
    leases.mark_done("finished")
    both = leases.lease("finished-and-leased", ttl=10)
    assert both.acquire()
    leases.mark_done("finished-and-leased")
    assert leases.lease("expired", ttl=30).acquire()
    backend.expire("expired")
    wanted = ["live", "finished", "never-started", "expired", "finished-and-leased"]
    assert leases.expired_without_done(wanted) == ["never-started", "expired"]
    assert leases.expired_without_done([]) == []


def test_once_runs_fn_once_from_eight_threads(backend: Backend) -> None:
    runs: list[int] = []
    start = threading.Barrier(8)
    outcomes: list[str] = []
    lock = threading.Lock()

    def effect() -> int:
        with lock:
            runs.append(1)
        # Hold the lease until the seven others have come and gone (each one busy, since nothing is done).
        assert _wait_until(lambda: len(outcomes) == 7), "the other threads did not all return"
        return 42

    def worker() -> None:
        start.wait()
        outcome, result = once(backend.leases, "review:r1:codex", effect, ttl=HEARTBEAT_TTL)
        assert result == (42 if outcome == "ran" else None)
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(runs) == 1
    assert sorted(outcomes) == ["busy"] * 7 + ["ran"]
    assert backend.leases.is_done("review:r1:codex")
    assert backend.holder("review:r1:codex") is None
    assert once(backend.leases, "review:r1:codex", effect) == ("done", None)
    assert len(runs) == 1


def test_once_fast_fn_never_runs_twice(backend: Backend) -> None:
    """A fn that finishes before the others try: they acquire a free lease and must re-check done."""
    counts = dict.fromkeys(range(10), 0)
    lock = threading.Lock()

    for n in range(10):
        start = threading.Barrier(8)

        def effect(n: int = n) -> None:
            with lock:
                counts[n] += 1

        def worker(effect: Callable[[], None] = effect, start: threading.Barrier = start, n: int = n) -> None:
            start.wait()
            once(backend.leases, f"fast:{n}", effect, ttl=HEARTBEAT_TTL)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert counts == dict.fromkeys(range(10), 1)


def test_once_busy_while_another_holds(backend: Backend) -> None:
    holder = backend.leases.lease("busy-task", ttl=5)
    assert holder.acquire()
    ran: list[int] = []
    assert once(backend.leases, "busy-task", lambda: ran.append(1)) == ("busy", None)
    assert ran == []


def test_once_failure_marks_nothing_and_frees_the_lease(backend: Backend) -> None:
    def boom() -> None:
        raise RuntimeError("agent crashed")

    with pytest.raises(RuntimeError, match="agent crashed"):
        once(backend.leases, "flaky", boom, ttl=5)
    assert not backend.leases.is_done("flaky")
    assert backend.holder("flaky") is None
    assert once(backend.leases, "flaky", lambda: "second try") == ("ran", "second try")
    assert backend.leases.is_done("flaky")


class StaleFirstRead:
    """``Leases`` whose first done check misses a marker written a moment before (the holder had just
    finished): ``once`` must see it when it checks again under the lease."""

    def __init__(self, inner: Leases) -> None:
        self.inner, self.reads = inner, 0

    def lease(self, key: str, *, ttl: float = 60.0, token: str | None = None) -> Claim:
        return self.inner.lease(key, ttl=ttl, token=token)

    def is_done(self, key: str) -> bool:
        self.reads += 1
        return False if self.reads == 1 else self.inner.is_done(key)

    def mark_done(self, key: str, ttl_days: float = 7) -> None:
        self.inner.mark_done(key, ttl_days)

    def expired_without_done(self, keys: Iterable[str]) -> list[str]:
        return self.inner.expired_without_done(keys)


def test_once_rechecks_done_under_the_lease(backend: Backend) -> None:
    backend.leases.mark_done("raced")
    stale = StaleFirstRead(backend.leases)
    ran: list[int] = []
    assert once(stale, "raced", lambda: ran.append(1)) == ("done", None)
    assert ran == [] and stale.reads == 2
    assert backend.holder("raced") is None


# -- Redis only ----------------------------------------------------------------------------------------------


def test_redis_keys_come_from_the_keys_module(client: redis.Redis, prefix: str) -> None:
    leases = RedisLeases(client, prefix)
    lease = leases.lease("k", ttl=5)
    assert lease.acquire()
    assert client.get(keys.lease(prefix, "k")) == lease.token.encode()
    assert 0 < client.pttl(keys.lease(prefix, "k")) <= 5000
    assert lease.finish(done_ttl_days=1)
    assert client.exists(keys.lease(prefix, "k")) == 0
    assert 0 < client.ttl(keys.done(prefix, "k")) <= DAY


# -- memory only ---------------------------------------------------------------------------------------------


def test_memory_lease_lives_exactly_its_ttl_of_the_clock() -> None:
    clock = ManualClock()
    leases = MemoryLeases(clock)
    lease = leases.lease("k", ttl=60)
    assert lease.acquire()
    clock.advance(59.9)
    assert lease.held()
    clock.advance(0.1)
    assert not lease.held() and leases.holder("k") is None
    assert leases.lease("k", ttl=60).acquire()


def test_memory_done_marker_expires_after_its_days() -> None:
    clock = ManualClock()
    leases = MemoryLeases(clock)
    leases.mark_done("k", ttl_days=7)
    clock.advance(7 * DAY - 1)
    assert leases.is_done("k")
    clock.advance(1)
    assert not leases.is_done("k")
    assert leases.expired_without_done(["k"]) == ["k"]


def test_a_lease_ttl_must_be_positive() -> None:
    with pytest.raises(ValueError, match="ttl must be positive"):
        MemoryLeases().lease("k", ttl=0)
