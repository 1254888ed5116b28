"""What a schedule's firing does, bound into the fleet's scheduler (``workers.fleet.scheduler.FIRINGS``):
``review`` sweeps the schedule's repositories onto the fleet, ``verify`` re-runs the accepted findings'
regression tests on the trunk. They live in the runtime because they start work (runs, Celery messages),
which the fleet's scheduler only times; the Celery app imports this module, so every worker and beat
process has them bound.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.config import Settings
from orchestrator.errors import UsageError
from workers.fleet.scheduler import FIRINGS, Firing
from workers.fleet.sweep import SweepFilters, SweepOptions, SweepReport, sweep
from workers.runtime.wake import celery_kick
from workers.verification.reverify import VerifyReport

__all__ = ["fire_review", "fire_verify", "sweep_fleet", "verify_outcome"]


def fire_review(firing: Firing) -> str:
    """A review sweep of the schedule's repositories onto the fleet (``workers.fleet.sweep``), as ``jury
    sweep`` with the schedule's filters and options would: one run per matching open PR whose head has
    none."""
    from orchestrator.start import RunOptions

    s = firing.schedule
    options = RunOptions(
        reviewers=",".join(s.reviewers) if s.reviewers else None,
        judge=s.judge,
        rounds=s.rounds,
        budget=s.budget,
        config=firing.config_file,
        publish=s.publish,
        push=s.push,
    )
    report = sweep_fleet(
        firing.settings,
        s.repos,
        SweepFilters(labels=s.labels, base=s.base, include_drafts=s.include_drafts),
        SweepOptions(run=options, retry=s.retry),
    )
    line = report.summary()
    errors = report.having("error")
    if errors:
        line += f"; {errors[0].repo}{f'#{errors[0].number}' if errors[0].number else ''}: {errors[0].reason}"
    return line


def fire_verify(firing: Firing) -> str:
    """``jury verify`` of the schedule's repositories on its trunk (``workers.verification.reverify``): the
    accepted findings' regression tests re-run, ``verify.ran`` recorded on their runs. A regression is what
    the firing found, not a failure to fire: the outcome leads with it."""
    from workers.verification.reverify import reverify

    return verify_outcome(reverify(firing.settings, firing.schedule.repos, firing.schedule.trunk))


def verify_outcome(report: VerifyReport) -> str:
    """A verify firing's report in one line, its regressions first (finding, run, commit range)."""
    counts = {
        status: sum(1 for r in report.rows if r.status == status) for status in ("passed", "failed", "error")
    }
    line = (
        f"{len(report.rows)} regression test(s) of {len(report.runs)} run(s) on trunk: "
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['error']} could not run"
    )
    if report.notes:
        line += f"; {len(report.notes)} not re-verified: {report.notes[0]}"
    if report.regressions:
        named = ", ".join(f"{r.finding} of {r.slug} ({r.range})" for r in report.regressions)
        line = f"{len(report.regressions)} REGRESSION(S): {named}; {line}"
    return line


def sweep_fleet(
    settings: Settings,
    repos: Sequence[str],
    filters: SweepFilters,
    options: SweepOptions,
    *,
    dry_run: bool = False,
) -> SweepReport:
    """``sweep`` onto the fleet of ``JURY_REDIS_URL`` (the scheduler's firings): its store, its broker, and
    the listings' ETags kept in it (``workers.fleet.forge_cache``), so the next firing asks "changed
    since?"."""
    from orchestrator.store.redis import from_url
    from workers.fleet.forge_cache import fleet_etag_cache
    from workers.runtime.app import make_app

    if not settings.redis_url:
        raise UsageError("a sweep onto the fleet needs JURY_REDIS_URL")
    store = from_url(settings.redis_url)
    try:
        return sweep(
            settings,
            repos,
            filters,
            options,
            store=store,
            kick=celery_kick(make_app(settings), store, settings.reap_after),
            dry_run=dry_run,
            etag_cache=fleet_etag_cache(store),
        )
    finally:
        store.close()


FIRINGS.update(review=fire_review, verify=fire_verify)
