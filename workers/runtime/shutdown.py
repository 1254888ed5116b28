"""A worker's graceful shutdown: finish what runs within a grace period, then hand the rest back.

On SIGTERM (or a first Ctrl-C) Celery's warm shutdown stops taking tasks and waits for the running ones,
however long their agents take. What Jury adds, process-wide:

1. ``request()`` (from Celery's ``worker_shutting_down``, inside its signal handler: it only sets a flag)
   starts the grace period (``JURY_SHUTDOWN_GRACE``); running agents may finish and record their results.
2. When the grace is over, ``handing_back()`` turns true. Every task's ``interrupted()`` then says stop
   (``workers.runtime.context.TaskInterrupt``): the agent's process group is killed (TERM, then KILL after
   ``JURY_KILL_GRACE``), the task records nothing, releases its lease and sends its action again
   (``workers.runtime.coordinator.run_task``), so another worker takes it at once instead of after the lease's
   TTL. Then Celery's warm shutdown ends and the process exits.

With the prefork pool the tasks run in child processes that never see the parent's flag: the parent
signals them (``HAND_BACK_SIGNAL``) and their handler, installed by ``install_child_handler`` from
``worker_process_init``, sets it there.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable

import structlog

log = structlog.get_logger()

HAND_BACK_SIGNAL = signal.SIGUSR2  # untouched by Celery and billiard in pool children

# Plain values, set from signal handlers: no lock may be taken there.
_requested_at: float | None = None
_handing_back = False
_watching = threading.Event()


def request() -> None:
    """Start the grace period (idempotent; safe in a signal handler)."""
    global _requested_at
    if _requested_at is None:
        _requested_at = time.monotonic()


def requested() -> bool:
    """Whether this worker is shutting down (draining: no new task, running ones may finish)."""
    return _requested_at is not None


def handing_back() -> bool:
    """Whether the grace is over: running tasks are to stop and hand their actions back."""
    return _handing_back


def hand_back_now() -> None:
    """End the grace period at once (the grace watcher, or a prefork child told so by its parent)."""
    global _handing_back
    _handing_back = True


def reset() -> None:
    """Forget a shutdown (tests, and a prefork child forked from a parent that was already draining)."""
    global _requested_at, _handing_back
    _requested_at, _handing_back = None, False
    _watching.clear()  # a forked child has no watcher thread, whatever its parent had


def install_child_handler() -> None:
    """In a pool child: the parent's ``HAND_BACK_SIGNAL`` ends the grace here too."""
    reset()
    signal.signal(HAND_BACK_SIGNAL, lambda signum, frame: hand_back_now())


def watch(
    grace: float,
    *,
    children: Callable[[], Iterable[int]] = list,
    on_draining: Callable[[], None] = lambda: None,
    poll: float = 0.25,
) -> threading.Thread:
    """Start (once per process) the thread that turns a shutdown request into a hand-back after ``grace``
    seconds: it calls ``on_draining`` when the request comes, and when the grace is over sets the flag and
    signals the pool's ``children`` (their pids; none for a threads pool)."""

    def run() -> None:
        while _requested_at is None:
            time.sleep(poll)  # a flag set in a signal handler: polled, never waited on with a lock
        log.info("worker.draining", grace=grace)
        try:
            on_draining()
        except Exception as exc:  # the presence record is for humans: never in the way of a shutdown
            log.warning("worker.draining_note_failed", error=str(exc))
        while time.monotonic() - _requested_at < grace:
            time.sleep(poll)
        hand_back_now()
        pids = list(children())
        log.warning("worker.handing_back", grace=grace, children=len(pids))
        for pid in pids:
            try:
                os.kill(pid, HAND_BACK_SIGNAL)
            except (ProcessLookupError, PermissionError):
                pass

    thread = threading.Thread(target=run, name="jury-shutdown-grace", daemon=True)
    if not _watching.is_set():
        _watching.set()
        thread.start()
    return thread
