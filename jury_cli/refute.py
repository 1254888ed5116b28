"""``jury refute``: the second opinion on its own, for any claim (``workers.runtime.second_opinion``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from jury_cli.context import DirOpt, out, settings_for
from orchestrator.config import load_config, operator_config_file
from orchestrator.errors import UsageError


def refute(
    claim: Annotated[str, typer.Option(help="The claim to try to refute.")],
    repo: Annotated[Path, typer.Option(help="The repository the claim is about.")] = Path("."),
    task: Annotated[str | None, typer.Option(help="The task text; commands named in it are signals.")] = None,
    command: Annotated[
        list[str] | None, typer.Option(help="A test, lint, typecheck or build command.")
    ] = None,
    refuter: Annotated[str | None, typer.Option(help="The refuting agent (default: another family).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="The operator's config file.")] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Wall-clock seconds for each command and the agent.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the three-state record as JSON.")] = False,
    dir: DirOpt = None,
) -> None:
    """The second opinion on its own. Exit 1 only on a concrete refutation."""
    from orchestrator.target import checkout_config
    from workers.runtime.second_opinion import second_opinion

    if timeout is not None and timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    settings = settings_for(dir)
    if not repo.is_dir():
        raise UsageError(f"no such directory: {repo}")
    cfg = load_config(checkout_config(repo), operator_config_file(settings, config))
    record = second_opinion(
        settings,
        cfg,
        repo.resolve(),
        claim=claim,
        task=task,
        commands=command or [],
        refuter=refuter,
        timeout=timeout,
    )
    if as_json:
        sys.stdout.write(record.model_dump_json(indent=2) + "\n")
    elif not record.ran:
        out.print(f"not run: {record.skipped_reason}", markup=False)
    else:
        who = f"{record.reviewer_agent} ({record.reviewer_model or 'model unknown'}"
        who += ", independent)" if record.independent else ", NOT independent)"
        out.print(f"{record.outcome}: {record.reason}\n  by {who}", markup=False)
    raise typer.Exit(1 if record.outcome == "refuted" else 0)
