"""The refutation record: the second opinion's one type. Jobs build it, the ``refute.verdict`` /
``refute.skipped`` event carries it (``orchestrator.domain``), the fold stores it in ``run.json``, and each
run's ``refutations.jsonl`` is a line per record (``log_line``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from orchestrator.refute.signals import Signal
from orchestrator.refute.verdicts import ParsedRefutation, RefuteOutcome

__all__ = ["RefutationRecord", "RefuteSource"]

RefuteSource = Literal["verification", "refuter"]


class RefutationRecord(BaseModel):
    """The second opinion in machine output, in three states: not asked (``asked`` False); asked but did
    not run (``skipped_reason``); ran (``outcome``, ``ok``, ``reason``, cost, reviewer, independence,
    signal). ``ok`` is True when not refuted, False when refuted, None when unclear or not run."""

    asked: bool
    ran: bool
    skipped_reason: str | None = None
    outcome: RefuteOutcome | None = None
    ok: bool | None = None
    reason: str | None = None
    cost_usd: float | None = None
    reviewer_model: str | None = None
    reviewer_agent: str | None = None
    independent: bool | None = None
    signal: Signal | None = None
    source: RefuteSource | None = None

    @classmethod
    def not_asked(cls) -> RefutationRecord:
        return cls(asked=False, ran=False)

    @classmethod
    def skipped(cls, reason: str, signal: Signal | None = None) -> RefutationRecord:
        """Asked, but did not run (no signal, already failed verification, no independent reviewer ...)."""
        return cls(asked=True, ran=False, skipped_reason=reason, signal=signal)

    @classmethod
    def from_verdict(
        cls,
        verdict: ParsedRefutation,
        *,
        cost_usd: float | None = None,
        reviewer_model: str | None = None,
        reviewer_agent: str | None = None,
        independent: bool | None = None,
        signal: Signal | None = None,
    ) -> RefutationRecord:
        """A refuter's answer; an unknown cost stays None, never 0."""
        ok = {"refuted": False, "not_refuted": True}.get(verdict.outcome)
        return cls(
            asked=True,
            ran=True,
            outcome=verdict.outcome,
            ok=ok,
            reason=verdict.reason,
            cost_usd=cost_usd,
            reviewer_model=reviewer_model,
            reviewer_agent=reviewer_agent,
            independent=independent,
            signal=signal,
            source="refuter",
        )

    @classmethod
    def from_verification(cls, ok: bool, reason: str, signal: Signal | None = None) -> RefutationRecord:
        """Mechanical verification's result: a failure refutes the fix; it costs no model call."""
        return cls(
            asked=True,
            ran=True,
            outcome="not_refuted" if ok else "refuted",
            ok=ok,
            reason=reason,
            cost_usd=0.0,
            signal=signal,
            source="verification",
        )

    @property
    def had_signal(self) -> bool:
        """Whether a signal that ran backs it (what a critique was checked against)."""
        return self.signal is not None and self.signal.ran

    @property
    def changed_answer(self) -> bool:
        """A refutation sends the claim back; anything else leaves it as it was."""
        return self.outcome == "refuted"

    def log_line(self, finding: str | None) -> dict[str, Any]:
        """One line of ``refutations.jsonl``: the whole record (an unknown cost stays null, never 0), the
        finding it is about (None: the converged claim), and what the log is counted by."""
        return {
            "finding": finding,
            **self.model_dump(mode="json"),
            "had_signal": self.had_signal,
            "signal_kind": self.signal.kind if self.signal else None,
            "signal_source": self.signal.source if self.signal else None,
            "changed_answer": self.changed_answer,
        }

    def words(self) -> str:
        """The three states in words, for summaries."""
        if not self.asked:
            return "not asked"
        if not self.ran:
            return f"asked, not run: {self.skipped_reason or self.reason}"
        who = self.reviewer_agent or self.source
        independent = (
            "" if self.independent is None else (", independent" if self.independent else ", NOT independent")
        )
        return f"{self.outcome} by {who}{independent}: {self.reason}"
