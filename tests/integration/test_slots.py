"""The ``[limits]`` semaphores: one contract, run against ``RedisSlots`` (the machine's Redis, under a random
key prefix deleted afterwards) and ``MemorySlots`` (its TTLs on a ``ManualClock``). Then a slot held by a
real process with its heartbeat: kept past its TTL while the holder lives, free once it is SIGKILLed.

No contract test waits for a TTL in real time: a Redis holder is aged by rewriting its expiry (the
sorted set's score, on the server's clock) and a memory one by moving the clock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import redis

from orchestrator.store import keys
from orchestrator.store.memory import ManualClock
from tests.redis_server import redis_url
from workers.isolation.limits import MemorySlots, RedisSlots, Slot, Slots

TTL = 600.0
REPO = Slot("repo:/src/app", 2, "[limits] per_repo = 2 (/src/app)")
MODEL = Slot("model:anthropic/*", 1, '[limits] per_model "anthropic/*" = 1 (claude)')


@dataclass
class Backend:
    slots: Slots
    age: Callable[[Slot, str, float], None]  # as if ``seconds`` had passed since the holder's last renewal
    age_waiter: Callable[[Slot, str, float], None]  # as if the waiter had first waited ``seconds`` earlier


@pytest.fixture(params=["redis", "memory"])
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "redis":
        client: redis.Redis = request.getfixturevalue("client")
        prefix: str = request.getfixturevalue("prefix")

        def age_redis(slot: Slot, holder: str, seconds: float) -> None:
            key = keys.slots(prefix, slot.name)
            score = client.zscore(key, holder)
            assert score is not None
            client.zadd(key, {holder: score - seconds * 1000})

        def age_redis_waiter(slot: Slot, waiter: str, seconds: float) -> None:
            key = keys.waiters(prefix, slot.name)
            score = client.zscore(key, waiter)
            assert score is not None
            client.zadd(key, {waiter: score - seconds * 1000})

        return Backend(RedisSlots(client, prefix), age_redis, age_redis_waiter)
    clock = ManualClock()
    memory = MemorySlots(clock)

    def age_memory(slot: Slot, holder: str, seconds: float) -> None:
        memory.sems[slot.name][holder] -= seconds

    def age_memory_waiter(slot: Slot, waiter: str, seconds: float) -> None:
        memory.lines[slot.name][waiter] -= seconds

    return Backend(memory, age_memory, age_memory_waiter)


def test_a_semaphore_holds_as_many_as_its_limit(backend: Backend) -> None:
    s = backend.slots
    assert s.take([REPO], "a", TTL) is None
    assert s.take([REPO], "b", TTL) is None
    assert s.take([REPO], "c", TTL) == REPO  # full: the first full one is named
    assert sorted(s.holders(REPO.name)) == ["a", "b"]
    assert s.take([REPO], "a", TTL) is None  # a holder taking again keeps its one slot
    assert sorted(s.holders(REPO.name)) == ["a", "b"]
    s.release([REPO], "a")
    assert s.take([REPO], "c", TTL) is None
    assert sorted(s.holders(REPO.name)) == ["b", "c"]
    s.release([REPO], "nobody")  # releasing what one does not hold changes nothing
    assert sorted(s.holders(REPO.name)) == ["b", "c"]


def test_all_or_none(backend: Backend) -> None:
    s = backend.slots
    assert s.take([MODEL], "claude-elsewhere", TTL) is None
    assert s.take([REPO, MODEL], "t", TTL) == MODEL
    assert s.holders(REPO.name) == []  # the repository's slot was not taken either
    s.release([MODEL], "claude-elsewhere")
    assert s.take([REPO, MODEL], "t", TTL) is None
    assert s.holders(REPO.name) == ["t"] and s.holders(MODEL.name) == ["t"]
    s.release([REPO, MODEL], "t")
    assert s.holders(REPO.name) == [] and s.holders(MODEL.name) == []


def test_a_holder_that_stops_renewing_loses_its_slot_at_its_ttl(backend: Backend) -> None:
    """Released on crash: nobody releases a dead holder's slot; it expires, and the next taker gets it."""
    s = backend.slots
    assert s.take([MODEL], "dead", TTL) is None
    assert s.take([MODEL], "next", TTL) == MODEL
    backend.age(MODEL, "dead", TTL - 5)
    assert s.take([MODEL], "next", TTL) == MODEL  # not yet
    backend.age(MODEL, "dead", 10)
    assert s.take([MODEL], "next", TTL) is None
    assert s.holders(MODEL.name) == ["next"]
    assert s.renew([MODEL], "dead", TTL) == 0  # the dead one, woken, holds nothing


def test_renewal_keeps_a_live_holder(backend: Backend) -> None:
    s = backend.slots
    assert s.take([REPO, MODEL], "live", TTL) is None
    backend.age(MODEL, "live", TTL - 5)
    assert s.renew([REPO, MODEL], "live", TTL) == 2
    backend.age(MODEL, "live", 10)  # past the first TTL, within the renewed one
    assert s.take([MODEL], "other", TTL) == MODEL
    assert s.holders(MODEL.name) == ["live"]


def test_no_slots_asked_takes_nothing(backend: Backend) -> None:
    assert backend.slots.take([], "x", TTL) is None
    assert backend.slots.renew([], "x", TTL) == 0
    assert backend.slots.release([], "x") == []


def test_a_full_semaphore_keeps_its_waiters_in_line_and_a_freed_slot_wakes_the_oldest(
    backend: Backend,
) -> None:
    s = backend.slots
    assert s.take([REPO], "a", TTL) is None
    assert s.take([REPO], "b", TTL) is None
    assert s.take([REPO], "c", TTL, waiter="w-z") == REPO
    assert s.take([REPO], "d", TTL, waiter="w-a") == REPO
    backend.age_waiter(REPO, "w-z", 10)  # it waited first: its name sorts last, its time first
    assert s.take([REPO], "c", TTL, waiter="w-z") == REPO  # waiting again keeps its place
    assert s.waiters(REPO.name) == ["w-z", "w-a"]
    assert s.take([REPO], "e", TTL) == REPO  # a take that names no waiter joins no line
    assert s.waiters(REPO.name) == ["w-z", "w-a"]

    assert s.release([REPO], "nobody") == []  # nothing freed: nobody is woken
    assert s.release([REPO], "a") == ["w-z"]  # one slot freed: the oldest waiter, once
    assert s.waiters(REPO.name) == ["w-a"]
    assert s.take([REPO], "c", TTL, waiter="w-z") is None  # the woken task takes the freed slot
    assert s.holders(REPO.name) == ["b", "c"]
    assert s.release([REPO], "a") == []  # released twice: freed once


def test_a_take_that_succeeds_leaves_every_line_it_was_in(backend: Backend) -> None:
    """A waiter whose countdown copy took the slot (its wake lost, or a slot freed by expiry) is not woken
    for nothing by the next release; and a release of two semaphores wakes a waiter of both once."""
    s = backend.slots
    assert s.take([REPO, MODEL], "h", TTL) is None
    assert s.take([REPO], "h2", TTL) is None
    assert s.take([REPO], "t", TTL, waiter="w") == REPO
    assert s.take([MODEL], "t", TTL, waiter="w") == MODEL
    assert s.release([REPO, MODEL], "h") == ["w"]  # in both lines, woken once
    assert s.waiters(REPO.name) == [] and s.waiters(MODEL.name) == []

    assert s.take([MODEL], "t", TTL) is None
    assert s.take([REPO, MODEL], "u", TTL, waiter="v") == MODEL
    backend.age(MODEL, "t", TTL + 1)  # its holder died: the slot frees by expiry, waking nobody
    assert s.take([REPO, MODEL], "u", TTL, waiter="v") is None
    assert s.waiters(MODEL.name) == []
    assert s.release([REPO, MODEL], "u") == []


def test_the_redis_waiters_expire_as_a_whole(client: redis.Redis, prefix: str) -> None:
    """Waiters whose tasks went away (their run cancelled while they waited) do not stay in Redis."""
    s = RedisSlots(client, prefix)
    assert s.take([MODEL], "a", TTL) is None
    assert s.take([MODEL], "b", 30.0, waiter="w") == MODEL
    ttl = client.pttl(keys.waiters(prefix, MODEL.name))
    assert 0 < ttl <= 30_000


def test_the_redis_semaphore_expires_as_a_whole(client: redis.Redis, prefix: str) -> None:
    """An abandoned semaphore does not stay in Redis: its key lives as long as its longest holder."""
    s = RedisSlots(client, prefix)
    assert s.take([REPO], "a", 30.0) is None
    ttl = client.pttl(keys.slots(prefix, REPO.name))
    assert 0 < ttl <= 30_000


# --- a real holder, SIGKILLed ------------------------------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys, time
    import redis
    from workers.isolation.limits import Admission, RedisSlots, Slot

    url, prefix, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
    slots = RedisSlots(redis.Redis.from_url(url), prefix)
    slot = Slot("repo:/src/app", 1, "x")
    assert slots.take([slot], "holder", ttl) is None
    Admission(slots, [slot], "holder", ttl).start()
    print("held", flush=True)
    time.sleep(600)
    """
)


def test_a_slot_is_renewed_while_its_holder_lives_and_frees_when_it_is_killed(
    client: redis.Redis, prefix: str
) -> None:
    ttl = 4.0  # renewed every ttl / 3: only a stall of the whole machine over 2.6 s could lose it
    slot = Slot("repo:/src/app", 1, "x")
    slots = RedisSlots(client, prefix)
    key = keys.slots(prefix, slot.name)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    url = redis_url(0)
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, prefix, str(ttl)], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        first = client.zscore(key, "holder")
        assert first is not None
        deadline = time.monotonic() + 30
        while (client.zscore(key, "holder") or 0) <= first:  # the heartbeat renews it
            assert time.monotonic() < deadline, "the heartbeat never renewed the slot"
            time.sleep(0.05)
        assert slots.take([slot], "other", ttl) == slot  # held while its holder lives
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        deadline = time.monotonic() + 30
        while slots.take([slot], "other", ttl) is not None:  # free once the dead holder's TTL ran out
            assert time.monotonic() < deadline, "a dead holder's slot never came free"
            time.sleep(0.1)
        assert slots.holders(slot.name) == ["other"]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if p.stdout is not None:
            p.stdout.close()
