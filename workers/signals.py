"""Runs as refuter signals: which command runs are a test, lint, typecheck or build exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.refute.commands import classify_command
from orchestrator.refute.signals import Signal, SignalKind, SignalSource

if TYPE_CHECKING:
    from workers.verify import CommandRun

__all__ = ["signals_of"]

_CHECK_KINDS: dict[str, SignalKind] = {
    "test": "test",
    "typecheck": "typecheck",
    "lint": "lint",
    "build": "build",
}


def signals_of(runs: list[CommandRun], source: SignalSource) -> list[Signal]:
    """The runs as refuter signals: a run's kind is its command's, else (a declared check) its name's
    (``test``, ``lint`` ...). A plain program run is no signal, even in verification."""
    out: list[Signal] = []
    for run in runs:
        kind = classify_command(run.command)
        if kind is None and run.check is not None:
            kind = _CHECK_KINDS.get(run.check.lower())
        if kind is None:
            continue
        out.append(
            Signal(
                kind=kind,
                command=run.command,
                exit_code=run.exit_code,
                source=source,
                output_tail=run.output_tail,
                tree=run.tree if run.sha is None else f"{run.tree} {run.sha[:12]}",
            )
        )
    return out
