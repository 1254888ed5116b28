"""Thin tasks: take (slug, key), call the plain functions of ``workers.coordinator``, return nothing.

One task per action kind of ``orchestrator.actions`` (named ``jury.<kind>``, as they always were, so a
fleet mixing releases keeps taking the same messages), plus ``jury.coordinate`` and ``jury.reap``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from celery import Task
from celery.signals import worker_ready

from orchestrator.actions import ACTIONS, ActionKind, task_name
from orchestrator.config import load_settings
from workers import coordinator, metrics
from workers.app import app
from workers.runtime import Runtime


@cache
def get_runtime() -> Runtime:
    """One runtime per worker process, built from the settings of its environment."""
    from orchestrator.store.files import FileStore
    from orchestrator.store.redis import from_url
    from workers.app import celery_url

    settings = load_settings()  # logging is set up with the process (workers.app, Celery's setup_logging)
    store = from_url(celery_url(settings.redis_url))
    metrics.watch(store)  # this worker's counters, from the events it appends
    return Runtime(
        settings=settings,
        store=store,
        files=FileStore(settings.dir),
        send=send,
        kick=kick,
        send_later=send_later,
    )


def send(kind: str, slug: str, key: str) -> None:
    app.send_task(task_name(kind), args=[slug, key])


def send_later(kind: str, slug: str, key: str, seconds: float) -> None:
    """A task put back (its slot full, its model rate-limited): a new message with a countdown. It waits
    in the broker (a worker holds an ETA message without a pool slot; a short countdown stays far under
    the visibility timeout, after which Redis would hand an unacknowledged one out again)."""
    app.send_task(task_name(kind), args=[slug, key], countdown=seconds)


def kick(slug: str) -> None:
    app.send_task("jury.coordinate", args=[slug])


@app.task(name="jury.coordinate")
def coordinate(slug: str) -> None:
    coordinator.coordinate(get_runtime(), slug)


def action_task(kind: ActionKind) -> Task:
    """The Celery task of an action kind, ``jury.<kind>``: it runs the action with the kind's handler."""

    def run(slug: str, key: str) -> None:
        coordinator.run_task(get_runtime(), kind.name, slug, key)

    run.__name__ = run.__qualname__ = kind.name
    run.__doc__ = f"Run one {kind.name} action (queue {kind.queue!r}) under its lease."
    task: Task = app.task(name=kind.task)(run)
    return task


ACTION_TASKS: dict[str, Task] = {name: action_task(kind) for name, kind in ACTIONS.items()}


@app.task(name="jury.reap")
def reap() -> None:
    metrics.leases_recovered(len(coordinator.reap(get_runtime())))


@worker_ready.connect
def reap_at_start(sender: Any = None, **_: Any) -> None:
    """A worker that starts looks for work its dead predecessors left behind."""
    app.send_task("jury.reap")
