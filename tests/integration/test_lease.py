"""Leases, heartbeats, done markers and ``once`` against the real Redis on 127.0.0.1:6379 (db 0).

Each test uses a random key prefix and deletes exactly its own keys afterwards.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis
from structlog.testing import capture_logs

from orchestrator.store import keys
from workers.lease import Lease, expired_without_done, is_done, mark_done, once


def _wait_until(predicate, seconds: float = 3.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        threading.Event().wait(0.02)
    return True


def test_acquire_twice_second_refused(client: redis.Redis, prefix: str) -> None:
    first = Lease(client, "task-a", prefix=prefix, ttl=5)
    second = Lease(client, "task-a", prefix=prefix, ttl=5)
    assert first.acquire()
    assert not second.acquire()
    assert not first.acquire()  # not re-entrant either: SET NX
    assert first.held() and not second.held()
    ttl_ms = client.pttl(keys.lease(prefix, "task-a"))
    assert 0 < ttl_ms <= 5000


def test_release_by_non_holder_does_nothing(client: redis.Redis, prefix: str) -> None:
    holder = Lease(client, "task-b", prefix=prefix, ttl=5)
    other = Lease(client, "task-b", prefix=prefix, ttl=5)
    assert holder.acquire()
    assert not other.release()
    assert not other.renew()
    assert client.get(keys.lease(prefix, "task-b")) == holder.token.encode()
    assert holder.release()
    assert client.get(keys.lease(prefix, "task-b")) is None
    assert not holder.release()  # twice: nothing left to release


def test_after_release_another_can_acquire(client: redis.Redis, prefix: str) -> None:
    holder = Lease(client, "task-c", prefix=prefix, ttl=5)
    other = Lease(client, "task-c", prefix=prefix, ttl=5)
    assert holder.acquire()
    assert not other.acquire()
    assert holder.release()
    assert other.acquire()
    assert other.held() and not holder.held()


def test_expiry_frees_the_lease(client: redis.Redis, prefix: str) -> None:
    holder = Lease(client, "task-d", prefix=prefix, ttl=0.2)
    other = Lease(client, "task-d", prefix=prefix, ttl=5)
    assert holder.acquire()
    assert not other.acquire()
    assert _wait_until(lambda: not client.exists(keys.lease(prefix, "task-d")))
    assert not holder.renew()  # too late: renew does not resurrect an expired lease
    assert other.acquire()


def test_renew_extends(client: redis.Redis, prefix: str) -> None:
    lease = Lease(client, "task-e", prefix=prefix, ttl=10)
    assert lease.acquire()
    client.pexpire(keys.lease(prefix, "task-e"), 500)
    assert lease.renew()
    assert client.pttl(keys.lease(prefix, "task-e")) > 5000


def test_heartbeat_keeps_short_lease_alive_then_releases(client: redis.Redis, prefix: str) -> None:
    lease = Lease(client, "task-f", prefix=prefix, ttl=0.3)
    rival = Lease(client, "task-f", prefix=prefix, ttl=5)
    assert lease.acquire()
    with lease.heartbeat():
        assert not lease.lost.wait(1.5)  # five ttls pass; the lease must not be lost
        assert lease.held()
        assert not rival.acquire()
    assert not lease.lost.is_set()
    assert client.exists(keys.lease(prefix, "task-f")) == 0  # released on exit, not left to expire
    assert rival.acquire()


def test_heartbeat_sets_lost_when_lease_is_taken(client: redis.Redis, prefix: str) -> None:
    lease = Lease(client, "task-g", prefix=prefix, ttl=5)
    assert lease.acquire()
    with capture_logs() as logs, lease.heartbeat(interval=0.05):
        client.set(keys.lease(prefix, "task-g"), b"thief")
        assert lease.lost.wait(3)
    assert client.get(keys.lease(prefix, "task-g")) == b"thief"  # exit did not delete the thief's lease
    assert "lease.lost" in [e["event"] for e in logs]


def test_done_markers(client: redis.Redis, prefix: str) -> None:
    assert not is_done(client, "effect-1", prefix)
    mark_done(client, "effect-1", prefix)
    assert is_done(client, "effect-1", prefix)
    assert not is_done(client, "effect-2", prefix)
    ttl = client.ttl(keys.done(prefix, "effect-1"))
    assert 7 * 86400 - 60 < ttl <= 7 * 86400
    mark_done(client, "effect-2", prefix, ttl_days=1)
    assert 86400 - 60 < client.ttl(keys.done(prefix, "effect-2")) <= 86400


def test_expired_without_done(client: redis.Redis, prefix: str) -> None:
    assert Lease(client, "live", prefix=prefix, ttl=10).acquire()
    mark_done(client, "finished", prefix)
    both = Lease(client, "finished-and-leased", prefix=prefix, ttl=10)
    assert both.acquire()
    mark_done(client, "finished-and-leased", prefix)
    assert Lease(client, "expired", prefix=prefix, ttl=0.1).acquire()
    assert _wait_until(lambda: not client.exists(keys.lease(prefix, "expired")))
    wanted = ["live", "finished", "never-started", "expired", "finished-and-leased"]
    assert expired_without_done(client, wanted, prefix) == ["never-started", "expired"]
    assert expired_without_done(client, [], prefix) == []


def test_once_runs_fn_once_from_eight_threads(client: redis.Redis, prefix: str) -> None:
    runs: list[int] = []
    start = threading.Barrier(8)
    outcomes: list[str] = []
    lock = threading.Lock()

    def effect() -> int:
        with lock:
            runs.append(1)
        threading.Event().wait(0.3)  # hold the lease while the others arrive
        return 42

    def worker() -> None:
        start.wait()
        outcome, result = once(client, "review:r1:codex", effect, prefix=prefix, ttl=2)
        assert result == (42 if outcome == "ran" else None)
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(runs) == 1
    assert sorted(outcomes).count("ran") == 1 and len(outcomes) == 8
    assert set(outcomes) <= {"ran", "busy", "done"}
    assert is_done(client, "review:r1:codex", prefix)
    assert not client.exists(keys.lease(prefix, "review:r1:codex"))
    assert once(client, "review:r1:codex", effect, prefix=prefix) == ("done", None)
    assert len(runs) == 1


def test_once_fast_fn_never_runs_twice(client: redis.Redis, prefix: str) -> None:
    """A fn that finishes before the others try: they acquire a free lease and must re-check done."""
    counts = dict.fromkeys(range(10), 0)
    lock = threading.Lock()

    for n in range(10):
        start = threading.Barrier(8)

        def effect(n: int = n) -> None:
            with lock:
                counts[n] += 1

        def worker(effect=effect, start=start, n=n) -> None:  # type: ignore[no-untyped-def]
            start.wait()
            once(client, f"fast:{n}", effect, prefix=prefix, ttl=2)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert counts == dict.fromkeys(range(10), 1)


def test_once_busy_while_another_holds(client: redis.Redis, prefix: str) -> None:
    holder = Lease(client, "busy-task", prefix=prefix, ttl=5)
    assert holder.acquire()
    ran: list[int] = []
    assert once(client, "busy-task", lambda: ran.append(1), prefix=prefix) == ("busy", None)
    assert ran == []


def test_once_failure_marks_nothing_and_frees_the_lease(client: redis.Redis, prefix: str) -> None:
    def boom() -> None:
        raise RuntimeError("agent crashed")

    with pytest.raises(RuntimeError, match="agent crashed"):
        once(client, "flaky", boom, prefix=prefix, ttl=5)
    assert not is_done(client, "flaky", prefix)
    assert not client.exists(keys.lease(prefix, "flaky"))
    assert once(client, "flaky", lambda: "second try", prefix=prefix) == ("ran", "second try")
    assert is_done(client, "flaky", prefix)


def test_once_rechecks_done_under_the_lease(
    client: redis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The done marker written between the first check and the acquire (the holder just finished)."""
    import workers.lease as lease_module

    mark_done(client, "raced", prefix)
    real = lease_module.is_done
    calls: list[bool] = []

    def stale_first(c: redis.Redis, key: str, p: str = keys.PREFIX) -> bool:
        calls.append(True)
        return False if len(calls) == 1 else real(c, key, p)

    monkeypatch.setattr(lease_module, "is_done", stale_first)
    ran: list[int] = []
    assert once(client, "raced", lambda: ran.append(1), prefix=prefix) == ("done", None)
    assert ran == []
    assert not client.exists(keys.lease(prefix, "raced"))
