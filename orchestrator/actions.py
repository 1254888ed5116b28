"""Action kinds, declared once: the pure half of each (its name, its queue, what its failure leaves).

An action is work ``decide`` hands to a worker (``DispatchAction``): it travels as an
``action.dispatched`` event, a Celery task ``jury.<kind>`` on the kind's queue runs it under a lease, and
its handler (``workers.runtime.actions.handles``) appends its result events. When the handler crashes, the
kind's ``on_failure`` says what goes in the log instead, so the run never waits on it forever.

Everything that lists kinds is derived from ``ACTIONS``: the queues and routes of the Celery app, its
tasks, the default queues of ``jury worker``, the kinds ``decide`` may dispatch, and the failure events.
Adding a kind is a ``declare`` here and a handler in ``workers/runtime/jobs.py`` (docs/architecture.md,
"Extension points").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator

from orchestrator.domain import (
    AgentReport,
    Event,
    FindingRefused,
    RefuteSkipped,
    ReplyAnswered,
    ReplySent,
    RunPublished,
)
from orchestrator.fold import DispatchedAction
from orchestrator.registry import Registry

CONTROL = "control"  # the coordinator's queue: coordinate, reap, and actions that run no agent

# (the action that failed, why) -> the events that close it in the log
FailureEvents = Callable[[DispatchedAction, str], list[Event]]


def no_events(action: DispatchedAction, reason: str) -> list[Event]:
    """No events: the action's ``action.done`` with ``ok`` false says it all (``decide`` reads it)."""
    return []


@dataclass(frozen=True)
class ActionKind:
    """``sandboxed``: the action runs an agent or the reviewed code, so a worker whose sandbox cannot
    run refuses it before anything starts (the run ends ``human`` with the reason)."""

    name: str
    queue: str
    on_failure: FailureEvents = no_events
    sandboxed: bool = True

    @property
    def task(self) -> str:
        return task_name(self.name)


def task_name(kind: str) -> str:
    """The Celery task of an action kind, ``jury.<kind>``: fixed, so workers of another release keep
    taking the same messages (and a kind only a newer release knows is still sent under its name)."""
    return f"jury.{kind}"


ACTIONS: Registry[ActionKind] = Registry("action kind")

# A kind ``decide`` may dispatch: checked when the action is made, not when the log is read, so a log
# holding a kind this release does not know still folds.
ActionName = Annotated[str, AfterValidator(ACTIONS.check)]


def declare(
    name: str, *, queue: str, on_failure: FailureEvents = no_events, sandboxed: bool = True
) -> ActionKind:
    """Declare an action kind (a duplicate name is an error)."""
    kind = ActionKind(name=name, queue=queue, on_failure=on_failure, sandboxed=sandboxed)
    return ACTIONS.register(name, kind)


# The queue of new work: a worker that consumes several queues takes from it last.
NEW_WORK = "review"


def queues() -> tuple[str, ...]:
    """Every queue a worker may consume, in the order it takes from them (the broker's ``priority``
    strategy, ``workers.runtime.app``): ``control`` first (a coordinate pass is short, and every action waits
    on one), then each kind's in declaration order, ``review`` last (work on findings already raised, a
    triage, a reply, a second opinion, comes before new rounds, so a PR already under way finishes
    first)."""
    kinds = [k.queue for k in ACTIONS.values() if k.queue != NEW_WORK]
    return tuple(dict.fromkeys([CONTROL, *kinds, NEW_WORK]))


def routes() -> dict[str, str]:
    """Celery task name -> queue, for every task Jury sends."""
    return {"jury.coordinate": CONTROL, "jury.reap": CONTROL} | {k.task: k.queue for k in ACTIONS.values()}


def failure_events(action: DispatchedAction, reason: str) -> list[Event]:
    """What the log gets when ``action``'s task crashed with ``reason``."""
    return ACTIONS[action.kind].on_failure(action, reason)


# --- the built-in kinds ------------------------------------------------------------------------


def reviewer_error(a: DispatchedAction, reason: str) -> list[Event]:
    """The reviewer's seat ends ``error``: the run ends ``human`` with the reason."""
    return [
        AgentReport(
            eid=f"{a.key}:report",
            agent=a.agent or "",
            round=a.round,
            verdict="error",
            seconds=0.0,
            summary=reason,
            role="reviewer",
            key=a.key,
            error=reason,
        )
    ]


def triage_refused(a: DispatchedAction, reason: str) -> list[Event]:
    """The finding stays open, one triage attempt used (``max_triage`` of them end the run)."""
    return [
        FindingRefused(
            eid=f"{a.key}:refused", id=a.finding or "", reason=reason, who=a.agent or "", round=a.round
        )
    ]


def reply_error(a: DispatchedAction, reason: str) -> list[Event]:
    """The reviewer was told (so the findings count as told) and its answer is an error."""
    return [
        ReplySent(
            eid=f"{a.key}:sent",
            agent=a.agent or "",
            round=a.round,
            resumed=False,
            text="",
            findings=a.findings,
        ),
        ReplyAnswered(
            eid=f"{a.key}:answered",
            agent=a.agent or "",
            round=a.round,
            verdict="error",
            seconds=0.0,
            error=reason,
        ),
    ]


def refute_not_run(a: DispatchedAction, reason: str) -> list[Event]:
    """The second opinion was asked and not had, with the reason; the run goes on without it (the
    converged claim's too: without this its run would wait for a verdict that never comes)."""
    return [
        RefuteSkipped(eid=f"{a.key}:skipped", id=a.finding, reason=f"the refuter could not run: {reason}")
    ]


def publish_failed(a: DispatchedAction, reason: str) -> list[Event]:
    """Publishing crashed: recorded as a publish that failed, with the reason (``jury show`` says so, and
    ``jury publish SLUG`` tries again)."""
    state, _, epoch = a.key.removeprefix("publish:").partition(":e")
    return [
        RunPublished(
            eid=f"{a.key}:published",
            key=a.key,
            state=state,
            epoch=int(epoch) if epoch.isdigit() else a.epoch,
            ok=False,
            error=reason,
        )
    ]


declare("review", queue="review", on_failure=reviewer_error)
declare("triage", queue="triage", on_failure=triage_refused)
declare("reply", queue="reply", on_failure=reply_error)
declare("refute", queue="refute", on_failure=refute_not_run)
declare("push", queue=CONTROL, sandboxed=False)  # git only; a failure ends the run human
# An ended run's review and check on its PR (``publish`` on); forge calls only, no agent, no repo code.
declare("publish", queue=CONTROL, on_failure=publish_failed, sandboxed=False)
