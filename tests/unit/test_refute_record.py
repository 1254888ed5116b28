"""The refutation record: its three states, and the one type from the event to ``run.json`` and
``refutations.jsonl`` (orchestrator.refute.record, the refutation events of orchestrator.domain, the fold)."""

from __future__ import annotations

import json

import pytest

from orchestrator.domain import (
    FindingRaised,
    RefuteSkipped,
    RefuteVerdict,
    dump_event,
    parse_event,
    refutation_event,
)
from orchestrator.fold import fold
from orchestrator.refute.record import RefutationRecord
from orchestrator.refute.signals import Signal
from orchestrator.refute.verdicts import ParsedRefutation, parse_refutation
from orchestrator.run_json import run_json


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


# --- one record from the event to run.json --------------------------------------------------------

SIGNAL = Signal(kind="test", command="python -m pytest -q", exit_code=1, source="declared", tree="fixed")
RECORDS = {
    "skipped": RefutationRecord.skipped("no test, typecheck, lint or build signal"),
    "skipped-with-signal": RefutationRecord.skipped("no refuter of another family", signal=SIGNAL),
    "refuted": RefutationRecord.from_verdict(
        ParsedRefutation(outcome="refuted", reason="median([1, 2]) returns 2 on the fixed tree"),
        cost_usd=0.0125,
        reviewer_model="vendorr/critic-1",
        reviewer_agent="critic",
        independent=True,
        signal=SIGNAL,
    ),
    "unclear-unknown-cost": RefutationRecord.from_verdict(
        ParsedRefutation(outcome="unclear", reason="no verdict line"),
        reviewer_agent="critic",
        independent=False,
    ),
    "verification": RefutationRecord.from_verification(False, "the test passes without the fix", SIGNAL),
    "verification-no-signal": RefutationRecord.from_verification(False, "assertion removed"),
}


@pytest.mark.parametrize("record", RECORDS.values(), ids=RECORDS.keys())
def test_the_event_carries_the_record_through_the_wire(record: RefutationRecord) -> None:
    event = refutation_event(record, eid="k:verdict", id="r1-finder-1")
    assert event.t == ("refute.verdict" if record.ran else "refute.skipped")
    back = parse_event(dump_event(event))
    assert isinstance(back, RefuteVerdict | RefuteSkipped)
    assert back.record() == record


def test_a_second_opinion_never_asked_has_no_event() -> None:
    with pytest.raises(ValueError, match="never asked"):
        refutation_event(RefutationRecord.not_asked(), eid="x", id=None)


def test_an_event_written_before_the_record_type_still_folds() -> None:
    line = (
        '{"eid":"k:verdict","ts":"2026-01-01T00:00:00Z","t":"refute.verdict","id":"f1","outcome":"refuted",'
        '"reason":"the test passes without the fix","source":"verification","signal":{"kind":"test",'
        '"command":"python3 -m unittest","exit_code":0,"source":"verification","output_tail":"OK",'
        '"tree":null},"costUsd":0.0}'
    )
    event = parse_event(line)
    assert isinstance(event, RefuteVerdict) and event.signal is not None
    rec = event.record()
    assert (rec.ran, rec.ok, rec.source, rec.cost_usd, rec.signal.command) == (  # type: ignore[union-attr]
        True,
        False,
        "verification",
        0.0,
        "python3 -m unittest",
    )


def raised(fid: str = "f1") -> FindingRaised:
    return FindingRaised(eid=f"raised:{fid}", id=fid, round=1, agent="finder", claim="x", loc="a.py:1")


@pytest.mark.parametrize("record", RECORDS.values(), ids=RECORDS.keys())
def test_the_fold_stores_the_record_and_run_json_shows_it(record: RefutationRecord) -> None:
    on_finding = refutation_event(record, eid="k:1", id="f1")
    on_claim = refutation_event(record, eid="k:2", id=None)
    s = fold([raised(), on_finding, on_claim], slug="s")
    assert s.findings["f1"].refutation == record and s.final_refutation == record
    jury = run_json(s)["jury"]
    shown = record.model_dump(mode="json", exclude_none=True)
    assert jury["findings"]["f1"]["refutation"] == shown and jury["finalCheck"] == shown


def test_a_mechanical_refutation_ran_and_says_so() -> None:
    s = fold([raised(), refutation_event(RECORDS["verification"], eid="k", id="f1")])
    ref = s.findings["f1"].refutation
    assert ref is not None and ref.ran and ref.ok is False and ref.cost_usd == 0.0
    assert ref.words() == "refuted by verification: the test passes without the fix"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("skipped", "asked, not run: no test, typecheck, lint or build signal"),
        ("refuted", "refuted by critic, independent: median([1, 2]) returns 2 on the fixed tree"),
        ("unclear-unknown-cost", "unclear by critic, NOT independent: no verdict line"),
    ],
)
def test_words(name: str, words: str) -> None:
    assert RECORDS[name].words() == words
    assert RefutationRecord.not_asked().words() == "not asked"


@pytest.mark.parametrize(
    ("name", "had_signal", "signal_kind", "changed"),
    [
        ("skipped", False, None, False),
        ("refuted", True, "test", True),
        ("unclear-unknown-cost", False, None, False),
        ("verification", True, "test", True),
        ("verification-no-signal", False, None, True),
    ],
)
def test_the_refutation_log_line_is_the_record(
    name: str, had_signal: bool, signal_kind: str | None, changed: bool
) -> None:
    record = RECORDS[name]
    line = record.log_line("f1")
    assert RefutationRecord.model_validate(line) == record  # the whole record, nothing else lost
    assert line["finding"] == "f1"
    assert (line["had_signal"], line["signal_kind"], line["changed_answer"]) == (
        had_signal,
        signal_kind,
        changed,
    )
    assert "cost_usd" in line  # an unknown cost is written as null, never left out or made 0
    if name == "unclear-unknown-cost":
        assert line["cost_usd"] is None
    assert line == json.loads(json.dumps(line))  # plain JSON
