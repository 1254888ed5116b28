"""An action's ``agent.launch`` is named by its attempt and, when its worker died running it, by its
launch within the attempt: every start is an event of its own (the timeline keeps the dead worker's run,
abandoned), and the same start written twice is still one."""

from __future__ import annotations

from orchestrator.domain import ActionDeferred, ActionDispatched, AgentLaunch, Event
from orchestrator.fold import fold
from workers.runtime.context import Job
from workers.runtime.seating import launch_eid

KEY = "review:r1:a"


def job_after(events: list[Event]) -> Job:
    dispatched = ActionDispatched(eid=f"dispatch:{KEY}", key=KEY, kind="review", round=1, agent="a")
    state = fold([dispatched, *events], "s")
    return Job(slug="s", state=state, action=state.actions[KEY])


def launch(eid: str) -> AgentLaunch:
    return AgentLaunch(eid=eid, agent="a", round=1, key=KEY)


def rate_limited(n: int) -> ActionDeferred:
    return ActionDeferred(eid=f"{KEY}:wait:{n}", key=KEY, reason="rate-limit", seconds=5)


def test_each_start_of_an_action_has_a_name_of_its_own() -> None:
    assert launch_eid(job_after([])) == f"{KEY}:launch"
    # its worker died running it: the next worker's start is the attempt's second launch
    died = [launch(f"{KEY}:launch")]
    assert launch_eid(job_after(died)) == f"{KEY}:launch:2"
    assert launch_eid(job_after(died + [launch(f"{KEY}:launch:2")])) == f"{KEY}:launch:3"
    # a rate limit put it back: the next attempt launches anew, under its own name
    put_back = died + [rate_limited(0)]
    assert launch_eid(job_after(put_back)) == f"{KEY}:b1:launch"
    assert launch_eid(job_after(put_back + [launch(f"{KEY}:b1:launch")])) == f"{KEY}:b1:launch:2"


def test_a_start_written_twice_is_counted_once() -> None:
    # the store drops a repeated eid, and the fold counts what it folds: a retried append is one launch
    twice = [launch(f"{KEY}:launch"), launch(f"{KEY}:launch")]
    assert job_after(twice).action.launches == 1
