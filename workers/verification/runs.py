"""One command run on one tree, and which runs are refuter signals (a test, lint, typecheck or build exit
code). Apart from ``verify`` so that what only reads runs (a job's events, the second opinion) need not
import verification whole, and so that the two never import each other."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from orchestrator.refute.commands import classify_command
from orchestrator.refute.signals import Signal, SignalKind, SignalSource

__all__ = ["CommandRun", "Tree", "signals_of"]

Tree = Literal["fixed", "reverted", "final", "head", "stripped", "mutant"]


class CommandRun(BaseModel):
    """One command run on one tree. ``sha``: the commit for "final", the git tree id for fixed/reverted.

    ``exit_code`` is None when the command could not be started (``error`` says why).
    """

    command: str
    tree: Tree
    sha: str | None
    exit_code: int | None
    seconds: float
    output_tail: str
    timed_out: bool = False
    error: str | None = None
    check: str | None = None  # the declared check's name (run_checks)
    ran: str | None = None  # the command line actually run, when Jury added its report options

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None


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
