"""The ``jury`` Typer app: every command registered in one place, and ``main``, which turns Jury's errors
and click's usage errors into a message and an exit code."""

from __future__ import annotations

import sys
from typing import Any

import typer

from jury_cli import fetch, host, metrics, publish, refute, review, runs, schedules, scrub, sweep, verify
from jury_cli.context import err
from jury_cli.web.command import web
from orchestrator.errors import JuryError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts name TOML tables ([sandbox], [[schedules]]): not markup
    help="Jury: a code jury of AI agents.",
)
app.command()(review.review)
app.command()(review.demo)
app.command()(sweep.sweep)
app.command()(runs.runs)
app.command()(runs.show)
app.command()(host.agents)
app.command()(runs.cancel)
app.command()(fetch.fetch)
app.command()(refute.refute)
app.command()(host.worker)
app.command()(host.doctor)
app.command()(schedules.scheduler)
app.command()(schedules.schedules)
app.command()(metrics.metrics)
app.command()(publish.publish)
app.command()(verify.verify)
app.command()(scrub.scrub)
app.command()(web)


def usage_error_types() -> tuple[type[Any], ...]:
    """The classes of click's usage errors: typer may vendor its own click, so both are looked up.

    ``typer.BadParameter`` derives from the ``ClickException`` that typer really raises, whichever
    click that is; the standalone ``click`` package's class is added when it is installed.
    """
    found = {cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "ClickException"}
    try:
        import click

        found.add(click.ClickException)
    except ImportError:
        pass
    return tuple(found)


def main() -> None:
    from workers.supervise import write_privately

    write_privately()  # a run's prompts and agents' output, and the workers this starts, 0600
    try:
        code = app(prog_name="jury", standalone_mode=False)  # click returns the code of a typer.Exit here
    except JuryError as exc:
        err.print(f"jury: {exc}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        err.print("jury: interrupted")
        sys.exit(130)
    except usage_error_types() as exc:
        exc.show()
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)
