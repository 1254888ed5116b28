"""What every command shares: the consoles, the ``--dir`` option and the settings it yields."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from orchestrator import logs
from orchestrator.config import Settings, load_settings

out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, soft_wrap=True)
DirOpt = Annotated[Path | None, typer.Option("--dir", help="State directory (default $JURY_DIR or ~/.jury).")]


def settings_for(dir_: Path | None) -> Settings:
    settings = load_settings()
    if dir_ is not None:
        settings = settings.model_copy(update={"dir": dir_.expanduser().resolve()})
    logs.configure(settings.log_level if os.environ.get("JURY_LOG_LEVEL") else "WARNING", settings.log_json)
    return settings
