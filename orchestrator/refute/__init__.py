"""The second opinion's pure parts, one room per concern.

- ``signals``: what a signal is (a test, typecheck, lint or build exit code) and the gate (no signal, no
  critique);
- ``commands``: which commands are signals (``classify_command``) and which a task text names;
- ``families``: the one family resolver (``spec_family``), the refuter's choice and its independence;
- ``verdicts``: reading the refuter's ``REFUTED`` / ``NOT REFUTED`` answer;
- ``record``: the refutation record, the one type from the event to ``run.json``.

Nothing here raises on odd input and nothing here runs anything. The public names are re-exported here.
"""

from __future__ import annotations

from orchestrator.refute.commands import classify_command, commands_in_task
from orchestrator.refute.families import (
    AGENT_FAMILIES,
    RefuterChoice,
    agent_family,
    choose_refuter,
    family_of,
    independence,
    refuter_for,
    spec_family,
)
from orchestrator.refute.record import RefutationRecord
from orchestrator.refute.signals import NO_SIGNAL, Gate, Signal, SignalKind, SignalSource, gate
from orchestrator.refute.verdicts import (
    MIN_REFUTATION_REASON,
    ParsedRefutation,
    RefuteOutcome,
    parse_refutation,
)

__all__ = [
    "AGENT_FAMILIES",
    "MIN_REFUTATION_REASON",
    "NO_SIGNAL",
    "Gate",
    "ParsedRefutation",
    "RefutationRecord",
    "RefuteOutcome",
    "RefuterChoice",
    "Signal",
    "SignalKind",
    "SignalSource",
    "agent_family",
    "choose_refuter",
    "classify_command",
    "commands_in_task",
    "family_of",
    "gate",
    "independence",
    "parse_refutation",
    "refuter_for",
    "spec_family",
]
