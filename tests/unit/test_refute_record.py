"""The refutation record: its three states, and the one type from the event to ``run.json`` and
``refutations.jsonl`` (orchestrator.refute.record, the refutation events of orchestrator.domain, the fold)."""

from __future__ import annotations

import pytest

from orchestrator.refute.record import RefutationRecord
from orchestrator.refute.signals import Signal
from orchestrator.refute.verdicts import ParsedRefutation, parse_refutation


def sig(kind: str = "test", exit_code: int | None = 1, command: str = "pytest -q") -> Signal:
    return Signal(kind=kind, command=command, exit_code=exit_code, source="verification")  # type: ignore[arg-type]


# --- records ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "asked", "ran", "ok", "outcome", "source"),
    [
        (RefutationRecord.not_asked(), False, False, None, None, None),
        (RefutationRecord.skipped("no signal"), True, False, None, None, None),
        (
            RefutationRecord.from_verdict(ParsedRefutation(outcome="refuted", reason="x" * 20)),
            True,
            True,
            False,
            "refuted",
            "refuter",
        ),
        (
            RefutationRecord.from_verdict(ParsedRefutation(outcome="not_refuted", reason="checked")),
            True,
            True,
            True,
            "not_refuted",
            "refuter",
        ),
        (
            RefutationRecord.from_verdict(ParsedRefutation(outcome="unclear", reason="no verdict")),
            True,
            True,
            None,
            "unclear",
            "refuter",
        ),
        (
            RefutationRecord.from_verification(False, "the test passes without the fix"),
            True,
            True,
            False,
            "refuted",
            "verification",
        ),
        (
            RefutationRecord.from_verification(True, "verified"),
            True,
            True,
            True,
            "not_refuted",
            "verification",
        ),
    ],
)
def test_refutation_record_states(
    record: RefutationRecord, asked: bool, ran: bool, ok: bool | None, outcome: str | None, source: str | None
) -> None:
    assert (record.asked, record.ran, record.ok, record.outcome, record.source) == (
        asked,
        ran,
        ok,
        outcome,
        source,
    )
    if not record.asked:
        assert record.skipped_reason is None and record.reason is None
    if record.asked and not record.ran:
        assert record.skipped_reason == "no signal" and record.outcome is None


def test_refutation_record_keeps_unknown_cost_unknown() -> None:
    s = sig()
    rec = RefutationRecord.from_verdict(
        parse_refutation("NOT REFUTED: ran the test"),
        reviewer_model="claude-sonnet-4",
        reviewer_agent="claude",
        independent=True,
        signal=s,
    )
    assert rec.cost_usd is None and rec.signal == s and rec.independent is True
    assert RefutationRecord.from_verification(True, "ok").cost_usd == 0.0
    assert RefutationRecord.skipped("already failed verification", signal=s).signal == s
    back = RefutationRecord.model_validate_json(rec.model_dump_json())
    assert back == rec
