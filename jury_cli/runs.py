"""Reading and stopping runs: ``jury runs``, ``jury show``, ``jury cancel``.

What a command needs beyond its options is imported when it runs: ``jury runs --help`` imports none of the
stores, the domain models or the broker (tests/unit/test_cli_startup.py)."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from jury_cli import context
from jury_cli.context import DirOpt, settings_for
from orchestrator.errors import UsageError

if TYPE_CHECKING:
    from orchestrator.config import Settings


runs_app = typer.Typer(
    help="List runs: slug, state, rounds, findings, open.",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@runs_app.callback(invoke_without_command=True)
def runs(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, max=500, help="Runs a page lists.")] = 50,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="Start after this run: the cursor the last page printed.")
    ] = None,
    state: Annotated[
        str | None, typer.Option("--state", help="Only runs in this state (converged ...).")
    ] = None,
    repo: Annotated[
        str | None, typer.Option("--repo", help="Only runs of this repository (owner/name).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the page and the next cursor as JSON.")
    ] = False,
    dir: DirOpt = None,
) -> None:
    """List runs, newest first, a page at a time: slug, state, rounds, findings, open. Ended runs are
    listed from their summaries, live ones folded (``orchestrator.listing``)."""
    if ctx.invoked_subcommand is not None:
        return
    from jury_cli.backend import reading_store
    from orchestrator.listing import list_runs
    from orchestrator.spec import TERMINAL_STATES

    settings = settings_for(dir)
    page = list_runs(reading_store(settings), limit, cursor, state, repo)
    if as_json:
        doc = {
            "runs": [r.model_dump(mode="json") for r in page.runs],
            "skipped": [{"slug": slug, "reason": why} for slug, why in page.skipped],
            "next": page.next,
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    if not page.runs and not page.skipped:
        context.out.print(
            "no runs yet" if cursor is None and not (state or repo) else "no runs", markup=False
        )
    running = running_here(settings)
    for r in page.runs:
        stopped = running is not None and r.state not in TERMINAL_STATES and r.slug not in running
        context.out.print(
            f"{r.slug}  {r.state}  rounds={r.rounds}  findings={r.total_findings}  open={r.open}"
            + ("  (not running on this machine)" if stopped else ""),
            markup=False,
        )
    for slug, why in page.skipped:
        context.out.print(f"{slug}  skipped: {why}", markup=False)
    if page.next is not None:
        context.out.print(f"more: jury runs --cursor {page.next}", markup=False)


@runs_app.command("backfill")
def backfill(dir: DirOpt = None) -> None:
    """Write the summary of every ended run that has none (runs from before summaries); idempotent."""
    from jury_cli.backend import reading_store
    from orchestrator.listing import backfill as fill

    done = fill(reading_store(settings_for(dir)))
    context.out.print(
        f"summaries written: {done.written}, already there: {done.kept}, runs not ended: {done.live}, "
        f"unreadable: {len(done.unreadable)}",
        markup=False,
    )
    for slug, why in done.unreadable:
        context.out.print(f"{slug}  unreadable: {why}", markup=False)


def running_here(settings: Settings) -> set[str] | None:
    """Without the fleet's Redis, the runs that a ``jury review`` on this machine runs now (each in its
    embedded Redis); None with the fleet's (its runs are the fleet's to run). A run of the files record
    that has not ended and is in none of them stopped with its command (killed, the machine restarted)."""
    if settings.redis_url:
        return None
    return {slug for _, slugs in embedded_runs(settings) for slug in slugs}


def embedded_runs(settings: Settings) -> list[tuple[str, list[str]]]:
    """Each embedded Redis that a command on ``settings.dir`` runs now: its URL and the runs it holds (one
    whose command is stopping holds none)."""
    from orchestrator.errors import StoreError
    from orchestrator.store.redis import from_url as redis_store
    from workers.runtime.embedded import live_urls

    found = []
    for url in live_urls(settings.dir):
        store = redis_store(url)
        try:
            found.append((url, store.runs()))
        except StoreError:
            found.append((url, []))
        finally:
            store.close()
    return found


def show(
    slug: str,
    as_json: Annotated[bool, typer.Option("--json", help="Print the folded run state as JSON.")] = False,
    dir: DirOpt = None,
) -> None:
    """Show one run."""
    from jury_cli.backend import reading_store
    from jury_cli.progress import summary
    from orchestrator.fold import tick
    from orchestrator.run_reader import fold_named
    from orchestrator.spec import TERMINAL_STATES
    from orchestrator.store.base import LiveStore

    settings = settings_for(dir)
    store = reading_store(settings)
    s = fold_named(store, slug, settings.dir if settings.redis_url else None)  # gone: exit 1
    if isinstance(store, LiveStore):  # a running agent's latest liveness tick is kept beside the log
        for t in store.alive(slug):
            tick(s, t)
    if as_json:
        sys.stdout.write(json.dumps(s.wire(), indent=2) + "\n")
        return
    record = settings.dir / "runs" / slug  # this host's files record, if it coordinated or started the run
    summary(context.out, s, where=str(record) if record.is_dir() else None)
    running = running_here(settings)
    if running is not None and s.state not in TERMINAL_STATES and slug not in running:
        context.out.print(
            f"  not running on this machine: no `jury review` here runs it now. Continue it with "
            f"`jury review --resume {slug}`; a run of the fleet shows live with JURY_REDIS_URL set",
            markup=False,
        )


def cancel(slug: str, dir: DirOpt = None) -> None:
    """Cancel a run: its running agents are killed and it ends ``cancelled``."""
    cancel_run(settings_for(dir), slug, os.environ.get("USER", "user"))
    context.out.print(f"cancelling {slug}", markup=False)


def embedded_holding(settings: Settings, slug: str) -> Settings:
    """``settings`` on the embedded Redis (of a command running on ``settings.dir``) that holds ``slug``;
    unchanged when none does."""
    for url, slugs in embedded_runs(settings):
        if slug in slugs:
            return settings.model_copy(update={"redis_url": url})
    return settings


def cancel_run(settings: Settings, slug: str, who: str) -> None:
    """``orchestrator.cancel.cancel_run`` of the run on the Redis that holds it, its coordinator woken
    (``jury cancel``, the console): a run that is not there or has ended is a UsageError."""
    from orchestrator.store.base import check_slug

    check_slug(slug)
    if not settings.redis_url:  # a run of a `jury review` on this machine: the embedded Redis that holds it
        settings = embedded_holding(settings, slug)
    if not settings.redis_url:
        raise UsageError(
            "no Redis to reach the run through: set JURY_REDIS_URL, or cancel while the "
            "run's `jury review` is running on this machine"
        )
    from jury_cli.backend import shared_store
    from orchestrator.cancel import cancel_run as cancel
    from workers.runtime.app import make_app
    from workers.runtime.wake import celery_kick

    store = shared_store(settings.redis_url)
    wake = celery_kick(make_app(settings), store, settings.reap_after)
    done = cancel(store, slug, who=who, wake=wake)
    if done.outcome == "missing":
        raise UsageError(f"no run named {slug} (see `jury runs`)")
    if done.outcome == "ended":
        raise UsageError(f"run {slug} already ended ({done.state}): nothing to cancel")
