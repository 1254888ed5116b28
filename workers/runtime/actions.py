"""Action handlers: the running half of each action kind declared in ``orchestrator.actions``.

A handler is ``(runtime, slug, key, interrupted)``: it reads its action back from the log by key, does its one
piece of work and ends by appending its result events in one batch (``workers.runtime.context.finish``). The
coordinator's ``run_task`` runs it under the action's lease; the Celery task of the kind only calls
``run_task``. The built-in handlers are bound in ``workers/runtime/jobs.py`` with ``@handles``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.actions import ACTIONS
from orchestrator.registry import Registry
from workers.isolation.supervise import Interrupted

if TYPE_CHECKING:
    from workers.runtime.context import Runtime

# (runtime, slug, key, interrupted): ``interrupted()`` is true once the work must end (lease lost, run
# cancelled)
Handler = Callable[["Runtime", str, str, Interrupted], None]

HANDLERS: Registry[Handler] = Registry("action handler")


def handles(kind: str) -> Callable[[Handler], Handler]:
    """Bind the decorated function as the handler of the action kind ``kind``, which must be declared."""
    ACTIONS.check(kind)

    def bind(handler: Handler) -> Handler:
        HANDLERS.register(kind, handler)
        return handler

    return bind
