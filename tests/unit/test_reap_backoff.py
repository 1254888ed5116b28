"""What the reaper sends again, and when, on the in-memory twins: a dead worker's action at once, a merely
queued one with a growing back-off; and the countdowns a model's rate limit puts an action back with (a
long Retry-After honoured, a 429 without one backed off), which the reaper waits for.

The sent mark's contract (Redis and memory alike) is tests/integration/test_store_contract.py; a worker
really killed, end to end, tests/e2e/test_fleet_ops.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrator.config import Settings
from orchestrator.domain import ActionDeferred, AgentLaunch, AgentReport, Event, JuryConfigEvent, TargetEvent
from orchestrator.fold import RunState, fold
from orchestrator.spec import AgentSpec, JuryConfig, SandboxSettings, Target
from orchestrator.store.files import FileStore
from orchestrator.store.memory import ManualClock, MemoryStore
from workers.agents.run import RateLimited
from workers.fleet.ledger import MemoryLedger
from workers.isolation import limits
from workers.isolation.limits import (
    BACKOFF_AT_MOST,
    MAX_BACKOFFS,
    PUT_BACK_AT_MOST,
    SLEEP_AT_MOST,
    MemorySlots,
)
from workers.runtime import coordinator
from workers.runtime.context import Job, Runtime, finish, load_job
from workers.runtime.lease import MemoryLease, MemoryLeases
from workers.runtime.seating import defer_after

SLUG = "acme-widgets-pr-7"
KEY = "review:r1:a"
NAME = f"{SLUG}:{KEY}"
LEASE_TTL = 600.0  # long in real time: the heartbeat never renews during a test; the clock decides
REAP_AFTER = 120.0
LIMIT_WAIT = 4.0
SPEC = AgentSpec(name="x", argv=["x", "{prompt}"], judge_argv=["x", "{prompt}"])


@dataclass
class Twins:
    rt: Runtime
    clock: ManualClock
    store: MemoryStore
    leases: MemoryLeases
    sent: list[tuple[str, str, str]] = field(default_factory=list)
    later: list[tuple[str, str, str, float]] = field(default_factory=list)

    def state(self) -> RunState:
        return fold(self.store.read(SLUG), SLUG)

    def sends_of(self, key: str = KEY) -> int:
        return sum(1 for _, _, k in self.sent if k == key)


@pytest.fixture
def tw(tmp_path: Path) -> Twins:
    clock = ManualClock()
    store, leases = MemoryStore(clock), MemoryLeases(clock)
    settings = Settings(
        dir=tmp_path / "state",
        lease_ttl=LEASE_TTL,
        reap_after=REAP_AFTER,
        retention=3600,
        limit_wait=LIMIT_WAIT,
        visibility_timeout=6 * 3600,
    )
    sent: list[tuple[str, str, str]] = []
    later: list[tuple[str, str, str, float]] = []
    rt = Runtime(
        settings=settings,
        store=store,
        files=FileStore(settings.dir),
        send=lambda kind, slug, key: sent.append((kind, slug, key)),
        kick=lambda slug: None,
        lease_backend=leases,
        ledger_backend=MemoryLedger(clock),
        send_later=lambda kind, slug, key, seconds: later.append((kind, slug, key, seconds)),
        slots_backend=MemorySlots(clock),
    )
    return Twins(rt, clock, store, leases, sent, later)


def start(tw: Twins) -> None:
    """A run with one reviewer, ``a``, dispatched by one coordinator pass (its task sent, not taken)."""
    config = JuryConfig(reviewers=["a"], judge="a", agents={"a": SPEC}, sandbox=SandboxSettings(mode="none"))
    events: list[Event] = [
        TargetEvent(eid="target:0", target=Target(repo="r", id="feat", state="review", head="h0", base="b0")),
        JuryConfigEvent(eid="config:0", config=config),
    ]
    tw.store.append(SLUG, events)
    coordinator.coordinate(tw.rt, SLUG)
    assert tw.sent == [("review", SLUG, KEY)]


class WorkerDied(BaseException):
    """Not an Exception: nothing in run_task records it (the process is gone)."""


def dies_holding_its_lease(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """A handler whose worker is SIGKILLed while its agent runs: nothing is recorded, nothing released
    (its lease stays until its TTL, as a dead worker's does)."""

    def handler(rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
        monkeypatch.setattr(MemoryLease, "release", lambda self: False)
        raise WorkerDied

    return handler


def clean_review(rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
    job = load_job(rt, slug, key, stop)
    assert job is not None
    rt.store.append(slug, [AgentLaunch(eid=f"{key}:launch", agent="a", round=1, key=key)])
    report = AgentReport(eid=f"{key}:report", agent="a", round=1, verdict="clean", seconds=1, key=key)
    finish(rt, job, [report])


# -- an action nobody took: queued (most likely), or lost -------------------------------------------------


def test_a_queued_action_is_sent_again_with_a_doubling_back_off_and_is_no_recovery(tw: Twins) -> None:
    """A sweep's backlog: the task waits behind hundreds of others, never taken. The reaper sends it again
    after reap_after (its message might be lost), then only after 2x, 4x ... that, up to REQUEUE_AT_MOST:
    not one copy more every reap_after. None of it is a lease recovered."""
    start(tw)
    sends = [0.0]  # the clock's times of the task's sendings (the coordinator's first)
    for _ in range(8 * 60):  # eight hours, one reap every minute
        tw.clock.advance(60)
        before = tw.sends_of()
        assert coordinator.reap(tw.rt) == []  # never counted as a recovery
        if tw.sends_of() > before:
            sends.append(tw.clock() - 1_800_000_000.0)
    gaps = [b - a for a, b in zip(sends, sends[1:], strict=False)]
    assert gaps[:4] == [REAP_AFTER, 2 * REAP_AFTER, 4 * REAP_AFTER, coordinator.REQUEUE_AT_MOST]
    assert set(gaps[3:]) == {coordinator.REQUEUE_AT_MOST}  # capped, never more often again
    mark = tw.store.sent_mark(SLUG, KEY)
    assert mark is not None and not mark.taken and mark.resends == len(sends) - 1


def test_an_action_whose_task_still_waits_in_its_queue_is_never_sent_again(tw: Twins) -> None:
    """When the broker says the task is still queued, no copy goes out however long it waits; once the
    message is in no queue (lost), it is sent again at the next reap; not knowing, the reaper goes by age."""
    start(tw)
    queued: set[tuple[str, str]] | None = {(SLUG, KEY)}
    asked: list[int] = []

    def look() -> set[tuple[str, str]] | None:
        asked.append(1)
        return queued

    tw.rt.queued = look
    for _ in range(60):  # an hour behind a backlog
        tw.clock.advance(60)
        coordinator.reap(tw.rt)
    assert tw.sends_of() == 1 and asked  # the coordinator's send only
    queued = set()  # its message is gone from the queues
    tw.clock.advance(60)
    coordinator.reap(tw.rt)
    assert tw.sends_of() == 2
    queued = None  # the broker cannot tell (a backlog too long to read): the marks' age decides again
    tw.clock.advance(2 * REAP_AFTER - 1)  # sent again once already: twice reap_after
    coordinator.reap(tw.rt)
    assert tw.sends_of() == 2
    tw.clock.advance(1)
    coordinator.reap(tw.rt)
    assert tw.sends_of() == 3


def test_the_queues_are_read_only_when_an_action_may_need_sending_again(tw: Twins) -> None:
    start(tw)
    asked: list[int] = []
    tw.rt.queued = lambda: asked.append(1) or None
    tw.clock.advance(REAP_AFTER - 1)
    coordinator.reap(tw.rt)
    assert asked == []  # not due yet: the broker is not asked
    tw.clock.advance(1)
    coordinator.reap(tw.rt)
    assert asked == [1] and tw.sends_of() == 2


def test_the_back_off_is_capped_by_a_short_visibility_timeout(tw: Twins) -> None:
    rt = tw.rt
    assert coordinator.requeue_after(rt, 0) == REAP_AFTER
    assert coordinator.requeue_after(rt, 2) == 4 * REAP_AFTER
    assert coordinator.requeue_after(rt, 99) == coordinator.REQUEUE_AT_MOST
    rt.settings = rt.settings.model_copy(update={"visibility_timeout": 300})
    assert coordinator.requeue_after(rt, 99) == 300


def test_a_task_taken_at_last_starts_its_back_off_afresh_once_sent_again(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    start(tw)
    tw.clock.advance(REAP_AFTER)
    coordinator.reap(tw.rt)
    tw.clock.advance(2 * REAP_AFTER)
    coordinator.reap(tw.rt)
    assert (tw.store.sent_mark(SLUG, KEY) or (0, 0, 0))[2] == 2
    monkeypatch.setattr(coordinator, "TASKS", {"review": dies_holding_its_lease(monkeypatch)})
    with pytest.raises(WorkerDied):
        coordinator.run_task(tw.rt, "review", SLUG, KEY)  # taken at last, by a worker that dies
    tw.clock.advance(LEASE_TTL)
    assert coordinator.reap(tw.rt) == [NAME]
    mark = tw.store.sent_mark(SLUG, KEY)
    assert mark is not None and (mark.taken, mark.resends) == (False, 0)  # a new message, not yet taken
    tw.clock.advance(REAP_AFTER - 1)
    before = tw.sends_of()
    coordinator.reap(tw.rt)
    assert tw.sends_of() == before  # queued again: reap_after first, as for any new message
    tw.clock.advance(1)
    coordinator.reap(tw.rt)
    assert tw.sends_of() == before + 1


# -- an action a worker took, whose worker died ------------------------------------------------------------


def test_a_dead_workers_action_is_recovered_as_soon_as_its_lease_lapses(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Taken (run_task marks it so), then its worker died: the reaper sends it again the moment the
    lease has lapsed, however recently it was sent and whatever back-off it had as a queued message; that
    is a lease recovered."""
    start(tw)
    monkeypatch.setattr(coordinator, "TASKS", {"review": dies_holding_its_lease(monkeypatch)})
    with pytest.raises(WorkerDied):
        coordinator.run_task(tw.rt, "review", SLUG, KEY)
    mark = tw.store.sent_mark(SLUG, KEY)
    assert mark is not None and mark.taken
    assert coordinator.reap(tw.rt) == [] and tw.sends_of() == 1  # its lease still lives
    tw.clock.advance(LEASE_TTL)  # it lapses
    assert coordinator.reap(tw.rt) == [NAME] and tw.sends_of() == 2
    assert coordinator.reap(tw.rt) == [] and tw.sends_of() == 2  # once

    monkeypatch.undo()
    monkeypatch.setattr(coordinator, "TASKS", {"review": clean_review})
    coordinator.run_task(tw.rt, "review", SLUG, KEY)
    assert tw.state().actions[KEY].done and tw.leases.is_done(NAME)
    tw.clock.advance(10 * coordinator.REQUEUE_AT_MOST)
    assert coordinator.reap(tw.rt) == [] and tw.sends_of() == 2  # done: never sent again


def test_a_lease_shorter_than_reap_after_is_recovered_when_it_lapses(tw: Twins) -> None:
    """reap_after is for messages nobody took; a taken action waits for nothing but its lease."""
    start(tw)
    dead = tw.leases.lease(NAME, ttl=10.0)
    assert dead.acquire()
    tw.store.mark_taken(SLUG, KEY)  # what run_task does once it holds the lease
    tw.clock.advance(10.0)  # 10 s after it was sent, far under reap_after
    assert coordinator.reap(tw.rt) == [NAME]


def test_run_task_marks_its_action_taken_and_a_put_back_marks_it_sent_again(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    start(tw)
    seen: list[bool] = []

    def limited(rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
        seen.append((rt.store.sent_mark(slug, key) or (0, False, 0))[1])
        raise RateLimited(60.0, "acme/x answered 429 with Retry-After 60s")

    monkeypatch.setattr(coordinator, "TASKS", {"review": limited})
    coordinator.run_task(tw.rt, "review", SLUG, KEY)
    assert seen == [True]  # taken while its handler ran
    mark = tw.store.sent_mark(SLUG, KEY)
    assert mark is not None and not mark.taken  # put back: a new message, not taken yet
    tw.clock.advance(LEASE_TTL)
    assert coordinator.reap(tw.rt) == []  # no lease, no done marker, but no dead worker either


# -- a model's rate limit ---------------------------------------------------------------------------------


def rate_limited(seconds: float | None) -> Callable[..., None]:
    def handler(rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
        said = f"with Retry-After {seconds:.0f}s" if seconds is not None else "without Retry-After"
        raise RateLimited(seconds, f"acme/x answered 429 {said}")

    return handler


def deferred(tw: Twins) -> list[ActionDeferred]:
    return [e for e in tw.store.read(SLUG) if isinstance(e, ActionDeferred)]


def test_a_long_retry_after_is_honoured_and_the_reaper_waits_for_it(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider that asks for 600 s gets 600 s (not a retry every reap_after / 2), and the reaper sends
    nothing again before the countdown is over and reap_after more has passed."""
    start(tw)
    tw.sent.clear()
    monkeypatch.setattr(coordinator, "TASKS", {"review": rate_limited(600.0)})
    coordinator.run_task(tw.rt, "review", SLUG, KEY)
    assert tw.later == [("review", SLUG, KEY, 600.0)]
    assert [e.seconds for e in deferred(tw)] == [600.0]
    for _ in range(int((600 + REAP_AFTER) / 30) - 1):
        tw.clock.advance(30)
        assert coordinator.reap(tw.rt) == [] and tw.sent == [], tw.clock()
    tw.clock.advance(30)  # due for reap_after now: its message may have been lost with a worker
    assert coordinator.reap(tw.rt) == [] and tw.sent == [("review", SLUG, KEY)]


def test_a_retry_after_past_the_cap_is_cut_to_it(tw: Twins, monkeypatch: pytest.MonkeyPatch) -> None:
    start(tw)
    monkeypatch.setattr(coordinator, "TASKS", {"review": rate_limited(86400.0)})
    coordinator.run_task(tw.rt, "review", SLUG, KEY)
    assert [x[3] for x in tw.later] == [PUT_BACK_AT_MOST]
    mark = tw.store.sent_mark(SLUG, KEY)
    assert mark is not None and mark.age == -PUT_BACK_AT_MOST
    # ... and under half a short visibility timeout: an ETA message must not be handed out again
    tw.rt.settings = tw.rt.settings.model_copy(update={"visibility_timeout": 600})
    coordinator.run_task(tw.rt, "review", SLUG, KEY)
    assert [x[3] for x in tw.later] == [PUT_BACK_AT_MOST, 300.0]


def test_a_429_without_retry_after_is_put_back_on_a_doubling_back_off(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No Retry-After: not slept in the slot (the seat raises at once), put back after LIMIT_WAIT, then
    twice that, four times ... up to BACKOFF_AT_MOST (the jitter held at its middle here)."""
    start(tw)
    monkeypatch.setattr(limits.random, "uniform", lambda a, b: (a + b) / 2)
    monkeypatch.setattr(coordinator, "TASKS", {"review": rate_limited(None)})
    for _ in range(10):
        coordinator.run_task(tw.rt, "review", SLUG, KEY)
    waits = [x[3] for x in tw.later]
    assert waits == [min(LIMIT_WAIT * 2**n, BACKOFF_AT_MOST) for n in range(10)]
    assert [e.seconds for e in deferred(tw)] == waits
    assert deferred(tw)[0].note == "acme/x answered 429 without Retry-After"


def test_a_spent_quota_ends_the_action_after_max_backoffs_and_never_sleeps_in_the_slot(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model that refuses for ever: the action is put back MAX_BACKOFFS - 1 times, each attempt's seat
    told to defer (never to sleep the wait out in the worker's slot), and the next refusal ends it as a
    failed review, so the run does not wait for ever."""
    start(tw)
    told: list[float | None] = []

    def refuses(rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
        state = fold(rt.store.read(slug), slug)
        told.append(defer_after(Job(slug=slug, state=state, action=state.actions[key])))
        raise RateLimited(600.0, "acme/x answered 429 with Retry-After 600s")

    monkeypatch.setattr(coordinator, "TASKS", {"review": refuses})
    for _ in range(MAX_BACKOFFS):
        coordinator.run_task(tw.rt, "review", SLUG, KEY)
    assert told == [SLEEP_AT_MOST] * MAX_BACKOFFS
    assert len(tw.later) == MAX_BACKOFFS - 1
    action = tw.state().actions[KEY]
    assert action.done and not action.ok and action.backoffs == MAX_BACKOFFS - 1
    (report,) = [e for e in tw.store.read(SLUG) if isinstance(e, AgentReport)]
    assert report.verdict == "error"
    assert (
        report.error
        == f"rate-limited {MAX_BACKOFFS} times, the last: acme/x answered 429 with Retry-After 600s"
    )
    assert tw.leases.is_done(NAME)
    coordinator.run_task(tw.rt, "review", SLUG, KEY)  # a late copy of its message: nothing more
    assert len(told) == MAX_BACKOFFS
