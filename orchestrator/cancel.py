"""Cancelling a run: the one function behind ``jury cancel``, the console's cancel button and a sweep's
supersede of a run whose PR head moved.

It lives on the deciding side, taking the live store, so every caller may import it under the layer
contracts (``jury_cli`` -> ``workers`` -> ``orchestrator``; the fleet may not import the runtime); the
coordinator is woken by a ``wake`` the caller hands in (``workers.runtime.wake``), or by the caller
itself after a batch (a sweep wakes every run it cancelled at once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.domain import RunCancel, cancel_eid
from orchestrator.run_reader import read_state
from orchestrator.spec import TERMINAL_STATES
from orchestrator.store.base import LiveStore, check_slug

__all__ = ["Cancelled", "cancel_run"]

Outcome = Literal["cancelled", "cancelling", "ended", "missing"]


@dataclass(frozen=True)
class Cancelled:
    """What ``cancel_run`` did: ``cancelled`` (the event and the flag are in place now), ``cancelling``
    (both were already: a cancel is under way), ``ended`` (the run had ended: ``state``), ``missing`` (no
    such run in the store)."""

    slug: str
    outcome: Outcome
    state: str | None = None


def cancel_run(
    store: LiveStore,
    slug: str,
    *,
    who: str,
    reason: str | None = None,
    superseded_by: str | None = None,
    wake: Callable[[Sequence[str]], None] | None = None,
) -> Cancelled:
    """Cancel the run ``slug`` of ``store``: a ``run.cancel`` event (``who`` asked; ``reason`` becomes the
    run's end note; ``superseded_by``: the sweep's run that replaces it), then the cancel flag, then the
    coordinator woken (``wake``, when given), which ends the run ``cancelled`` under the run's lock.

    The order is event, then flag. The event is what ends the run (``decide`` ends a run whose fold has
    ``cancel_requested``); the flag only makes the run's running agents stop at their next look
    (``Runtime.cancelled``). Whoever observes the flag (an agent's task, which then ends its action
    interrupted and wakes the coordinator) is so guaranteed that the event is already in the log: the
    coordinator pass that follows ends the run ``cancelled``, with this note. The other order would let
    a pass between the two see agents killed with no cancel in the log: it would treat them as failed
    (dispatch them again, only for the flag to kill each at once, or end the run ``failed``/``human``
    with the wrong note), and a canceller dying between the two would leave a flag killing every agent
    of a run that nothing ends. A pass that sees the event before the flag is set ends the run at once;
    an agent still running until the flag comes only finishes work nobody reads (its events land in an
    ended run): the cost of this order is at worst some agent time, never a wrong end.

    The event's id is one per epoch of the run (and per superseding run), so two cancels at once append
    it once; a run whose event and flag are both in place already is left alone (``cancelling``), and a
    flag found without its event (a canceller of an older release died between the two) gets its event.
    """
    check_slug(slug)
    if not store.exists(slug):
        return Cancelled(slug, "missing")
    state = read_state(store, slug)[0]
    if state.events == 0:
        return Cancelled(slug, "missing")
    if state.state in TERMINAL_STATES:  # flagging it would be a cancel logged for nothing
        return Cancelled(slug, "ended", state.state)
    flagged = store.cancel_flagged(slug)
    if state.cancel_requested and flagged:
        return Cancelled(slug, "cancelling", state.state)
    if not state.cancel_requested:
        eid = cancel_eid(state.epoch, superseded_by=superseded_by)
        store.append(slug, [RunCancel(eid=eid, who=who, reason=reason)])
    if not flagged:
        store.set_cancel_flag(slug)
    if wake is not None:
        wake([slug])
    return Cancelled(slug, "cancelled", state.state)
