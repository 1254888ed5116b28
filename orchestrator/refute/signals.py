"""Signals and the gate: no test, typecheck, lint or build exit code, no critique.

A *signal* is the exit code of such a command (``commands.classify_command`` says which commands are
one); the *gate* opens only when a signal ran, and a closed gate is recorded as skipped, never as a pass.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

__all__ = ["NO_SIGNAL", "Gate", "Signal", "SignalKind", "SignalSource", "gate"]

SignalKind = Literal["test", "typecheck", "lint", "build"]
SignalSource = Literal["verification", "declared", "task"]


class Signal(BaseModel):
    """One external check's result: its kind, the command, its exit code (None: it did not run)."""

    kind: SignalKind
    command: str
    exit_code: int | None = None  # None is left out of the wire form (exclude_none): it reads back as None
    source: SignalSource
    output_tail: str = ""
    tree: str | None = None

    @property
    def ran(self) -> bool:
        """An exit code, and not the shell's "cannot execute" / "not found" (126/127)."""
        return self.exit_code is not None and self.exit_code not in (126, 127)


class Gate(BaseModel):
    """Whether a critique may be asked; ``signals`` are the ones that ran (what it is checked against)."""

    open: bool
    reason: str
    signals: list[Signal]


NO_SIGNAL = "no test, typecheck, lint or build signal: nothing to check a critique against"


def gate(signals: list[Signal]) -> Gate:
    """Open when at least one signal ran (has an exit code); closed, with the reason, otherwise."""
    ran = [s for s in signals if s.ran]
    if ran:
        shown = ", ".join(f"{s.kind} `{s.command}` exit {s.exit_code}" for s in ran[:4])
        more = f" and {len(ran) - 4} more" if len(ran) > 4 else ""
        return Gate(open=True, reason=f"{len(ran)} signal(s): {shown}{more}", signals=ran)
    if signals:
        return Gate(
            open=False,
            reason=f"{NO_SIGNAL} ({len(signals)} named, none ran)",
            signals=[],
        )
    return Gate(open=False, reason=NO_SIGNAL, signals=[])
