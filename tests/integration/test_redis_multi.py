"""A key a task writes for its run (an artifact, a mark, a done marker) is kept with the run in one MULTI,
its script called by its sha alone: one round trip, not redis-py's SCRIPT EXISTS first; and still written,
and kept with its run, when Redis has lost the script."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from orchestrator.domain import TargetEvent
from orchestrator.spec import Target
from orchestrator.store import keys
from orchestrator.store.redis import RedisStore
from orchestrator.store.redis_scripts import KEEP_WITH_RUN_LUA
from tests.redis_server import redis_url
from workers.runtime.lease import RedisLeases

SLUG = "multi-run"


class Recording(redis.Connection):
    """A connection that keeps every batch of commands it sends (one batch: one round trip)."""

    sent: list[bytes] = []

    def send_packed_command(self, command, check_health=True):  # type: ignore[no-untyped-def]
        chunks = [command] if isinstance(command, (bytes, str)) else list(command)
        Recording.sent.append(b"".join(c if isinstance(c, bytes) else c.encode() for c in chunks))
        return super().send_packed_command(command, check_health)


@pytest.fixture
def store(shared_redis: str) -> Iterator[RedisStore]:
    db = int(shared_redis.rsplit("/", 1)[1])
    pool = redis.ConnectionPool.from_url(redis_url(db), connection_class=Recording)
    client = redis.Redis(connection_pool=pool)
    s = RedisStore(client, prefix=f"jt-{uuid.uuid4().hex[:8]}")
    s.append(SLUG, [TargetEvent(eid="target:0", target=Target(repo="acme/x", state="review"))])
    Recording.sent = []
    yield s
    client.close()


def listed(store: RedisStore, name: str) -> bool:
    return bool(store.client.sismember(keys.run_index(store.prefix, SLUG), name))


def test_each_write_kept_with_its_run_is_one_round_trip(store: RedisStore) -> None:
    store.put_artifact(SLUG, "round-1.r.stdout.txt", b"NO NEW FINDINGS\n")
    store.mark_sent(SLUG, "review:r1:r")
    store.mark_taken(SLUG, "review:r1:r")
    leases = RedisLeases(store.client, store.prefix)
    leases.mark_done(f"{SLUG}:review:r1:r")
    assert len(Recording.sent) == 4, Recording.sent  # a MULTI each, sent at once
    assert not any(b"SCRIPT" in batch for batch in Recording.sent)
    assert all(b"EVALSHA" in batch and batch.startswith(b"*1\r\n$5\r\nMULTI") for batch in Recording.sent)
    artifact = keys.artifact(store.prefix, SLUG, "round-1.r.stdout.txt")
    taken = keys.taken(store.prefix, f"{SLUG}:review:r1:r")
    done = keys.done(store.prefix, f"{SLUG}:review:r1:r")
    assert all(listed(store, name) for name in (artifact, taken, done))
    assert store.get_artifact(SLUG, "round-1.r.stdout.txt") == b"NO NEW FINDINGS\n"
    assert leases.is_done(f"{SLUG}:review:r1:r")


def test_a_script_redis_lost_is_loaded_and_the_write_made_again(store: RedisStore) -> None:
    # The same script under a sha Redis has never seen: what a restart or a SCRIPT FLUSH leaves.
    store._keep_with_run_script = store.client.register_script(KEEP_WITH_RUN_LUA + f"-- {uuid.uuid4()}\n")
    store.mark_sent(SLUG, "review:r1:r")
    sent = keys.sent(store.prefix, f"{SLUG}:review:r1:r")
    assert store.client.get(sent) is not None and listed(store, sent)
    assert sum(b"SCRIPT" in batch for batch in Recording.sent) == 1  # loaded once, then the MULTI again
    Recording.sent = []
    store.put_artifact(SLUG, "a.txt", b"x")  # loaded now: one round trip again
    assert len(Recording.sent) == 1 and listed(store, keys.artifact(store.prefix, SLUG, "a.txt"))


def test_a_resend_redis_lost_the_script_of_counts_once(store: RedisStore) -> None:
    # mark_resent INCRs the resent count: its MULTI must not be made twice, so it calls the script as
    # redis-py's Script object, which loads a script Redis lost before the MULTI, never after it.
    store._keep_with_run_script = store.client.register_script(KEEP_WITH_RUN_LUA + f"-- {uuid.uuid4()}\n")
    assert store.mark_resent(SLUG, "review:r1:r") == 1
    resent = keys.resent(store.prefix, f"{SLUG}:review:r1:r")
    assert int(store.client.get(resent) or 0) == 1 and listed(store, resent)
