"""What the console's buttons do: the same functions as ``jury cancel`` and ``jury review --resume``, and
re-publishing a run (``jury publish``).

Each raises ``UsageError`` with what to fix when it cannot act (the API answers that message, 409), or
``PublishFailed`` when the forge did not take it (502) — never a success that did nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.config import Settings
from orchestrator.errors import JuryError, UsageError
from orchestrator.spec import TERMINAL_STATES

WHO = "console"


class PublishFailed(JuryError):
    """The forge refused or failed: the ``run.published`` event says why (the API answers 502)."""


def cancel(settings: Settings, slug: str) -> str:
    from jury_cli.runs import cancel_run

    cancel_run(settings, slug, WHO)
    return f"cancelling {slug}"


def no_fleet(slug: str) -> str:
    return (
        f"resuming from the console needs the fleet's Redis (JURY_REDIS_URL) and workers started with "
        f"`jury worker`; without them run: jury review --resume {slug}"
    )


def resume_refusal(settings: Settings, slug: str, state: str) -> str | None:
    """Why the console will not resume ``slug``, in run state ``state``; None when it will. The API refuses
    with this (409) and the page's button is disabled with it as its title: the one rule of both.

    A converged run has nothing to resume (``jury review --resume`` refuses it too). Without the fleet's
    Redis the console resumes nothing (``resume``). On the fleet, a run that has not ended is still being
    run: its coordinator and the reaper carry it on (an action a lost worker held is handed out again), and
    a resume would only abandon its agents at work; what is resumed is a run that ended without converging
    (human, failed, cancelled)."""
    if state == "converged":
        return f"run {slug} converged: nothing to resume"
    if not settings.redis_url:
        return no_fleet(slug)
    if state not in TERMINAL_STATES:
        return (
            f"run {slug} is still running ({state}): the fleet carries it on; only a run that ended "
            "without converging (human, failed, cancelled) is resumed"
        )
    return None


def resume(settings: Settings, slug: str) -> str:
    """``jury review --resume SLUG --detach``, through the same service (``orchestrator.start.start_run``):
    the run's workers are the fleet's, so it needs the shared Redis (a console cannot keep an embedded Redis
    and local workers for a run it does not follow). The API checks ``resume_refusal`` first."""
    if not settings.redis_url:
        raise UsageError(no_fleet(slug))
    from jury_cli.backend import shared_store
    from orchestrator.start import StartRequest, start_run
    from orchestrator.store.files import FileStore, mirror
    from workers.runtime.app import make_app
    from workers.runtime.wake import celery_kick

    store = shared_store(settings.redis_url)
    files = FileStore(settings.dir)
    try:
        started = start_run(
            store,
            StartRequest(slug, resume=True),
            celery_kick(make_app(settings), store, settings.reap_after),
            state_dir=settings.dir,
            claim_in=files,
            recorded=lambda run: mirror(store, files, run),  # as the CLI: the files record first
            forge_hosts=settings.forge_hosts,
        )
    finally:
        store.close()
    if started.outcome != "resumed":
        raise UsageError(started.refusal)
    return f"resumed {slug}"


def publish(settings: Settings, slug: str) -> str:
    """``jury publish SLUG``: the ended run's review and ``jury`` check on its PR, updated in place when it
    published before; the outcome is the ``run.published`` event, in the live log and the files record."""
    from workers.runtime.publish import publish_named

    event = publish_named(settings.dir, settings.redis_url, slug)
    if not event.ok:
        raise PublishFailed(f"publishing {slug} failed: {event.error}")
    where = f"{event.forge} {event.repo}#{event.number}" if event.repo else "its PR"
    return f"published {slug} to {where}: check {event.conclusion}"


ACTIONS: dict[str, Callable[[Settings, str], str]] = {"cancel": cancel, "resume": resume, "publish": publish}
