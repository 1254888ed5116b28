"""``jury sweep``: a run for every matching open PR of the repositories named, enqueued from this one
process (``workers.fleet.sweep``), then followed until they end unless ``--detach`` or ``--dry-run``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from jury_cli.backend import Backend, backend
from jury_cli.context import DirOpt, RefuteOpt, RefuteRejectionsOpt, RefuterOpt, cells, err, out, settings_for
from orchestrator.errors import UsageError
from orchestrator.spec import TERMINAL_STATES
from orchestrator.start import RunOptions

if TYPE_CHECKING:
    from orchestrator.config import Settings
    from workers.fleet.sweep import SweepFilters, SweepOptions, SweepReport

REPOS_HELP = (
    "Repositories: OWNER/REPO (GitHub), GROUP/SUB/PROJECT (GitLab), github:OWNER/REPO, "
    "gitlab:GROUP/PROJECT, or their https:// URLs."
)


def table(report: SweepReport) -> Table:
    t = Table(box=None, header_style="bold")
    for name in ("repository", "PR", "head", "outcome", "run", "why"):
        t.add_column(name, overflow="fold")
    for r in report.rows:
        t.add_row(
            *cells(
                r.repo,
                f"#{r.number}" if r.number is not None else "-",
                (r.head or "")[:12],
                r.outcome,
                r.slug or "",
                r.reason,
            )
        )
    return t


def tally(states: dict[str, str | None]) -> str:
    """The runs' progress in a line: how many are queued, running and done."""
    queued = sum(state == "queued" for state in states.values())
    done = sum(state is None or state in TERMINAL_STATES for state in states.values())
    return f"runs: {queued} queued, {len(states) - queued - done} running, {done} done of {len(states)}"


def follow_all(
    b: Backend, slugs: list[str], publish: bool, console: Console | None = None
) -> dict[str, str | None]:
    """Wait until every run ends (and, with ``publish``, has published its end); say each one's end as
    it comes. On a terminal, a live line below says how many are queued, running and done."""
    from rich.live import Live

    from orchestrator.decide import awaiting_publish
    from orchestrator.run_reader import fold_run

    console = console or out
    left, ended = set(slugs), {}
    latest: dict[str, str | None] = dict.fromkeys(slugs, "queued")
    began = time.monotonic()
    status = Live(console=console, refresh_per_second=4, transient=True) if console.is_terminal else None
    if status is not None:
        status.start()
    try:
        while left:
            states = b.store.run_states(sorted(left))
            latest |= states
            for slug, state in states.items():
                if state in TERMINAL_STATES and publish and awaiting_publish(fold_run(b.store, slug)):
                    latest[slug] = "publishing"  # ended, its publish still to come: not done
                    continue
                if state is None or state in TERMINAL_STATES:
                    ended[slug] = state
                    left.discard(slug)
                    if state is not None:
                        b.sync(slug)
                    console.print(f"{slug}  {state or 'gone from the store'}", markup=False)
            if status is not None:
                status.update(Text(f"{tally(latest)}  {time.monotonic() - began:,.0f}s"), refresh=True)
            if left:
                time.sleep(1.0)
    finally:
        if status is not None:
            status.stop()
    return ended


def sweep(
    repos: Annotated[list[str], typer.Argument(help=REPOS_HELP, show_default=False)],
    label: Annotated[
        list[str] | None, typer.Option("--label", help="Only PRs with this label (repeat: all of them).")
    ] = None,
    base: Annotated[str | None, typer.Option(help="Only PRs into this base branch.")] = None,
    include_drafts: Annotated[bool, typer.Option("--include-drafts", help="Draft PRs too.")] = False,
    publish: Annotated[
        bool, typer.Option("--publish", help="Each run publishes itself when it ends.")
    ] = False,
    push: Annotated[
        bool | None,
        typer.Option(
            "--push/--no-push",
            help="Each run pushes its fixes to the PR's repository as the branch jury/SLUG when it "
            "converges (default: the operator's [jury] push, else no).",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be enqueued and skipped; change nothing.")
    ] = False,
    retry: Annotated[
        bool, typer.Option("--retry", help="Run again a head whose run ended human, failed or cancelled.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="The operator's config file (default $JURY_CONFIG, else ~/.jury/config.toml)."
        ),
    ] = None,
    reviewer: Annotated[str | None, typer.Option(help="Reviewers, comma-separated.")] = None,
    judge: Annotated[str | None, typer.Option(help="The judge agent.")] = None,
    rounds: Annotated[int | None, typer.Option(help="Round cap (default 10).")] = None,
    timeout: Annotated[float | None, typer.Option(help="Wall-clock seconds per agent run.")] = None,
    budget: Annotated[float | None, typer.Option(help="USD ceiling per run (default $JURY_BUDGET).")] = None,
    refute: RefuteOpt = True,
    refuter: RefuterOpt = None,
    refute_rejections: RefuteRejectionsOpt = False,
    detach: Annotated[bool, typer.Option(help="Enqueue and return (needs JURY_REDIS_URL).")] = False,
    concurrency: Annotated[int, typer.Option(min=1, help="Local worker concurrency (embedded mode).")] = 4,
    dir: DirOpt = None,
) -> None:
    """Review every matching open PR of some repositories: one run per PR head not reviewed yet."""
    from workers.fleet.sweep import SweepFilters, SweepOptions

    settings = settings_for(dir)
    opts = RunOptions(
        reviewers=reviewer,
        judge=judge,
        rounds=rounds,
        timeout=timeout,
        config=config,
        budget=budget,
        publish=publish,
        push=push,
        refute=refute,
        refuter=refuter,
        refute_rejections=refute_rejections,
    )
    filters = SweepFilters(labels=tuple(label or ()), base=base, include_drafts=include_drafts)
    with backend(settings, concurrency) as b:
        options = SweepOptions(run=opts, retry=retry)
        report = enqueue(settings, b, repos, filters, options, detach=detach, dry_run=dry_run)
        # Nothing to follow (detached, a dry run, or nothing enqueued): the report is final now, and always
        # printed, as JSON too; a followed sweep's JSON waits for the runs' ends.
        code = show_report(report, as_json=as_json, final=detach or dry_run or not report.enqueued)
        if detach or dry_run or not report.enqueued:
            raise typer.Exit(code)
        try:
            ended = follow_all(b, report.enqueued, publish)
        except KeyboardInterrupt:
            err.print("interrupted; the runs go on in the fleet (see `jury runs`)")
            raise typer.Exit(1) from None
    raise typer.Exit(show_ends(report, ended, code, as_json=as_json))


def enqueue(
    settings: Settings,
    b: Backend,
    repos: list[str],
    filters: SweepFilters,
    options: SweepOptions,
    *,
    detach: bool,
    dry_run: bool,
) -> SweepReport:
    """The sweep itself (``workers.fleet.sweep``) onto the backend's store and broker."""
    from workers.fleet.forge_cache import fleet_etag_cache
    from workers.fleet.sweep import sweep as run_sweep

    if detach and b.embedded:
        raise UsageError("--detach needs JURY_REDIS_URL and workers started with `jury worker`")
    if b.embedded and not dry_run:
        err.print(
            "note: without JURY_REDIS_URL this sweep's Redis lasts this command only, so the next sweep "
            "does not know which heads it reviewed and reviews them again",
            markup=False,
        )
    return run_sweep(
        settings,
        repos,
        filters,
        options,
        store=b.store,
        kick=b.waker(),  # workers.runtime.wake, deduplicated by the store's marks
        dry_run=dry_run,
        # The fleet's Redis keeps the listings' ETags for the next sweep; an embedded one would not.
        etag_cache=fleet_etag_cache(b.store) if settings.redis_url else None,
        # A private Redis is no one else's: slugs are claimed in the state directory too (a review
        # or another sweep on it).
        claim_in=b.files if b.embedded else None,
    )


def show_report(report: SweepReport, *, as_json: bool, final: bool) -> int:
    """Print what the sweep did (as JSON only when nothing is followed after it: ``final``); the exit code
    so far: 1 when a PR could not be enqueued."""
    if as_json and final:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    elif not as_json:
        out.print(table(report))
        out.print(report.summary(), markup=False)
    return 1 if report.having("error") else 0


def show_ends(report: SweepReport, ended: dict[str, str | None], code: int, *, as_json: bool) -> int:
    """Each followed run's end added to its row (printed as JSON when asked); the exit code: 1 unless every
    run converged."""
    for row in report.rows:
        if row.slug in ended and row.outcome == "enqueued":
            row.reason = f"{row.reason}; ended {ended[row.slug] or 'gone from the store'}"
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    return 1 if code or any(state != "converged" for state in ended.values()) else 0
