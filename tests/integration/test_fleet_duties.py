"""A worker's duties beside its tasks, on the real Redis (this session's database of the machine's Redis):
its presence record and ``live_workers``, the reaper's lock (one reaper per period), heartbeats that a
silent connection cannot hang, and the shutdown's grace turning into a hand-back.

The worker processes themselves, SIGKILLed and SIGTERMed mid-review: tests/e2e/test_fleet_ops.py.
"""

from __future__ import annotations

import multiprocessing
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from orchestrator.config import Settings
from orchestrator.errors import StoreError
from orchestrator.store import keys
from orchestrator.store.files import FileStore
from orchestrator.store.redis import from_url
from workers.fleet.presence import Presence, WorkerPresence, live_workers
from workers.fleet.reaper import (
    BEATS_PER_PERIOD,
    PASS_AT_MOST,
    FleetDuties,
    ReaperHeartbeat,
    reaper_holder,
    take_reaper_lock,
)
from workers.runtime import shutdown
from workers.runtime.context import Runtime
from workers.runtime.lease import Lease, RedisLeases, renewal_client

PATIENCE = 30.0  # a deadline only a failing test reaches


def wait_until(check: Callable[[], bool], seconds: float = PATIENCE) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def client(shared_redis: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(shared_redis)
    yield c
    c.close()


def me(worker_id: str, started: float) -> WorkerPresence:
    return WorkerPresence(
        id=worker_id, host="h", pid=1, queues=["control", "review"], started=started, last_seen=started
    )


def test_live_workers_lists_the_fresh_records_and_prunes_the_lapsed(client: redis.Redis) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    a = Presence(client, me("a", 100.0), ttl=600, prefix=prefix)
    b = Presence(client, me("b", 50.0), ttl=600, prefix=prefix)
    assert live_workers(client, prefix) == []
    a.refresh()
    b.refresh()
    assert [w.id for w in live_workers(client, prefix)] == ["b", "a"]  # oldest first
    a.update(state="draining", reaped_at=123.0)
    a.refresh()
    (listed,) = [w for w in live_workers(client, prefix) if w.id == "a"]
    assert listed.state == "draining" and listed.reaped_at == 123.0 and listed.queues == ["control", "review"]
    assert listed.last_seen > 100.0

    client.delete(keys.worker(prefix, "b"))  # b's TTL lapsed: it died
    assert [w.id for w in live_workers(client, prefix)] == ["a"]
    assert client.zrange(keys.workers(prefix), 0, -1) == [b"a"]  # pruned from the index
    client.set(keys.worker(prefix, "c"), b"{not json")
    client.zadd(keys.workers(prefix), {"c": 1.0})
    assert [w.id for w in live_workers(client, prefix)] == ["a"]  # an unreadable record is skipped
    a.remove()
    assert [w.id for w in live_workers(client, prefix)] == []
    assert client.pttl(keys.worker(prefix, "c")) == -1
    client.delete(keys.worker(prefix, "c"), keys.workers(prefix))


def test_one_reaper_per_period(client: redis.Redis) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    assert reaper_holder(client, prefix) is None
    assert take_reaper_lock(client, "a", 600, prefix)
    assert not take_reaper_lock(client, "b", 600, prefix)
    assert reaper_holder(client, prefix) == "a"
    assert 0 < client.pttl(keys.reaper(prefix)) <= 600_000
    client.pexpire(keys.reaper(prefix), 1)  # the period is over
    assert wait_until(lambda: take_reaper_lock(client, "b", 600, prefix))
    assert reaper_holder(client, prefix) == "b"
    client.delete(keys.reaper(prefix))


def test_fleet_duties_reap_in_turn_and_keep_presence(shared_redis: str, tmp_path: Path) -> None:
    """Two workers' duties on one Redis: within a period exactly one of them reaps; both are listed."""
    prefix = f"t{uuid.uuid4().hex[:8]}"
    store = from_url(shared_redis, prefix=prefix)
    settings = Settings(dir=tmp_path, reap_every=600.0)  # one period lasts the whole test
    rt = Runtime(settings=settings, store=store, files=FileStore(tmp_path), send=lambda *a: None, kick=print)
    reaped: list[str] = []
    duties = [
        FleetDuties(
            rt,
            Presence(store.client, me(name, time.time()), ttl=600, prefix=prefix),
            reap=lambda rt, holding, name=name: reaped.append(name),  # type: ignore[misc]
            presence_every=0.05,
        )
        for name in ("a", "b")
    ]
    try:
        for d in duties:
            d.start()  # each tries the lock at once
        assert wait_until(lambda: len(live_workers(store.client, prefix)) == 2)
        assert wait_until(lambda: len(reaped) == 1)
        for d in duties:  # and again, many times: the lock holds for the period
            assert d.reap_turn() is False
        assert len(reaped) == 1 and reaper_holder(store.client, prefix) == reaped[0]
        store.client.delete(keys.reaper(prefix))  # the next period
        loser = next(d for d in duties if d.presence.id != reaped[0])
        assert loser.reap_turn() is True and reaped[1] == loser.presence.id
        # the time of a worker's latest reap is in its record from its next refresh
        assert wait_until(
            lambda: {w.id for w in live_workers(store.client, prefix) if w.reaped_at} == {"a", "b"}
        )
    finally:
        for d in duties:
            d.stop()
    assert live_workers(store.client, prefix) == []  # a clean exit removes the record
    store.client.delete(keys.reaper(prefix))
    store.close()


def reaper_pair(
    shared_redis: str, tmp_path: Path, period: float, reap: Callable[..., object]
) -> tuple[FleetDuties, FleetDuties, Runtime, str]:
    """Two workers' duties on one Redis with a short, test-only reap period: ``a`` reaps with ``reap``,
    ``b`` with one that must never run while ``a``'s pass does."""
    prefix = f"t{uuid.uuid4().hex[:8]}"
    store = from_url(shared_redis, prefix=prefix)
    settings = Settings(dir=tmp_path, reap_every=period)
    rt = Runtime(settings=settings, store=store, files=FileStore(tmp_path), send=lambda *a: None, kick=print)
    a = FleetDuties(rt, Presence(store.client, me("a", time.time()), ttl=600, prefix=prefix), reap=reap)
    b = FleetDuties(rt, Presence(store.client, me("b", time.time()), ttl=600, prefix=prefix), reap=reap)
    return a, b, rt, prefix


def test_two_reapers_never_overlap_when_a_pass_outlasts_the_lock_period(
    shared_redis: str, tmp_path: Path
) -> None:
    """A's pass blocks (on an Event) for many lock periods; its heartbeat extends the lock meanwhile, so B,
    trying after every extension, never takes it while A's pass runs. B reaps once A is done and the lock
    has lapsed."""
    period = 0.3
    in_pass, release = threading.Event(), threading.Event()
    passes: list[str] = []  # who is in a pass now: appended on entry, removed on exit
    overlaps: list[list[str]] = []

    def reap(rt: Runtime, holding: Callable[[], bool]) -> list[str]:
        me_ = threading.current_thread().name
        passes.append(me_)
        if len(passes) > 1:
            overlaps.append(list(passes))
        if me_ == "a-pass":
            in_pass.set()
            release.wait(PATIENCE)
        passes.remove(me_)
        return []

    a, b, rt, prefix = reaper_pair(shared_redis, tmp_path, period, reap)
    started = time.monotonic()
    first = threading.Thread(target=a.reap_turn, name="a-pass")
    first.start()
    try:
        assert in_pass.wait(PATIENCE)
        heartbeat = a.heartbeat
        assert heartbeat is not None
        wanted = 3 * BEATS_PER_PERIOD  # three periods' worth of extensions: the pass outlives the lock thrice
        for beats in range(1, wanted + 1):
            with heartbeat.beat:
                assert heartbeat.beat.wait_for(lambda n=beats: heartbeat.beats >= n, PATIENCE)
            assert b.reap_turn() is False, "a second reaper took the lock during the first's pass"
            assert reaper_holder(rt.client, prefix) == "a"
        assert time.monotonic() - started > 2 * period  # the pass did outlast the lock's period
        assert heartbeat.holding()
    finally:
        release.set()
        first.join(PATIENCE)
    assert not first.is_alive() and overlaps == []
    # A's pass is over: its heartbeat stops, the lock lapses within a period, and B takes its turn.
    assert wait_until(b.reap_turn)
    assert reaper_holder(rt.client, prefix) == "b" and overlaps == []
    rt.client.delete(keys.reaper(prefix))
    rt.store.close()


def test_a_pass_past_its_bound_is_told_to_stop_and_the_lock_then_lapses(
    shared_redis: str, tmp_path: Path
) -> None:
    """A pass that runs ``PASS_AT_MOST`` periods is told to stop (``holding`` turns False) and is no
    longer extended: the lock lapses, so a pass that never checks cannot hold the fleet's reaping."""
    period = 0.2
    told_to_stop = threading.Event()

    def reap(rt: Runtime, holding: Callable[[], bool]) -> list[str]:
        if wait_until(lambda: not holding()):
            told_to_stop.set()
        return []

    a, b, rt, prefix = reaper_pair(shared_redis, tmp_path, period, reap)
    started = time.monotonic()
    assert a.reap_turn() is True
    assert told_to_stop.is_set() and time.monotonic() - started >= PASS_AT_MOST * period
    assert wait_until(lambda: reaper_holder(rt.client, prefix) is None)
    rt.store.close()


def test_a_heartbeat_that_finds_another_holder_says_the_lock_is_lost(client: redis.Redis) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    assert take_reaper_lock(client, "a", 0.3, prefix)
    with ReaperHeartbeat(client, "a", 0.3, prefix) as heartbeat:
        with heartbeat.beat:
            assert heartbeat.beat.wait_for(lambda: heartbeat.beats >= 1, PATIENCE)
        client.set(keys.reaper(prefix), "b", px=60_000)  # the lock lapsed and b took it (a stalled Redis)
        assert wait_until(lambda: not heartbeat.holding())
    assert reaper_holder(client, prefix) == "b"  # a's heartbeat never overwrote b's lock
    client.delete(keys.reaper(prefix))


def test_a_renewal_on_a_silent_connection_fails_in_time_instead_of_hanging() -> None:
    """A server that accepts and never answers (a connection a firewall dropped in silence): the
    heartbeat's renewal gives up after its timeout, once, so the heartbeat can count the TTL down; through
    the task's own client (5 s per try, retried with backoff) a renewal would take most of a TTL."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        task_client = redis.Redis(host="127.0.0.1", port=port)
        lease = Lease(task_client, "k", ttl=30, renewer=renewal_client(task_client, timeout=0.5))
        outcome: list[BaseException | bool] = []

        def renew() -> None:
            try:
                outcome.append(lease.renew())
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=renew, daemon=True)
        thread.start()
        thread.join(4.0)  # 8 timeouts; the default client waits 5 s per try, and tries 4 times
        assert outcome, "the renewal hung on a silent connection"
        assert isinstance(outcome[0], StoreError), outcome
        task_client.close()


CHILD = """
import sys, time
from workers.runtime import shutdown
shutdown.install_child_handler()
print("ready", flush=True)
while not shutdown.handing_back():
    time.sleep(0.01)
print("handing back", flush=True)
"""


def test_the_grace_turns_into_a_hand_back_here_and_in_the_pool_children() -> None:
    """``watch``: the shutdown request marks the worker draining; after the grace, the hand-back flag is
    set in this process (a threads pool) and in each pool child it signals (a prefork pool)."""
    with subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    ) as child:
        _hand_back_to(child)


def _hand_back_to(child: subprocess.Popen[str]) -> None:
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        shutdown.reset()
        drained: list[bool] = []
        try:
            shutdown.watch(0.3, children=lambda: [child.pid], on_draining=lambda: drained.append(True))
            assert not shutdown.requested() and not shutdown.handing_back()
            shutdown.request()  # SIGTERM
            assert wait_until(lambda: drained == [True])
            assert wait_until(shutdown.handing_back)
        finally:
            shutdown.reset()
        assert child.wait(PATIENCE) == 0
        assert child.stdout.read() == "handing back\n"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def spin_under_heartbeat(url: str, key: str, seconds: float) -> int:
    """Hold a lease on ``key`` while this thread spins, CPU-bound, for ``seconds``: how often the heartbeat
    renewed it meanwhile (a task that parses or computes never yields on purpose)."""
    client = redis.Redis.from_url(url)
    leases = RedisLeases(client, prefix=f"t-{key}")
    lease = leases.lease(key, ttl=30)
    renewals = 0
    renew = lease.renew

    def counted() -> bool:
        nonlocal renewals
        renewals += 1
        return renew()

    lease.renew = counted  # type: ignore[method-assign]
    assert lease.acquire()
    with lease.heartbeat(interval=0.05):
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline:
            n += 1  # pure Python: the GIL is handed over every switch interval, nothing more
    client.close()
    return renewals


def _child_spins(url: str, key: str, seconds: float) -> None:
    sys.exit(min(spin_under_heartbeat(url, key, seconds), 100))


@pytest.mark.parametrize("where", ["thread", "forked child"])
def test_a_cpu_bound_task_does_not_starve_its_heartbeat(shared_redis: str, where: str) -> None:
    """The heartbeat is a thread beside the task, in a threads pool's worker process or a prefork pool's
    child alike: a task spinning on the CPU for 1.5 s leaves it renewing (every 0.05 s here)."""
    key = uuid.uuid4().hex[:8]
    if where == "thread":
        renewals = spin_under_heartbeat(shared_redis, key, 1.5)
    else:
        child = multiprocessing.get_context("fork").Process(
            target=_child_spins, args=(shared_redis, key, 1.5)
        )
        child.start()
        child.join(PATIENCE)
        renewals = child.exitcode if child.exitcode is not None else -1
    assert renewals >= 5, f"{renewals} renewals in 1.5 s at one every 0.05 s"
