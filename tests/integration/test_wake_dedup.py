"""However often a run is woken before its coordinator's pass starts, one ``jury.coordinate`` waits.

Real Redis as store and broker (the fleet's layout: the broker is the store's database), a real Celery
app sending the real messages; what is counted is the control queue in Redis. ``Runtime.wake`` kicks only
when ``claim_kick`` sets the run's pending-kick mark; the pass clears it as it starts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery

from orchestrator.config import Settings, load_settings
from orchestrator.store.files import FileStore
from orchestrator.store.redis import RedisStore, from_url
from workers.runtime import coordinator
from workers.runtime.app import make_app
from workers.runtime.context import Runtime


@pytest.fixture
def store(shared_redis: str) -> Iterator[RedisStore]:
    s = from_url(shared_redis)
    yield s
    s.close()


@pytest.fixture
def app(shared_redis: str) -> Celery:
    return make_app(load_settings().model_copy(update={"redis_url": shared_redis}))


@pytest.fixture
def rt(store: RedisStore, app: Celery, tmp_path: Path) -> Runtime:
    def kick(slug: str) -> None:  # what workers.runtime.tasks.kick sends, through this test's broker
        app.send_task("jury.coordinate", args=[slug])

    def send(kind: str, slug: str, key: str) -> None:
        raise AssertionError(f"nothing here sends an action ({kind} {slug} {key})")

    state = tmp_path / "state"
    return Runtime(settings=Settings(dir=state), store=store, files=FileStore(state), send=send, kick=kick)


def coordinate_messages(store: RedisStore) -> list[tuple[str, str]]:
    """The (task, args) of every message waiting in the control queue, oldest first."""
    raw = store.client.lrange("control", 0, -1)
    headers = [json.loads(message)["headers"] for message in reversed(raw)]  # kombu LPUSHes
    return [(h["task"], h["argsrepr"]) for h in headers]


def test_two_wakes_of_a_run_before_its_pass_queue_one_coordinate(rt: Runtime, store: RedisStore) -> None:
    rt.wake("run-a")
    rt.wake("run-a")  # an action ended, a reaper looked: the pass already queued will see it
    assert coordinate_messages(store) == [("jury.coordinate", "['run-a']")]
    rt.wake("run-b")  # the mark is per run
    assert coordinate_messages(store) == [
        ("jury.coordinate", "['run-a']"),
        ("jury.coordinate", "['run-b']"),
    ]


def test_a_wake_after_the_pass_started_queues_another(rt: Runtime, store: RedisStore) -> None:
    rt.wake("run-a")
    coordinator.coordinate(rt, "run-a")  # the pass (of a run with no log) clears the mark as it starts
    rt.wake("run-a")  # what happens from now on needs a pass of its own
    assert coordinate_messages(store) == [("jury.coordinate", "['run-a']")] * 2
