"""The Celery app. Tasks are routed by name to one queue per kind (docs/architecture.md, "Queues"); the
queues and routes are derived from the action kinds of ``orchestrator.actions``.

The broker is the Redis of ``JURY_REDIS_URL`` (``redis://``, ``rediss://``, ``unix://`` or
``redis+socket://``); results are not kept: the event log is where results live. Over ``rediss://`` the
broker verifies the server's certificate (``broker_use_ssl``; kombu alone would not).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery
from celery.signals import setup_logging, task_postrun, task_prerun

from orchestrator import logs
from orchestrator.actions import queues, routes
from orchestrator.config import Settings, load_settings
from orchestrator.store.urls import broker_ssl

QUEUES = queues()  # ("control", "review", "triage", "reply", "refute")
ROUTES = routes()  # task name -> queue: jury.coordinate, jury.reap and each action kind's jury.<kind>
DEFAULT_URL = "redis://127.0.0.1:6379/0"


def celery_url(url: str | None) -> str:
    """Celery's spelling of a Redis URL (a unix socket is ``redis+socket://``)."""
    url = url or DEFAULT_URL
    if url.startswith("unix://"):
        return "redis+socket://" + url.removeprefix("unix://")
    return url


def celery_config(settings: Settings) -> dict[str, Any]:
    url = celery_url(settings.redis_url)
    events = settings.task_events
    # "priority": a worker takes from its queues in the order it consumes them (``QUEUES``: control first,
    # review last), not in turns: a coordinate pass never waits behind a review of another run.
    transport = {"visibility_timeout": settings.visibility_timeout, "queue_order_strategy": "priority"}
    return {
        "broker_url": url,
        "broker_use_ssl": broker_ssl(url) or False,
        "broker_transport_options": transport,
        "result_backend": None,
        "task_ignore_result": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_routes": {name: {"queue": q} for name, q in ROUTES.items()},
        "task_default_queue": "control",
        "task_track_started": True,
        # Off by default: nothing of Jury reads them, and publishing them cost a worker more CPU than a
        # task that does nothing (README, "Benchmarks"). A monitor turns them on in the workers while it
        # watches (Flower's periodic enable_events broadcast); JURY_TASK_EVENTS=true sends them always.
        "worker_send_task_events": events,
        "task_send_sent_event": events,
        "worker_max_tasks_per_child": 200,
        "broker_connection_retry_on_startup": True,
        "worker_hijack_root_logger": False,
        # No beat schedule: every worker reaps in turn (workers.fleet.reaper), so no process is the one to
        # keep.
        "task_serializer": "json",
        "accept_content": ["json"],
    }


def survive_broker_loss() -> None:
    """Keep a worker alive when Redis goes away while it runs a task (kombu 5.7 / celery 5.7).

    On a lost broker connection the consumer first ``collect()``s the connection, which drops the
    transport's reference to it, then closes it. When the first close of the channel failed half-way
    (the BRPOP socket already dead), the second one restores the unacknowledged messages of our running
    acks-late tasks through a connection that no longer exists: ``_connparams`` dereferences ``None``,
    the AttributeError is not one of the connection errors Celery ignores, and the worker dies with
    "Unrecoverable error". The same happens, every time, when a task that outlived a short outage acks its
    message on the dead channel. Turning that into the connection error it is lets Celery log it ("Couldn't
    ack") and carry on; the messages stay in Redis's unacked set, restored after the visibility timeout
    (a redelivered action finds its done marker and changes nothing); a lost action is re-sent sooner by
    the reaper.
    """
    from kombu.transport import redis as kombu_redis
    from redis.exceptions import ConnectionError as RedisConnectionError

    channel = kombu_redis.Channel
    if getattr(channel._connparams, "jury_guard", False):
        return
    original = channel._connparams

    def _connparams(self: Any, asynchronous: bool = False) -> Any:
        if self.connection is None or self.connection.client is None:
            raise RedisConnectionError("the broker connection is closed")
        return original(self, asynchronous=asynchronous)

    _connparams.jury_guard = True  # type: ignore[attr-defined]
    channel._connparams = _connparams  # type: ignore[method-assign]


def make_app(settings: Settings | None = None) -> Celery:
    survive_broker_loss()
    app = Celery("jury", include=["workers.runtime.tasks", "workers.runtime.firings"])
    app.conf.update(celery_config(settings or load_settings()))
    return app


@setup_logging.connect
def log_as_jury(loglevel: int | str | None = None, **_: Any) -> None:
    """Celery leaves logging to Jury (a receiver here means Celery configures none and redirects no
    stream): one line per event at its true level, Celery's own lines included (``orchestrator.logs``)."""
    settings = load_settings()
    theirs = loglevel if isinstance(loglevel, str) else logging.getLevelName(loglevel or logging.WARNING)
    logs.configure_process(settings.log_level, settings.log_json, library_level=theirs)


@task_prerun.connect
def bind_task(task_id: str = "", task: Any = None, args: Any = None, **_: Any) -> None:
    """Every line a task logs names its run, its action and its Celery task id."""
    args = list(args or [])
    slug, key = (args + [None, None])[:2]
    logs.bind_task(
        task_id,
        getattr(task, "name", ""),
        slug if isinstance(slug, str) else None,
        key if isinstance(key, str) else None,
    )


@task_postrun.connect
def unbind_task(**_: Any) -> None:
    logs.unbind_task()


app = make_app()
