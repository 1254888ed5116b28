"""A run record written by an earlier release still loads, folds and shows; an event of a kind this
release does not know is kept and reported, never dropped in silence.

``tests/data/records/0eae4e3`` is a state directory holding the whole files record of ``jury demo`` as
commit 0eae4e3 wrote it (before the issue-45 renames): its event log, its ``run.json`` and its artifacts,
and ``show.txt``, the run's summary as that ``jury demo`` printed it.
Renaming a class, a field or a Jury-only event ``t`` must keep it readable (an old ``t`` through
``orchestrator.domain.T_ALIASES``); codejury's ``t`` values never change.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.domain import EVENT_ADAPTER, KNOWN_T, T_ALIASES, UnknownEvent, dump_event, parse_event
from orchestrator.fold import fold
from orchestrator.run_json import run_json
from orchestrator.store.files import FileStore

RECORD = Path(__file__).resolve().parents[1] / "data" / "records" / "0eae4e3"
SLUG = "sample-feature-20261207-2336"
# What the state in ``run.json`` gained since the record was written (empty values only, for this run).
ADDED_SINCE = {"unknownEvents": {}}
FUTURE = {"eid": "future:1", "ts": "2027-01-01T00:00:00.000Z", "t": "run.future", "gauge": {"x": [1, 2]}}


@pytest.fixture
def record(tmp_path: Path) -> Path:
    """A copy of the old state directory (reading a record may write beside it)."""
    state = tmp_path / "old-record"
    shutil.copytree(RECORD, state)
    return state


def test_the_old_record_folds_to_the_run_json_it_wrote(record: Path) -> None:
    events = FileStore(record).read(SLUG)
    lines = (record / "runs" / SLUG / "events.ndjson").read_text(encoding="utf-8").splitlines()
    assert len(events) == len(lines) == 62  # every line still an event
    state = fold(events, SLUG)
    assert state.state == "converged" and [r.n for r in state.rounds] == [1, 2]
    (finding,) = state.findings.values()
    assert (finding.id, finding.status, finding.integrated) == ("r1-demo-finder-1", "accepted", True)
    assert finding.refutation is not None and finding.refutation.outcome == "not_refuted"
    assert state.unknown_events == {}
    written = json.loads((record / "runs" / SLUG / "run.json").read_text(encoding="utf-8"))
    folded = run_json(state)
    for name, empty in ADDED_SINCE.items():
        assert folded["jury"].pop(name) == empty
    assert folded == written


def test_jury_show_renders_the_old_record(record: Path, state_dir: Path, jury) -> None:
    shutil.copytree(record, state_dir, dirs_exist_ok=True)
    shown = jury("show", SLUG)
    assert shown.code == 0, shown.err
    # What ``jury demo`` printed of this run when it ended, by the release that wrote it (less the paths)
    then = (RECORD / "show.txt").read_text(encoding="utf-8").splitlines()
    now = [line for line in shown.out.splitlines() if not line.startswith("  run record: ")]
    assert now == then
    assert "unknown events" not in shown.out
    listed = jury("runs")
    assert f"{SLUG}  converged  rounds=2  findings=1  open=0" in listed.out, listed.out + listed.err


def test_an_event_of_an_unknown_kind_is_kept_counted_and_shown(record: Path, state_dir: Path, jury) -> None:
    log = record / "runs" / SLUG / "events.ndjson"
    with log.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(FUTURE) + "\n")
    state = fold(FileStore(record).read(SLUG), SLUG)
    assert state.unknown_events == {"run.future": 1}
    assert state.state == "converged"  # folded as nothing else
    shutil.copytree(record, state_dir, dirs_exist_ok=True)
    shown = jury("show", SLUG)
    assert shown.code == 0, shown.err
    assert "unknown events: 1 of kinds this Jury does not know, not shown ('run.future' x1)" in shown.out


def test_an_unknown_event_is_written_back_whole() -> None:
    event = parse_event(json.dumps(FUTURE))
    assert isinstance(event, UnknownEvent) and event.t == "run.future"
    assert json.loads(dump_event(event)) == FUTURE  # a mirror or a copy of the log loses nothing of it


@pytest.mark.parametrize(
    "line",
    [
        '{"eid": "x", "t": "round.end"}',  # a known kind with its fields missing: garbage, not unknown
        '{"t": "run.future"}',  # no eid: not an event
        '["t", "run.future"]',
        '{"eid": "x", "t": "run.fut',  # torn
    ],
)
def test_what_is_not_an_event_is_still_none(line: str) -> None:
    assert parse_event(line) is None


def test_every_kind_the_parser_reads_is_known() -> None:
    assert frozenset(EVENT_ADAPTER.json_schema()["discriminator"]["mapping"]) == KNOWN_T


def test_an_alias_names_a_known_kind_and_no_alias_shadows_one() -> None:
    assert set(T_ALIASES.values()) <= KNOWN_T
    assert not set(T_ALIASES) & KNOWN_T
