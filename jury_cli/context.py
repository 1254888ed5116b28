"""What every command shares: the consoles, the ``--dir`` option and the settings it yields."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # imported when used: a command's --help needs none of them (jury_cli.app)
    from rich.console import Console, RenderableType

    from orchestrator.config import Settings

    out: Console  # made by ``__getattr__`` when first used
    err: Console


def __getattr__(name: str) -> Console:
    """``out`` (stdout) and ``err`` (stderr), each made when first used: rich's console is most of what
    a light command (``jury runs --help``) would import otherwise."""
    if name not in ("out", "err"):  # checked first: the import machinery asks for ``__path__`` and such
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    if name == "out":
        console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
    else:
        console = Console(stderr=True, highlight=False, soft_wrap=True)
    globals()[name] = console
    return console


DirOpt = Annotated[Path | None, typer.Option("--dir", help="State directory (default $JURY_DIR or ~/.jury).")]
# The second opinion's options, the same for `jury review` and the runs `jury sweep` starts.
RefuteOpt = Annotated[bool, typer.Option(help="Give settled claims a second opinion.")]
RefuterOpt = Annotated[str | None, typer.Option(help="The second opinion's agent (default: another family).")]
RefuteRejectionsOpt = Annotated[bool, typer.Option(help="Also try to refute the judge's rejections.")]


def cells(*values: RenderableType) -> list[RenderableType]:
    """A table row's cells with every string as plain text: Rich would read a string cell as markup, and a
    cell's words are often not Jury's (a reviewer's claim, a forge's error, a test id like ``t[/etc]``), so
    ``[/x]`` in one would stop the command with a MarkupError and ``[red]`` would restyle the table."""
    from rich.text import Text

    return [Text(v) if isinstance(v, str) else v for v in values]


def settings_for(dir_: Path | None) -> Settings:
    from orchestrator import logs
    from orchestrator.config import load_settings

    settings = load_settings()
    if dir_ is not None:
        settings = settings.model_copy(update={"dir": dir_.expanduser().resolve()})
    logs.configure(settings.log_level if os.environ.get("JURY_LOG_LEVEL") else "WARNING", settings.log_json)
    return settings
