"""Putting an action back undone, and waking what waited: a task that may not run now (a full slot, a
model's rate limit, its worker draining) ends without a done marker and is sent again later, never
waiting in its worker slot; a task that frees a slot sends at once the oldest task waiting for it."""

from __future__ import annotations

import structlog

from orchestrator.domain import ActionDeferred
from orchestrator.errors import StoreError
from workers.agents.run import RateLimited
from workers.isolation.limits import Waiter, put_back_cap, rate_limit_wait
from workers.runtime import shutdown
from workers.runtime.context import Runtime
from workers.runtime.jobs import TASKS
from workers.runtime.lease import Claim

__all__ = ["handing_back", "put_back", "rate_limited", "wake_waiters"]

log = structlog.get_logger()


def wake_waiters(rt: Runtime, woken: list[Waiter]) -> None:
    """Send again, at once, the tasks put back for the slots this task just gave back
    (``workers.isolation.limits``): a freed slot is taken now, not when a countdown ends. Only the kinds a
    handler is bound to are sent (a waiter is a name read back from Redis). A send that fails is logged and
    left: the waiter's own countdown copy is still queued, and this task's outcome is already decided."""
    for waiter in woken:
        if waiter.kind not in TASKS:
            log.warning("limits.unknown_waiter", kind=waiter.kind, slug=waiter.slug, key=waiter.key)
            continue
        try:
            rt.send(waiter.kind, waiter.slug, waiter.key)
        except Exception as exc:  # the broker out of reach: the countdown copy brings the task back
            log.warning("limits.wake_failed", slug=waiter.slug, key=waiter.key, error=str(exc))
            continue
        log.info("limits.woken", slug=waiter.slug, key=waiter.key, kind=waiter.kind)


def rate_limited(rt: Runtime, key: str, attempt: int, exc: RateLimited) -> ActionDeferred:
    """The put-back of an action whose model refused it for the ``attempt``-th time (0: the first): its
    countdown the model's Retry-After, honoured up to ``put_back_cap``, or the back-off of a 429 that named
    none (``limits.rate_limit_wait``)."""
    cap = put_back_cap(rt.settings.visibility_timeout)
    wait = rate_limit_wait(exc.seconds, attempt, rt.settings.limit_wait, cap)
    return ActionDeferred(
        eid=f"{key}:backoff:{attempt + 1}", key=key, reason="rate-limit", seconds=wait, note=exc.note
    )


def handing_back(lease: Claim) -> bool:
    """Whether this worker is handing its actions back (``workers.runtime.shutdown``) and the lease is still
    ours to hand (False when Redis cannot say)."""
    if not shutdown.handing_back():
        return False
    try:
        return lease.held()
    except StoreError:
        return False


def put_back(rt: Runtime, kind: str, slug: str, deferred: ActionDeferred) -> None:
    """Put an action back, undone, to be taken again in ``deferred.seconds``: the event says why (the
    first wait for a slot of each attempt, every rate limit), the sent mark tells the reaper it is not
    lost (it is due when the countdown ends: ``mark_sent(delay=...)``, written while the caller's lease
    still holds it), and the task is re-sent with the countdown. The caller's lease ends with its task; no
    done marker is written."""
    rt.store.append(slug, [deferred])
    log.info(
        "task.put_back",
        slug=slug,
        key=deferred.key,
        reason=deferred.reason,
        seconds=deferred.seconds,
        note=deferred.note,
    )
    rt.store.mark_sent(slug, deferred.key, delay=deferred.seconds)
    rt.later(kind, slug, deferred.key, deferred.seconds)
