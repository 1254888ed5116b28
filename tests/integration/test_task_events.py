"""Celery's task events: a ``jury worker`` sends none for its tasks by default, sends them once a monitor
asks (Flower's periodic ``enable_events`` broadcast), and always with ``JURY_TASK_EVENTS=true``."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from orchestrator.config import Settings
from tests.conftest import outside_env
from tests.e2e.test_fleet import stop_group, wait_for
from workers.runtime.app import celery_config


class TaskEvents:
    """The task events published on one database (kombu's fanout there is a Redis channel per database):
    each as (type, task id), in the order they came."""

    def __init__(self, url: str) -> None:
        db = url.rsplit("/", 1)[1]
        self.client = redis.Redis.from_url(url)
        self.pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        self.pubsub.psubscribe(f"/{db}.celeryev/task.*")  # a worker's heartbeats are not task events
        self.events: list[tuple[str, str]] = []

    def seen(self) -> list[tuple[str, str]]:
        while (message := self.pubsub.get_message(timeout=0.01)) is not None:
            envelope = json.loads(message["data"])  # kombu's message; its body the event, or a batch of them
            body = json.loads(base64.b64decode(envelope["body"]))
            for event in body if isinstance(body, list) else [body]:
                self.events.append((event["type"], event["uuid"]))
        return self.events

    def of(self, task_id: str) -> list[str]:
        return [kind for kind, uuid in self.seen() if uuid == task_id]


@pytest.fixture
def worker(shared_redis: str, tmp_path: Path) -> Iterator[Callable[[dict[str, str]], Celery]]:
    """Start a ``jury worker`` on the control queue with the given environment; the app a sender with
    that same environment would use."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(extra: dict[str, str]) -> Celery:
        env = {**outside_env(), "JURY_REDIS_URL": shared_redis, "JURY_DIR": str(tmp_path / "state"), **extra}
        log = (tmp_path / "worker.log").open("wb")
        argv = [sys.executable, "-m", "jury_cli", "worker", "--queues", "control", "--concurrency", "1"]
        procs.append(
            subprocess.Popen(
                argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        )
        log.close()
        settings = Settings(redis_url=shared_redis, task_events=extra.get("JURY_TASK_EVENTS") == "true")
        app = Celery("jury-test-sender")
        app.conf.update(celery_config(settings))
        return app

    yield start
    for p in procs:
        stop_group(p, timeout=30)


def coordinate_ran(app: Celery, times: int) -> bool:
    """Whether a worker has run ``times`` coordinate tasks (its own statistics, over remote control)."""
    stats = app.control.inspect(timeout=1.0).stats() or {}
    return any(s.get("total", {}).get("jury.coordinate", 0) >= times for s in stats.values())


def test_a_worker_sends_no_task_events_until_a_monitor_asks(worker, shared_redis: str) -> None:  # type: ignore[no-untyped-def]
    app = worker({})
    events = TaskEvents(shared_redis)
    wait_for("the worker to answer", lambda: app.control.ping(timeout=1.0), 90)
    first = app.send_task("jury.coordinate", args=["no-such-run"]).id  # a pass over a run that is not there
    wait_for("the first task to run", lambda: coordinate_ran(app, 1), 90)

    app.control.enable_events()  # what Flower sends every few seconds while it watches
    second = app.send_task("jury.coordinate", args=["no-such-run"]).id
    wait_for("the second task's events", lambda: "task-succeeded" in events.of(second), 90)
    # A worker publishes its task events in order (a buffer flushed as one batch): the first task's would
    # have come before the second's.
    assert events.of(first) == []
    assert "task-sent" not in events.of(second)  # this sender still sends none


def test_jury_task_events_true_sends_them_from_the_start(worker, shared_redis: str) -> None:  # type: ignore[no-untyped-def]
    app = worker({"JURY_TASK_EVENTS": "true"})
    events = TaskEvents(shared_redis)
    wait_for("the worker to answer", lambda: app.control.ping(timeout=1.0), 90)
    task = app.send_task("jury.coordinate", args=["no-such-run"]).id
    wait_for("the task's events", lambda: "task-succeeded" in events.of(task), 90)
    assert "task-sent" in events.of(task)  # the sender's too
