"""The ``jury`` Typer app: every command registered in one place (``COMMANDS``), and ``main``, which turns
Jury's errors and click's usage errors into a message and an exit code.

A command's module is imported only when that command runs (or its ``--help`` is asked): importing them
all first cost every command, ``jury --help`` too, most of a second (Celery, Redis, httpx, the domain
models). ``jury --help`` lists the commands from the table, without importing any of them; a test
(tests/unit/test_cli_startup.py) keeps each listed line equal to its command's own docstring.
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any

import typer
from typer import _click as click  # the click typer runs on: its own copy (typer is pinned, <0.30)
from typer.core import TyperCommand, TyperGroup, TyperOption

from orchestrator.errors import JuryError
from orchestrator.private_files import write_privately

HELP = "Jury: a code jury of AI agents."
# Each command: its name -> (the module, the function in it, the first line of that function's
# docstring, which `jury --help` lists); the "function" may be a ``typer.Typer`` of subcommands, and the
# line its help. One more command is one more line here, in the order `jury --help` lists them.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "review": ("jury_cli.review", "review", "Review a branch or a PR with a jury of agents."),
    "demo": (
        "jury_cli.review",
        "demo",
        "Review a small sample repository with bundled scripted agents (no real agents, no Redis needed).",
    ),
    "sweep": (
        "jury_cli.sweep",
        "sweep",
        "Review every matching open PR of some repositories: one run per PR head not reviewed yet.",
    ),
    "runs": ("jury_cli.runs", "runs_app", "List runs: slug, state, rounds, findings, open."),
    "show": ("jury_cli.runs", "show", "Show one run."),
    "agents": (
        "jury_cli.host",
        "agents",
        "Which catalog agents are installed, with their roles and install hints.",
    ),
    "cancel": (
        "jury_cli.runs",
        "cancel",
        "Cancel a run: its running agents are killed and it ends ``cancelled``.",
    ),
    "fetch": (
        "jury_cli.fetch",
        "fetch",
        "Make each run's fixes the local branch jury/SLUG, rebuilt from the fleet's store and checked.",
    ),
    "refute": ("jury_cli.refute", "refute", "The second opinion on its own."),
    "worker": ("jury_cli.host", "worker", "Run a worker against the shared Redis of JURY_REDIS_URL."),
    "doctor": (
        "jury_cli.host",
        "doctor",
        "Whether this machine can run Jury: git, Redis, bubblewrap, user namespaces, and the sandbox "
        "with the operator's [sandbox] settings.",
    ),
    "scheduler": (
        "jury_cli.schedules",
        "scheduler",
        "Fire the [[schedules]] of the operator's config against JURY_REDIS_URL until stopped "
        "(SIGTERM, Ctrl-C).",
    ),
    "schedules": (
        "jury_cli.schedules",
        "schedules",
        "The [[schedules]] of the operator's config: kind, cron, repositories, last firing (from the "
        "fleet's Redis) and the next three firings.",
    ),
    "metrics": (
        "jury_cli.metrics",
        "metrics",
        "The fleet's metrics in Prometheus' text format: runs by state, queue depths, tasks in flight "
        "and spend, read from JURY_REDIS_URL (spend and run counts as `jury show` computes them).",
    ),
    "publish": (
        "jury_cli.publish",
        "publish",
        "Publish an ended run to its PR: one review with inline comments, and the `jury` check.",
    ),
    "verify": (
        "jury_cli.verify",
        "verify",
        "Re-run the regression tests of accepted findings of converged runs on the current trunk.",
    ),
    "scrub": (
        "jury_cli.scrub",
        "scrub",
        "Redact secrets from run records written before; list published comments that still hold one.",
    ),
    "web": (
        "jury_cli.web.command",
        "web",
        "Serve the console: runs, their timeline, findings and spend, live; the fleet; cancel and resume.",
    ),
    "dev": (
        "jury_cli.devforge.command",
        "dev",
        "Try Jury offline: a local fake forge to sweep, and the bundled scripted agents.",
    ),
    "version": ("jury_cli.app", "version", "Print Jury's version."),
}


def version() -> None:
    """Print Jury's version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        print(f"jury {installed('jury-review')}")
    except PackageNotFoundError:  # run from a source tree that was never installed
        print("jury (not installed)")


class UnsetHelpIsFalse:
    """``--help`` not given is False, as a flag is. Typer leaves it None, and coerces every parameter
    value that is not a bool through pydantic: importing it was most of ``jury version``'s start-up."""

    def get_help_option(self, ctx: click.Context) -> TyperOption | None:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None and option.default is None:
            option.default = False
        return option  # type: ignore[no-any-return]


class Command(UnsetHelpIsFalse, TyperCommand):
    """A command of ``COMMANDS``, as typer builds it."""


def load_command(name: str) -> click.Command:
    """The click command ``name`` of ``COMMANDS``, its module imported now."""
    module, function, _ = COMMANDS[name]
    found = getattr(import_module(module), function)
    if isinstance(found, typer.Typer):  # a group of subcommands (``jury dev``)
        return typer.main.get_command(found)
    one = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    one.command(name=name, cls=Command)(found)
    return typer.main.get_command(one)


class LazyCommands(UnsetHelpIsFalse, TyperGroup):
    """The commands of ``COMMANDS``, each built (its module imported) only when it is the one run."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``jury --help``, from the table: as click writes it, importing nothing."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [
            (name, click.utils.make_default_short_help(line, limit)) for name, (*_, line) in COMMANDS.items()
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    cls=LazyCommands,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts name TOML tables ([sandbox], [[schedules]]): not markup
    help=HELP,
)


@app.callback()
def jury() -> None:
    """Jury: a code jury of AI agents."""


def usage_error_types() -> tuple[type[Any], ...]:
    """The classes of click's usage errors: typer may vendor its own click, so both are looked up.

    ``typer.BadParameter`` derives from the ``ClickException`` that typer really raises, whichever
    click that is; the standalone ``click`` package's class is added when it is installed.
    """
    found = {cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "ClickException"}
    try:
        import click as standalone

        found.add(standalone.ClickException)
    except ImportError:
        pass
    return tuple(found)


def say(message: str) -> None:
    """A one-line failure on stderr, as plain text (the consoles are imported only when needed)."""
    from jury_cli.context import err

    err.print(message, markup=False, highlight=False)


def main() -> None:
    write_privately()  # a run's prompts and agents' output, and the workers this starts: 0600
    try:
        code = app(prog_name="jury", standalone_mode=False)  # click returns the code of a typer.Exit here
    except JuryError as exc:
        say(f"jury: {exc}")
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        say("jury: interrupted")
        sys.exit(130)
    except usage_error_types() as exc:
        exc.show()
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)
