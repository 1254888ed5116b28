"""Thin tasks: take (slug, key), call the plain function in ``workers.runtime``, return nothing."""

from __future__ import annotations

from functools import cache

from orchestrator.config import load_settings
from workers import runtime
from workers.app import app
from workers.runtime import Runtime


@cache
def get_runtime() -> Runtime:
    """One runtime per worker process, built from the settings of its environment."""
    from orchestrator.store.files import FileStore
    from orchestrator.store.redis import from_url as redis_store
    from workers.app import celery_url

    settings = load_settings()
    store = redis_store(celery_url(settings.redis_url))
    return Runtime(settings=settings, store=store, files=FileStore(settings.dir), send=send, kick=kick)


def send(kind: str, slug: str, key: str) -> None:
    app.send_task(f"jury.{kind}", args=[slug, key])


def kick(slug: str) -> None:
    app.send_task("jury.coordinate", args=[slug])


@app.task(name="jury.coordinate")
def coordinate(slug: str) -> None:
    runtime.coordinate(get_runtime(), slug)


@app.task(name="jury.review")
def review(slug: str, key: str) -> None:
    runtime.run_task(get_runtime(), "review", slug, key)


@app.task(name="jury.triage")
def triage(slug: str, key: str) -> None:
    runtime.run_task(get_runtime(), "triage", slug, key)


@app.task(name="jury.reply")
def reply(slug: str, key: str) -> None:
    runtime.run_task(get_runtime(), "reply", slug, key)


@app.task(name="jury.push")
def push(slug: str, key: str) -> None:
    runtime.run_task(get_runtime(), "push", slug, key)
