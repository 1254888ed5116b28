"""Jury's own formats under property-based tests: events (orchestrator/domain.py), the event log on disk
(orchestrator/store/files.py) and run.json (the fold, orchestrator/fold.py).

Events are generated from the pydantic models themselves, every kind of the ``Event`` union with every
field, so a kind or a field added later is covered without touching this file. Each event serializes as
the store does and reads back equal; a log holding torn lines, garbage, invalid UTF-8 and JSON nested past
any decoder's reach between them reads as exactly its events; the fold of any events, written as run.json
and read back, is the same document.
"""

from __future__ import annotations

import re
import tempfile
import types
import typing
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Union

import annotated_types
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from orchestrator.domain import (
    AgentWrote,
    KnownEvent,
    RefuteSkipped,
    RunCancel,
    UnknownEvent,
    dump_event,
    parse_event,
)
from orchestrator.fold import fold
from orchestrator.refute import Signal
from orchestrator.run_json import run_json
from orchestrator.store.files import FileStore
from tests.unit.hostile import decoded_bytes, deep_json, hostile_text, json_values

EVENT_KINDS: tuple[type[BaseModel], ...] = typing.get_args(typing.get_args(KnownEvent)[0])
ISO = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1)).map(
    lambda d: d.isoformat(timespec="milliseconds") + "Z"
)
# Text as it reaches an event: anything, or bytes decoded as the readers decode them (git paths with
# surrogateescape, agent output with replace).
TEXT = st.text(max_size=20) | decoded_bytes(20)
NUMBERS: dict[type, st.SearchStrategy[Any]] = {
    int: st.integers(min_value=-(2**53), max_value=2**53),
    float: st.floats(allow_nan=False, allow_infinity=False),
    bool: st.booleans(),
}


def for_type(ann: Any, metadata: list[Any] | None = None) -> st.SearchStrategy[Any]:
    """A strategy for a field's annotation, within its ``Field(ge=...)`` bounds."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if ann is str:
        return TEXT
    if ann in NUMBERS:
        low = next((m.ge for m in metadata or [] if isinstance(m, annotated_types.Ge)), None)
        if low is not None:
            return st.integers(min_value=low, max_value=2**31) if ann is int else st.floats(min_value=low)
        return NUMBERS[ann]
    if ann is Any:
        return json_values(6)
    if ann is type(None):
        return st.none()
    if origin is Literal:
        return st.sampled_from(args)
    if origin in (Union, types.UnionType):
        return st.one_of(*(for_type(a) for a in args))
    if origin is list:
        return st.lists(for_type(args[0]), max_size=3)
    if origin is set:
        return st.sets(for_type(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), for_type(args[1]), max_size=3)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return models(ann)
    raise NotImplementedError(f"no strategy for {ann!r}: add it to for_type")


def models(cls: type[BaseModel]) -> st.SearchStrategy[Any]:
    """Instances of ``cls``: required fields always, the others now and then; invalid ones rejected."""
    required, optional = {}, {}
    for name, f in cls.model_fields.items():
        strategy = ISO if name == "ts" else for_type(f.annotation, f.metadata)
        (required if f.is_required() else optional)[name] = strategy

    def build(data: dict[str, Any]) -> Any:
        try:
            return cls.model_validate(data)
        except ValidationError:  # a model validator refused the combination
            return None

    return st.fixed_dictionaries(required, optional=optional).map(build).filter(lambda m: m is not None)


EVENTS = st.one_of(*(models(kind) for kind in EVENT_KINDS))


def _serializable(event: Any) -> bool:
    """Whether pydantic writes ``event`` as is (it refuses a string holding lone surrogates)."""
    try:
        event.model_dump_json()
    except ValueError:
        return False
    return True


NOT_RUN = Signal(kind="test", command="pytest -q", exit_code=None, source="declared")


@settings(max_examples=600)
@given(event=EVENTS)
@example(
    event=AgentWrote(
        eid="w", agent="codex", round=1, paths=[b"caf\xe9.py".decode("utf-8", "surrogateescape")]
    )
)
@example(event=RefuteSkipped(eid="s", reason="no check ran", signal=NOT_RUN))
def test_every_event_reads_back_as_written(event: Any) -> None:
    """A non-UTF-8 file name a reviewer wrote (git's bytes, decoded with surrogateescape) raised out of
    the serializer and lost the whole append; it is written with U+FFFD in its place. A signal that did
    not run (no exit code, left out of the wire form) made its event unreadable, skipped on every read."""
    line = dump_event(event)
    assert "\n" not in line
    back = parse_event(line.encode("utf-8"))
    assert back is not None and type(back) is type(event)
    assert back.eid == re.sub("[\ud800-\udfff]", "\ufffd", event.eid)
    if _serializable(event):
        assert back == event
    assert dump_event(back) == line


GARBAGE = hostile_text(['{"t": "round.end", ', '{"eid": "x"}', "{", "}"], extra=[deep_json()], max_lines=3)


@settings(max_examples=150)
@given(
    events=st.lists(EVENTS, max_size=8, unique_by=lambda e: e.eid),
    garbage=st.lists(
        GARBAGE.map(lambda t: t.encode("utf-8", "surrogatepass")) | st.binary(max_size=60), max_size=4
    ),
    torn=st.booleans(),
)
@example(events=[RunCancel(eid="c")], garbage=[b"\xff\xfe", b"[" * 100_000], torn=True)
@example(events=[RefuteSkipped(eid="s", reason="no check ran", signal=NOT_RUN)], garbage=[], torn=False)
def test_the_log_on_disk_reads_as_its_events(events: list[Any], garbage: list[bytes], torn: bool) -> None:
    """Appended through the store, with garbage lines between the appends and a torn last line."""
    assume(all(_serializable(e) for e in events))
    with tempfile.TemporaryDirectory() as root:
        store = FileStore(Path(root))
        store.create_run("run-1")
        log = Path(root) / "runs" / "run-1" / "events.ndjson"
        for n, event in enumerate(events):
            store.append("run-1", [event])
            if n < len(garbage):
                with log.open("ab") as fh:  # a foreign line, never an event
                    fh.write(b"\n" + garbage[n].replace(b"\n", b" ") + b"\n")
        if torn:
            with log.open("ab") as fh:
                fh.write(b'{"eid": "torn", "t": "run.cancel"')
        back = store.read("run-1")
        assert [dump_event(e) for e in back] == [dump_event(e) for e in events]
        assert store.append("run-1", events) == 0  # every eid is already there


# Each example writes and fsyncs a run.json. Lists holding an event pydantic cannot write (a lone
# surrogate) are dropped by assume, by design; once, in a CI run's xdist worker, 50 were dropped against
# 8 kept and Hypothesis's filter health check failed the test (not reproduced since), so it is off here.
@settings(
    max_examples=60,
    suppress_health_check=[*settings.default.suppress_health_check, HealthCheck.filter_too_much],
)
@given(events=st.lists(EVENTS, max_size=12, unique_by=lambda e: e.eid))
def test_run_json_reads_back_as_written(events: list[Any]) -> None:
    assume(all(_serializable(e) for e in events))
    with tempfile.TemporaryDirectory() as root:
        store = FileStore(Path(root))
        store.append("run-1", events)
        state = fold(store.read("run-1"), "run-1")
        doc = run_json(state)
        store.write_state("run-1", doc)
        assert store.read_state("run-1") == doc
        assert run_json(fold(store.read("run-1"), "run-1")) == doc  # folding again changes nothing


@given(
    data=GARBAGE
    | st.binary(max_size=200)
    | json_values(12)
    | EVENTS.map(lambda e: e.model_dump(by_alias=True))
)
@example(data=b"[" * 100_000)
@example(data='{"t": "run.cancel", "eid": "\\udcff"}')  # a lone surrogate escaped: not an event
def test_any_line_is_an_event_or_none(data: Any) -> None:
    """What the stores hand the event parser (a line of the file, a Redis value, a dict): an event (of a
    known kind, or kept whole as one of an unknown kind) or None, never an error."""
    event = parse_event(data) if isinstance(data, dict | str | bytes) else parse_event({"t": data})
    assert event is None or type(event) in (*EVENT_KINDS, UnknownEvent)


@settings(max_examples=60)  # each example writes a file
@given(body=GARBAGE.map(lambda t: t.encode("utf-8", "surrogatepass")) | st.binary(max_size=100))
@example(body=b"[" * 100_000)
def test_any_run_json_reads_as_a_document_or_none(body: bytes) -> None:
    with tempfile.TemporaryDirectory() as root:
        store = FileStore(Path(root))
        store.create_run("run-1")
        (Path(root) / "runs" / "run-1" / "run.json").write_bytes(body)
        state = store.read_state("run-1")
        assert state is None or isinstance(state, dict)
