"""``fold.apply`` has a handler for every event kind (its table ``_APPLY``): a new event kind without one
fails here and, should it reach the fold anyway, is a clear error at run time, never an event silently
ignored."""

from __future__ import annotations

import typing
from typing import Literal

import pytest

from orchestrator import fold
from orchestrator.domain import EventBase, KnownEvent, RunCancel, UnknownEvent
from orchestrator.fold import RunState, apply


class Unfolded(EventBase):
    t: Literal["test.unfolded"] = "test.unfolded"


def event_kinds() -> set[type]:
    """The classes of ``domain.Event``: the known kinds the log's lines validate into, and the unknown one."""
    known = typing.get_args(KnownEvent)[0]  # KnownEvent is Annotated[A | B | ..., discriminator]
    return set(typing.get_args(known)) | {UnknownEvent}


def test_an_event_without_a_case_is_a_clear_error_at_run_time() -> None:
    with pytest.raises(TypeError, match="fold.apply has no case for the event kind 'test.unfolded'"):
        apply(RunState(slug="s"), Unfolded(eid="x"))  # type: ignore[arg-type]


def test_every_event_kind_has_its_handler() -> None:
    kinds = event_kinds()
    assert len(kinds) > 30  # the union was read, so the comparisons below are about something
    missing = sorted(k.__name__ for k in kinds - set(fold._APPLY))
    assert not missing, f"no fold handler for {missing}: add one to fold._APPLY"
    strays = sorted(k.__name__ for k in set(fold._APPLY) - kinds)
    assert not strays, f"fold handlers for what is no event kind: {strays}"


def test_a_kind_with_its_handler_folds() -> None:
    s = RunState(slug="s")
    apply(s, RunCancel(eid="c", reason="stop"))
    assert s.cancel_requested and s.cancel_reason == "stop"
    assert s.events == 1 and s.first_ts == s.last_ts
