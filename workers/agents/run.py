"""One finished agent run, whatever its kind: what every seat returns and every job reads; and the one
thing a seat raises, ``RateLimited``."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.transcript import Commands
from workers.isolation.supervise import ProcResult


@dataclass
class AgentRun:
    """One finished agent run: the process outcome, its answer and the session it used.

    ``cost_usd`` is None when unknown (never 0 for unknown); ``model`` is the model that actually
    answered (after any fallback); ``usage`` holds token counts when the runner knows them.
    ``commands`` is what the agent's transcript says of the commands it ran (None: it says nothing), so
    a run whose every command failed is never taken for a clean review. ``tree_untouched`` is True when
    the seat ran the agent where it could not write its worktree (``Jail.tree_read_only``): then nobody
    need ask git what changed there.
    """

    proc: ProcResult
    report: str
    session_id: str | None
    stdout: str
    stderr: str
    argv: list[str]
    cost_usd: float | None = None
    model: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    commands: Commands | None = None
    tree_untouched: bool = False


class RateLimited(Exception):
    """Not a failure but "not now": the agent's model asked it to come back in ``seconds`` (an HTTP 429
    whose Retry-After is longer than a task should sleep in its worker slot, ``SeatRequest.defer_after``),
    or answered 429 without saying when (``seconds`` None: the task's own back-off decides), and no other
    model of the agent could answer instead. The seat raises it, with nothing run to an end; the task
    records no result and puts its action back with a countdown (``run_task``)."""

    def __init__(self, seconds: float | None, note: str) -> None:
        super().__init__(note)
        self.seconds = seconds
        self.note = note
