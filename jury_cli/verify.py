"""``jury verify [OWNER/REPO|PATH...] [--trunk B]``: the regression tests of accepted findings run again on
trunk now (``workers/verification/reverify.py``); a table, and exit 1 when a test that passed at acceptance
fails."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from jury_cli.context import DirOpt, cells, err, out, settings_for

STYLE = {"passed": "green", "failed": "bold red", "error": "yellow"}


def verify(
    repos: Annotated[
        list[str] | None,
        typer.Argument(help="Repositories: local PATHs, OWNER/REPO or forge URLs (default: every run's)."),
    ] = None,
    trunk: Annotated[
        str | None, typer.Option(help="The trunk branch to verify on (default: each run's trunk).")
    ] = None,
    dir: DirOpt = None,
) -> None:
    """Re-run the regression tests of accepted findings of converged runs on the current trunk."""
    from workers.verification.reverify import reverify

    report = reverify(settings_for(dir), repos or [], trunk)
    for note in report.notes:
        err.print(f"jury verify: not re-verified: {note}", markup=False, highlight=False)
    if not report.rows:
        if report.notes:
            err.print(
                f"jury verify: nothing re-verified: {len(report.notes)} run(s) or finding(s) could not be "
                "checked (above); name a trunk that exists (--trunk) or the repositories to check",
                markup=False,
                highlight=False,
            )
        else:
            out.print(
                f"no accepted finding with a regression test in {len(report.runs)} converged run(s)",
                markup=False,
            )
        raise typer.Exit(report.exit_code)
    table = Table(box=None, header_style="bold")
    for col in ("run", "finding", "trunk", "test", "since", "why"):
        table.add_column(col, overflow="fold")
    for r in report.rows:
        table.add_row(
            *cells(
                r.slug,
                f"{r.finding} {r.loc}",
                f"{r.trunk} {(r.trunk_sha or '?')[:12]}",
                Text(r.status, STYLE.get(r.status, "")),
                r.range if r.status != "passed" else "",
                r.problem or "",
            )
        )
    out.print(table)
    passed = sum(1 for r in report.rows if r.status == "passed")
    out.print(f"{passed} of {len(report.rows)} regression test(s) pass on trunk", markup=False)
    for r in report.regressions:
        err.print(
            f"REGRESSION: finding {r.finding} ({r.claim[:120]}) of run {r.slug}: its test "
            f"`{r.command}` passed at acceptance and fails on {r.trunk} now; commits {r.range}",
            markup=False,
            highlight=False,
        )
    raise typer.Exit(report.exit_code)
