"""``coordinate``, ``run_task`` and ``reap`` on the in-memory twins: no Redis, no Celery, no agent.

The runtime holds a ``MemoryStore``, ``MemoryLeases`` and a ``MemoryLedger`` sharing one ``ManualClock``,
and a ``send``/``kick`` that only record; the action handlers are fakes that append what a review would.
Each test is one of the fleet's failure stories: a task delivered twice, a lease lost to another holder,
a worker that dies between its append and its done marker, an action the reaper must hand out again, a
run whose log is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrator.config import Settings
from orchestrator.domain import ActionDone, AgentLaunch, AgentReport, Event, JuryConfigEvent, TargetEvent
from orchestrator.errors import StoreError
from orchestrator.fold import RunState, fold
from orchestrator.spec import AgentSpec, JuryConfig, SandboxSettings, Target
from orchestrator.store.files import FileStore
from orchestrator.store.memory import ManualClock, MemoryStore
from workers.fleet import reaping
from workers.fleet.ledger import MemoryLedger
from workers.runtime import coordinator, shutdown
from workers.runtime.context import Job, Runtime, finish, load_job
from workers.runtime.lease import MemoryLeases

SLUG = "acme-widgets-pr-7"
LEASE_TTL = 600.0  # long in real time: the heartbeat never renews during a test; the clock decides
REAP_AFTER = 120.0
SPEC = AgentSpec(name="x", argv=["x", "{prompt}"], judge_argv=["x", "{prompt}"])

Handler = Callable[[Runtime, str, str, Callable[[], bool]], None]


@dataclass
class Twins:
    rt: Runtime
    clock: ManualClock
    store: MemoryStore
    leases: MemoryLeases
    sent: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, slug, key), in order
    kicked: list[str] = field(default_factory=list)

    def state(self, slug: str = SLUG) -> RunState:
        return fold(self.store.read(slug), slug)

    def eids(self, slug: str = SLUG) -> list[str]:
        return [e.eid for e in self.store.read(slug)]


@pytest.fixture
def tw(tmp_path: Path) -> Twins:
    clock = ManualClock()
    store, leases = MemoryStore(clock), MemoryLeases(clock)
    settings = Settings(dir=tmp_path / "state", lease_ttl=LEASE_TTL, reap_after=REAP_AFTER, retention=3600)
    sent: list[tuple[str, str, str]] = []
    kicked: list[str] = []
    rt = Runtime(
        settings=settings,
        store=store,
        files=FileStore(settings.dir),
        send=lambda kind, slug, key: sent.append((kind, slug, key)),
        kick=kicked.append,
        lease_backend=leases,
        ledger_backend=MemoryLedger(clock),
    )
    return Twins(rt, clock, store, leases, sent, kicked)


def handlers(monkeypatch: pytest.MonkeyPatch, **by_kind: Handler) -> None:
    """The action handlers ``run_task`` calls, for this test only."""
    monkeypatch.setattr(coordinator, "TASKS", by_kind)


@dataclass
class FakeReview:
    """A reviewer's handler: launch, (``during`` the agent), then its report and ``action.done`` in one
    batch, as ``workers.runtime.jobs.review`` does. ``runs`` counts the agents it started."""

    verdict: str = "clean"
    during: Callable[[Job], None] | None = None
    runs: list[str] = field(default_factory=list)

    def __call__(self, rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
        job = load_job(rt, slug, key, stop)
        if job is None:
            return
        a = job.action
        self.runs.append(key)
        rt.store.append(slug, [AgentLaunch(eid=f"{key}:launch", agent=a.agent or "", round=a.round, key=key)])
        if self.during is not None:
            self.during(job)
        report = AgentReport(
            eid=f"{key}:report",
            agent=a.agent or "",
            round=a.round,
            verdict=self.verdict,  # type: ignore[arg-type]
            seconds=1.0,
            key=key,
        )
        finish(rt, job, [report])


def start(tw: Twins, reviewers: tuple[str, ...] = ("a", "b")) -> RunState:
    """A run whose log says: review this target with these reviewers; then one coordinator pass."""
    config = JuryConfig(
        reviewers=list(reviewers),
        judge="j",
        agents={n: SPEC for n in (*reviewers, "j")},
        sandbox=SandboxSettings(mode="none"),
    )
    events: list[Event] = [
        TargetEvent(eid="target:0", target=Target(repo="r", id="feat", state="review", head="h0", base="b0")),
        JuryConfigEvent(eid="config:0", config=config),
    ]
    tw.store.append(SLUG, events)
    return coordinator.coordinate(tw.rt, SLUG)


def deliver(tw: Twins) -> Iterator[tuple[str, str, str]]:
    """Each task sent so far, once, in order (a broker that delivers everything exactly once)."""
    while tw.sent:
        yield tw.sent.pop(0)


def reports(tw: Twins, key: str) -> int:
    return sum(1 for e in tw.store.read(SLUG) if isinstance(e, AgentReport) and e.key == key)


KEY = "review:r1:a"
NAME = f"{SLUG}:{KEY}"


# -- the whole loop ------------------------------------------------------------------------------------------


def test_coordinate_dispatches_each_reviewer_once_and_keeps_the_run_active(tw: Twins) -> None:
    state = start(tw)
    assert tw.sent == [("review", SLUG, "review:r1:a"), ("review", SLUG, "review:r1:b")]
    assert [a.key for a in state.inflight()] == ["review:r1:a", "review:r1:b"]
    assert tw.store.active_runs() == [SLUG]
    assert tw.store.sent_age(SLUG, KEY) == 0.0  # marked when sent, by the store's clock
    coordinator.coordinate(tw.rt, SLUG)  # a second pass dispatches nothing new
    assert len(tw.sent) == 2
    assert [e.eid for e in tw.rt.files.read(SLUG)] == tw.eids()  # mirrored into the files record


def test_a_run_of_clean_reviewers_converges_on_the_twins(tw: Twins, monkeypatch: pytest.MonkeyPatch) -> None:
    review = FakeReview()
    handlers(monkeypatch, review=review)
    start(tw)
    for _ in range(20):
        for kind, slug, key in deliver(tw):
            coordinator.run_task(tw.rt, kind, slug, key)
        if not tw.kicked:
            break
        tw.kicked.clear()
        coordinator.coordinate(tw.rt, SLUG)
    state = tw.state()
    assert state.state == "converged", state.target.state_note
    summary = tw.store.read_summary(SLUG)  # the pass that saw the end wrote it, for listings
    assert summary is not None and (summary.state, summary.rounds) == ("converged", 1)
    assert [seat.agent for seat in summary.seats] == ["a", "b"] and summary.ended == state.last_ts
    assert review.runs == ["review:r1:a", "review:r1:b"]
    assert tw.leases.is_done(NAME) and tw.leases.holder(NAME) is None
    assert tw.store.active_runs() == []  # ended: the reaper forgets it
    assert tw.store.expire_run(SLUG, 10**9) == int(tw.clock()) + 3600  # its retention was set when it ended


# -- run_task ------------------------------------------------------------------------------------------------


def test_a_redelivered_task_runs_its_agent_once(tw: Twins, monkeypatch: pytest.MonkeyPatch) -> None:
    review = FakeReview()
    handlers(monkeypatch, review=review)
    start(tw)
    coordinator.run_task(tw.rt, "review", SLUG, KEY)
    after_first = tw.eids()
    assert tw.leases.is_done(NAME)
    tw.kicked.clear()

    coordinator.run_task(tw.rt, "review", SLUG, KEY)  # the broker delivers it again
    assert review.runs == [KEY]
    assert tw.eids() == after_first
    assert tw.kicked == []  # the first delivery woke the coordinator; a copy adds no pass
    assert tw.leases.holder(NAME) is None  # the redelivery never took the lease


def test_a_task_whose_lease_another_holds_does_nothing(tw: Twins, monkeypatch: pytest.MonkeyPatch) -> None:
    review = FakeReview()
    handlers(monkeypatch, review=review)
    start(tw)
    other = tw.leases.lease(NAME, ttl=LEASE_TTL)
    assert other.acquire()  # a worker on another host is running it
    coordinator.run_task(tw.rt, "review", SLUG, KEY)
    assert review.runs == [] and reports(tw, KEY) == 0
    assert tw.leases.holder(NAME) == other.token and not tw.leases.is_done(NAME)


def test_a_lost_lease_appends_nothing_and_marks_nothing(tw: Twins, monkeypatch: pytest.MonkeyPatch) -> None:
    rival = tw.leases.lease(NAME, ttl=LEASE_TTL)

    def frozen_past_the_lease(job: Job) -> None:
        tw.clock.advance(LEASE_TTL + 1)  # the worker froze; its lease lapsed
        assert rival.acquire()  # and another worker took the action

    review = FakeReview(during=frozen_past_the_lease)
    handlers(monkeypatch, review=review)
    start(tw)
    coordinator.run_task(tw.rt, "review", SLUG, KEY)
    assert review.runs == [KEY]  # its agent ran, but
    assert reports(tw, KEY) == 0  # its result is not recorded: the action is the rival's now
    assert not tw.state().actions[KEY].done
    assert not tw.leases.is_done(NAME)
    assert tw.leases.holder(NAME) == rival.token  # and its lease was not released from under the rival


def test_a_crash_between_the_append_and_the_done_marker(tw: Twins, monkeypatch: pytest.MonkeyPatch) -> None:
    review = FakeReview()
    handlers(monkeypatch, review=review)
    start(tw)
    real_mark = tw.leases.mark_done

    def store_gone(key: str, ttl_days: float = 7) -> None:
        raise StoreError("connection lost")

    monkeypatch.setattr(tw.leases, "mark_done", store_gone)
    with pytest.raises(StoreError, match="connection lost"):
        coordinator.run_task(tw.rt, "review", SLUG, KEY)
    assert reports(tw, KEY) == 1 and tw.state().actions[KEY].done  # the result is in the log
    assert not tw.leases.is_done(NAME)  # the marker is not
    logged = tw.eids()

    monkeypatch.setattr(tw.leases, "mark_done", real_mark)
    tw.clock.advance(LEASE_TTL + 1)  # had the worker died holding it, its lease would lapse too
    coordinator.run_task(tw.rt, "review", SLUG, KEY)  # the broker delivers it again
    assert review.runs == [KEY]  # the log says it ran: no second agent
    assert tw.eids() == logged  # nothing new appended
    assert tw.leases.is_done(NAME)  # and now it is marked done


def test_a_death_mid_agent_is_run_again_and_its_events_dedupe(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    class WorkerDied(BaseException):
        """Not an Exception: nothing in run_task records it (the process is gone)."""

    deaths: list[str] = []

    def die_once(job: Job) -> None:
        if not deaths:
            deaths.append(job.action.key)
            raise WorkerDied

    review = FakeReview(during=die_once)
    handlers(monkeypatch, review=review)
    start(tw)
    with pytest.raises(WorkerDied):
        coordinator.run_task(tw.rt, "review", SLUG, KEY)
    assert f"{KEY}:launch" in tw.eids() and reports(tw, KEY) == 0
    assert not tw.leases.is_done(NAME)

    tw.clock.advance(LEASE_TTL + 1)
    coordinator.run_task(tw.rt, "review", SLUG, KEY)
    assert review.runs == [KEY, KEY]  # the agent ran again: its first run left no result
    assert tw.eids().count(f"{KEY}:launch") == 1  # the second launch event had the same id
    assert reports(tw, KEY) == 1 and tw.leases.is_done(NAME)


def test_a_crashing_handler_records_its_failure_and_is_done(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
        raise RuntimeError("the agent's parser broke")

    handlers(monkeypatch, review=boom)
    start(tw)
    coordinator.run_task(tw.rt, "review", SLUG, KEY)
    action = tw.state().actions[KEY]
    assert action.done and not action.ok
    errors = [e for e in tw.store.read(SLUG) if isinstance(e, AgentReport) and e.key == KEY]
    assert [e.verdict for e in errors] == ["error"] and "the agent's parser broke" in (errors[0].error or "")
    assert tw.leases.is_done(NAME)


# -- reap ----------------------------------------------------------------------------------------------------


def test_reap_kicks_only_a_run_with_nothing_in_flight(tw: Twins) -> None:
    """A run whose actions are in flight is kicked by each of them as it ends; one with nothing in flight
    (a lost kick, a coordinator pass that died before it dispatched) only by the reaper."""
    start(tw)
    assert coordinator.reap(tw.rt) == [] and tw.kicked == []  # both reviews in flight
    for _kind, slug, key in deliver(tw):  # both reviews end (their kicks are lost: nobody coordinates)
        tw.store.append(slug, [ActionDone(eid=f"{key}:done", key=key, ok=True)])
    assert tw.state().inflight() == []
    assert coordinator.reap(tw.rt) == [] and tw.kicked == [SLUG]


def test_the_reapers_digest_is_what_the_full_fold_says(tw: Twins) -> None:
    """What a pass reads of a run from the snapshot's digest equals what it would fold from the log, and a
    run with events after its snapshot is folded instead (a digest would be stale)."""
    start(tw)
    folded = reaping.view_of(tw.state())
    assert [d is not None for d in tw.store.reap_digests([SLUG])] == [True]
    assert reaping.views(tw.rt.store, [SLUG]) == [folded] and folded.inflight  # the reviews in flight
    (kind, slug, key), *_ = deliver(tw)
    tw.store.append(slug, [ActionDone(eid=f"{key}:done", key=key, ok=True)])  # no coordinate pass yet
    assert tw.store.reap_digests([SLUG]) == [None]
    now = reaping.view_of(tw.state())
    assert reaping.views(tw.rt.store, [SLUG]) == [now] and len(now.inflight) == len(folded.inflight) - 1


def test_reap_goes_batch_by_batch_and_stops_when_told(tw: Twins, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass reads its runs a batch at a time and asks ``holding`` before each (the reaper's lock is
    still this worker's, the pass within its bound): told no, it stops, and the next pass starts at
    another place, so every run is reached."""
    monkeypatch.setattr(coordinator, "REAP_BATCH", 2)
    slugs = [f"idle-{i}" for i in range(5)]
    for slug in slugs:
        tw.store.activate(slug)  # active, nothing in flight: a pass kicks each it reaches
    answers = iter([True, True, False])  # two batches, then the lock is gone
    assert coordinator.reap(tw.rt, lambda: next(answers)) == []
    assert len(tw.kicked) == 4 and len(set(tw.kicked)) == 4  # two batches of two; the fifth waits
    kicked_before = set(tw.kicked)
    tw.clock.advance(2 * tw.rt.settings.reap_after + 1)  # the kick marks lapse
    tw.kicked.clear()
    assert coordinator.reap(tw.rt) == [] and sorted(tw.kicked) == slugs  # a whole pass reaches all
    assert set(slugs) - kicked_before  # the one the cut-short pass left


def test_reap_resends_an_action_whose_lease_expired_without_a_done_marker(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    review = FakeReview()
    handlers(monkeypatch, review=review)
    start(tw)
    tw.sent.clear()
    dead = tw.leases.lease(NAME, ttl=LEASE_TTL)
    assert dead.acquire()  # a worker took the action, then died without a word
    tw.store.mark_taken(SLUG, KEY)  # (as run_task marks it, once it holds the lease)
    tw.leases.mark_done(f"{SLUG}:review:r1:b")  # the other reviewer's task finished (its events aside)

    assert coordinator.reap(tw.rt) == []  # the dead worker's lease is still alive
    tw.clock.advance(LEASE_TTL + 1)  # past the lease
    assert coordinator.reap(tw.rt) == [NAME]
    assert tw.sent == [("review", SLUG, KEY)]
    assert tw.kicked == []  # its actions are in flight: each kicks the run as it ends
    assert tw.store.sent_age(SLUG, KEY) == 0.0  # sent again: a new message, not taken yet
    assert coordinator.reap(tw.rt) == []  # so the next pass does not send it a third time

    for kind, slug, key in deliver(tw):
        coordinator.run_task(tw.rt, kind, slug, key)
    assert review.runs == [KEY] and reports(tw, KEY) == 1 and tw.leases.is_done(NAME)
    tw.clock.advance(REAP_AFTER + 1)
    assert coordinator.reap(tw.rt) == []  # done: never handed out again


def test_reap_waits_reap_after_since_the_last_send(tw: Twins) -> None:
    start(tw)
    tw.sent.clear()
    tw.clock.advance(REAP_AFTER - 1)  # no lease was ever taken (the message may still be queued)
    assert coordinator.reap(tw.rt) == [] and tw.sent == []
    tw.clock.advance(1)
    assert coordinator.reap(tw.rt) == []  # sent again (it may be lost), but no lease was recovered
    assert sorted(key for _, _, key in tw.sent) == ["review:r1:a", "review:r1:b"]
    tw.clock.advance(REAP_AFTER)
    coordinator.reap(tw.rt)
    assert len(tw.sent) == 2  # and then not every reap_after: tests/unit/test_reap_backoff.py


def test_reap_forgets_an_ended_run(tw: Twins) -> None:
    start(tw)
    tw.store.append(SLUG, [TargetEvent(eid="end:1", target=Target(state="cancelled", state_note="stop"))])
    tw.sent.clear()
    tw.clock.advance(REAP_AFTER + 1)
    assert coordinator.reap(tw.rt) == []  # its in-flight actions are not handed out
    assert tw.sent == [] and tw.kicked == [] and tw.store.active_runs() == []


# -- a run whose log is gone ---------------------------------------------------------------------------------


def test_a_run_with_an_empty_log_leaves_the_active_set_and_nothing_is_written(tw: Twins) -> None:
    tw.store.activate(SLUG)  # active, but its log is gone (deleted, or expired)
    assert coordinator.reap(tw.rt) == [] and tw.kicked == [SLUG]
    state = coordinator.coordinate(tw.rt, SLUG)
    assert state.events == 0
    assert tw.store.active_runs() == []
    assert not tw.store.exists(SLUG) and tw.store.read_state(SLUG) is None  # nothing written back
    assert not tw.rt.files.exists(SLUG)
    assert tw.sent == []
    tw.kicked.clear()
    assert coordinator.reap(tw.rt) == [] and tw.kicked == []  # the reaper no longer kicks it


def test_a_runtime_on_a_memory_store_needs_its_twins(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="lease_backend and ledger_backend"):
        Runtime(
            settings=Settings(dir=tmp_path),
            store=MemoryStore(),
            files=FileStore(tmp_path),
            send=lambda *a: None,
            kick=lambda s: None,
        )


def test_a_worker_handing_back_records_nothing_and_sends_the_action_again_at_once(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM's grace is over while the agent runs (``workers.runtime.shutdown``): the task is interrupted,
    records nothing, releases its lease (no waiting for the TTL) and sends its action again for another
    worker."""

    def grace_over(job: Job) -> None:
        if len(review.runs) == 1:  # on the worker shutting down
            shutdown.hand_back_now()
            assert job.interrupted()  # what stops the agent's process group

    review = FakeReview(during=grace_over)
    handlers(monkeypatch, review=review)
    start(tw)
    tw.sent.clear()
    try:
        coordinator.run_task(tw.rt, "review", SLUG, KEY)
    finally:
        shutdown.reset()
    assert review.runs == [KEY]
    assert reports(tw, KEY) == 0 and not tw.state().actions[KEY].done
    assert not tw.leases.is_done(NAME)
    assert tw.leases.holder(NAME) is None  # free now, not after LEASE_TTL
    assert tw.sent == [("review", SLUG, KEY)]
    coordinator.run_task(tw.rt, "review", SLUG, KEY)  # the next worker takes it and runs it
    assert review.runs == [KEY, KEY] and reports(tw, KEY) == 1 and tw.leases.is_done(NAME)
