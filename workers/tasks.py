"""Thin tasks: take (slug, key), call the plain functions of ``workers.coordinator``, return nothing."""

from __future__ import annotations

from functools import cache
from typing import Any

from celery.signals import worker_ready

from orchestrator import logs
from orchestrator.config import load_settings
from workers import coordinator
from workers.app import app
from workers.runtime import Runtime


@cache
def get_runtime() -> Runtime:
    """One runtime per worker process, built from the settings of its environment."""
    from orchestrator.store.files import FileStore
    from orchestrator.store.redis import from_url
    from workers.app import celery_url

    settings = load_settings()
    logs.configure(settings.log_level, settings.log_json)
    store = from_url(celery_url(settings.redis_url))
    return Runtime(settings=settings, store=store, files=FileStore(settings.dir), send=send, kick=kick)


def send(kind: str, slug: str, key: str) -> None:
    app.send_task(f"jury.{kind}", args=[slug, key])


def kick(slug: str) -> None:
    app.send_task("jury.coordinate", args=[slug])


@app.task(name="jury.coordinate")
def coordinate(slug: str) -> None:
    coordinator.coordinate(get_runtime(), slug)


@app.task(name="jury.review")
def review(slug: str, key: str) -> None:
    coordinator.run_task(get_runtime(), "review", slug, key)


@app.task(name="jury.triage")
def triage(slug: str, key: str) -> None:
    coordinator.run_task(get_runtime(), "triage", slug, key)


@app.task(name="jury.reply")
def reply(slug: str, key: str) -> None:
    coordinator.run_task(get_runtime(), "reply", slug, key)


@app.task(name="jury.refute")
def refute(slug: str, key: str) -> None:
    coordinator.run_task(get_runtime(), "refute", slug, key)


@app.task(name="jury.push")
def push(slug: str, key: str) -> None:
    coordinator.run_task(get_runtime(), "push", slug, key)


@app.task(name="jury.reap")
def reap() -> None:
    coordinator.reap(get_runtime())


@worker_ready.connect
def reap_at_start(sender: Any = None, **_: Any) -> None:
    """A worker that starts looks for work its dead predecessors left behind."""
    app.send_task("jury.reap")
