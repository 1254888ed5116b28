"""``jury scheduler`` (fire the operator's ``[[schedules]]``; run several, one firing per slot) and
``jury schedules`` (list them with their last and next firing)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from jury_cli.context import DirOpt, cells, err, out, settings_for
from orchestrator.config import load_schedules, operator_config_file
from orchestrator.errors import JuryError, UsageError
from orchestrator.schedules import NEXT_SHOWN, Schedule, next_slots

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="The operator's config file, with its [[schedules]].")
]


def _schedules(config: Path | None, dir_: Path | None) -> tuple[Any, Path | None, list[Schedule]]:
    settings = settings_for(dir_)
    path = operator_config_file(settings, config)
    return settings, path, load_schedules(path)


def scheduler(config: ConfigOpt = None, dir: DirOpt = None) -> None:
    """Fire the [[schedules]] of the operator's config against JURY_REDIS_URL until stopped (SIGTERM,
    Ctrl-C). Run several for a fleet that survives a host: each slot is fired once."""
    from orchestrator import logs
    from workers.fleet.scheduler import run_scheduler, store_for
    from workers.runtime import firings  # noqa: F401  (binds what each kind of schedule does)

    settings, path, schedules = _schedules(config, dir)
    if not settings.redis_url:
        raise UsageError(
            "set JURY_REDIS_URL to the fleet's Redis (e.g. redis://host:6379/0) to run a scheduler"
        )
    if not schedules:
        where = str(path) if path else f"{settings.dir / 'config.toml'} (not found)"
        raise UsageError(f"no [[schedules]] in the operator's config {where}: nothing to fire")
    logs.configure(settings.log_level, settings.log_json)  # a service: its log at the configured level
    store = store_for(settings)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    err.print(f"jury scheduler: {len(schedules)} schedule(s) from {path}", markup=False, highlight=False)
    now = time.time()
    for s in schedules:  # what each cron means, as the operator adds it: its next firings
        err.print(f"  {s.name} ({s.cron_text()}): next {next_firings(s, now, ', ')}", markup=False)
    run_scheduler(settings, schedules, stop, config_file=path, store=store)


def next_firings(schedule: Schedule, now: float, sep: str) -> str:
    """The schedule's next ``NEXT_SHOWN`` firings, as people read them: what its cron means."""
    from workers.fleet.scheduler import slot_time

    return sep.join(slot_time(slot) for slot in next_slots(schedule, now)) or "never again"


def schedules(config: ConfigOpt = None, dir: DirOpt = None) -> None:
    """The [[schedules]] of the operator's config: kind, cron, repositories, last firing (from the
    fleet's Redis) and the next three firings."""
    from workers.fleet.scheduler import FiringRecord, slot_time, store_for

    settings, path, found = _schedules(config, dir)
    if not found:
        where = str(path) if path else f"{settings.dir / 'config.toml'} (not found)"
        out.print(f"no [[schedules]] in {where}", markup=False)
        return
    lasts: dict[str, FiringRecord | None] = {}
    unknown = ""
    if settings.redis_url:
        try:
            store = store_for(settings)
            lasts = {s.name: store.last(s.name) for s in found}
        except JuryError as exc:
            unknown = f"last firings unknown: {exc}"
    else:
        unknown = "last firings unknown: JURY_REDIS_URL is not set (they are kept in the fleet's Redis)"
    now = time.time()
    table = Table(box=None, header_style="bold")
    for col in ("schedule", "kind", "cron", "repos", "last firing", f"next {NEXT_SHOWN} firings"):
        table.add_column(col, overflow="fold")  # a long path or outcome wraps in its cell, never cut
    for s in found:
        last = lasts.get(s.name)
        if last is None:
            shown = "?" if unknown else "never"
        else:
            how = "ok" if last.ok else "FAILED"
            shown = f"{slot_time(last.slot)} {how} by {last.by}: {last.outcome}"
        table.add_row(
            *cells(s.name, s.kind, s.cron_text(), ", ".join(s.repos), shown, next_firings(s, now, "\n"))
        )
    out.print(table)
    if unknown:
        err.print(f"note: {unknown}", markup=False, highlight=False)
