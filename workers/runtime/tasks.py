"""Thin tasks: take (slug, key), call the plain functions of ``workers.runtime.coordinator``, return nothing.

One task per action kind of ``orchestrator.actions`` (named ``jury.<kind>``, as they always were, so a
fleet mixing releases keeps taking the same messages), plus ``jury.coordinate`` and ``jury.reap``.

And the worker's life cycle, from Celery's signals: once ready, its presence and its turn at reaping
(``workers.fleet.reaper.FleetDuties``, in every worker: ``jury.reap`` is only an explicit request); on a warm
shutdown, the grace period and the hand-back of what still runs (``workers.runtime.shutdown``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from functools import cache
from typing import Any

from celery import Task
from celery.signals import (
    worker_init,
    worker_process_init,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)

from orchestrator.actions import ACTIONS, ActionKind, task_name
from orchestrator.config import load_settings
from workers.fleet import metrics
from workers.runtime import coordinator, shutdown
from workers.runtime.app import app
from workers.runtime.context import Runtime
from workers.runtime.wake import COORDINATE, wake


@cache
def get_runtime() -> Runtime:
    """One runtime per worker process, built from the settings of its environment."""
    from orchestrator.store.files import FileStore
    from orchestrator.store.redis_archive import open_store
    from workers.runtime.app import celery_url

    settings = (
        load_settings()
    )  # logging is set up with the process (workers.runtime.app, Celery's setup_logging)
    from workers.fleet.fleetview import queued_actions

    store = open_store(celery_url(settings.redis_url))
    metrics.watch(store)  # this worker's counters, from the events it appends
    return Runtime(
        settings=settings,
        store=store,
        files=FileStore(settings.dir),
        send=send,
        kick=kick,
        send_later=send_later,
        send_new=send_new,
        queued=lambda: queued_actions(store.client),  # the broker is the store's Redis database
    )


def send(kind: str, slug: str, key: str) -> None:
    app.send_task(task_name(kind), args=[slug, key])


# New work's priority on the Redis broker: its lowest step (kombu's Redis transport takes priority 0 first,
# and 0 is what every message without one has). A worker's BRPOP names each queue's list of every priority
# step, priority-major: it takes every queue's priority-0 messages (continuing work, in the order of
# ``QUEUES``) before any queue's new work. The message stays in its kind's queue (``review``), in the list
# kombu keeps for that step, which every worker consuming the queue reads, those of earlier releases too.
NEW_WORK_PRIORITY = 9


def send_new(kind: str, slug: str, key: str) -> None:
    """``send`` for an action of a run nothing of which has been taken yet: behind continuing work."""
    app.send_task(task_name(kind), args=[slug, key], priority=NEW_WORK_PRIORITY)


def send_later(kind: str, slug: str, key: str, seconds: float) -> None:
    """A task put back (its slot full, its model rate-limited): a new message with a countdown. It waits
    in the broker (a worker holds an ETA message without a pool slot; a short countdown stays far under
    the visibility timeout, after which Redis would hand an unacknowledged one out again)."""
    app.send_task(task_name(kind), args=[slug, key], countdown=seconds)


def kick(slug: str) -> None:
    """The runtime's raw kick: ``Runtime.wake`` and the reaper claimed the run's pending-kick mark."""
    wake(app, [slug])


@app.task(name=COORDINATE)
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
    counted_reap(get_runtime())


def counted_reap(rt: Runtime, holding: Callable[[], bool] = lambda: True) -> list[str]:
    """``coordinator.reap`` (while ``holding``: the reaper's lock is still this worker's), its re-sent
    actions counted as leases recovered."""
    resent = coordinator.reap(rt, holding)
    metrics.leases_recovered(len(resent))
    return resent


_duties: list[Any] = []  # this process's FleetDuties, once ready


@worker_ready.connect
def start_duties(sender: Any = None, **_: Any) -> None:
    """Every worker keeps its presence and takes its turn at reaping (the first try at once: a worker that
    starts looks for work its dead predecessors left behind); and it watches for its own shutdown."""
    from workers.fleet.presence import Presence, WorkerPresence, new_worker_id
    from workers.fleet.reaper import PRESENCE_TTL, FleetDuties

    rt = get_runtime()
    pool = getattr(sender, "pool", None)
    task_consumer = getattr(sender, "task_consumer", None)
    queues = [q.name for q in getattr(task_consumer, "queues", None) or []]
    me = WorkerPresence(
        id=new_worker_id(),
        host=socket.gethostname(),
        pid=os.getpid(),
        queues=queues or sorted(app.amqp.queues.consume_from or ()),
        concurrency=getattr(getattr(sender, "controller", None), "concurrency", None),
        pool=type(pool).__module__.rsplit(".", 1)[-1] if pool is not None else None,
        started=time.time(),
        last_seen=time.time(),
    )
    presence = Presence(rt.client, me, ttl=PRESENCE_TTL, prefix=rt.prefix)
    duties = FleetDuties(rt, presence, reap=counted_reap)
    duties.start()
    _duties.append(duties)

    def draining() -> None:
        presence.update(state="draining")
        presence.refresh()

    def children() -> list[int]:  # a prefork pool's processes (a threads pool has none)
        procs = getattr(getattr(pool, "_pool", None), "_pool", None) or []
        return [p.pid for p in procs if getattr(p, "pid", None)]

    shutdown.watch(rt.settings.shutdown_grace, children=children, on_draining=draining)


@worker_shutting_down.connect
def begin_shutdown(sender: Any = None, **_: Any) -> None:
    """A warm shutdown began (SIGTERM): the grace period starts. In Celery's signal handler: a flag only."""
    shutdown.request()


@worker_shutdown.connect
def stop_duties(sender: Any = None, **_: Any) -> None:
    """The worker is leaving: its threads stop and its presence record goes."""
    while _duties:
        _duties.pop().stop()


@worker_init.connect
def private_files(sender: Any = None, **_: Any) -> None:
    """A worker started by ``celery`` itself (not ``jury worker``) writes privately too."""
    from orchestrator.private_files import write_privately

    write_privately()


@worker_process_init.connect
def pool_child(sender: Any = None, **_: Any) -> None:
    """A prefork child: its parent's hand-back signal ends the grace in it too."""
    shutdown.install_child_handler()
