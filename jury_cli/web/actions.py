"""What the console's buttons do: the same functions as ``jury cancel`` and ``jury review --resume``, and
re-publishing a run when this release can publish.

Each raises ``UsageError`` with what to fix when it cannot act; the API answers that message (409), or
501 for an action this release does not have — never a success that did nothing.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from rich.console import Console

from orchestrator.config import Settings
from orchestrator.errors import UsageError

WHO = "console"


class NotAvailable(Exception):
    """The action does not exist in this release (the API answers 501 with the message)."""


def cancel(settings: Settings, slug: str) -> str:
    from jury_cli.runs import cancel_run

    cancel_run(settings, slug, WHO)
    return f"cancelling {slug}"


def resume(settings: Settings, slug: str) -> str:
    """``jury review --resume SLUG --detach``: the run's workers are the fleet's, so it needs the shared
    Redis (a console cannot keep an embedded Redis and local workers for a run it does not follow)."""
    if not settings.redis_url:
        raise UsageError(
            f"resuming from the console needs the fleet's Redis (JURY_REDIS_URL) and workers started with "
            f"`jury worker`; without them run: jury review --resume {slug}"
        )
    from jury_cli.review import run_review

    quiet = Console(file=io.StringIO())
    run_review(settings, slug, None, detach=True, resume=True, concurrency=1, console=quiet)
    return f"resumed {slug}"


def publisher() -> Callable[..., Any] | None:
    """The function that (re-)publishes a run to its PR, when this release has one."""
    return None


def publish(settings: Settings, slug: str) -> str:
    fn = publisher()
    if fn is None:
        raise NotAvailable("re-publishing is not available: this release of Jury cannot publish runs yet")
    fn(settings, slug)
    return f"publishing {slug}"


ACTIONS: dict[str, Callable[[Settings, str], str]] = {"cancel": cancel, "resume": resume, "publish": publish}
