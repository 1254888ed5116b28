"""Fair sharing without Redis: what a ``[limits]`` pattern matches, which slots an action needs, and
``run_task`` putting an action back (a full slot, a model's rate limit) on the in-memory twins, where the
reaper must not take it for lost.

The semaphores' own contract (Redis and memory alike, expiry of a dead holder) is
tests/integration/test_slots.py; end to end with worker processes, tests/e2e/test_fair_share.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rich.console import Console

from jury_cli.progress import summary
from orchestrator.config import Settings
from orchestrator.domain import (
    ActionDeferred,
    ActionDispatched,
    ActionDone,
    AgentLaunch,
    AgentReport,
    Event,
    JuryConfigEvent,
    TargetEvent,
)
from orchestrator.fold import RunState, apply, fold
from orchestrator.spec import AgentSpec, JuryConfig, Limits, SandboxSettings, Target
from orchestrator.store.files import FileStore
from orchestrator.store.memory import ManualClock, MemoryStore
from workers.agents.run import RateLimited
from workers.fleet.ledger import MemoryLedger
from workers.isolation.limits import (
    MAX_BACKOFFS,
    SLEEP_AT_MOST,
    MemorySlots,
    Slot,
    Waiter,
    parse_waiter,
    slots_for,
    subjects,
    waiter_id,
    wanted,
)
from workers.runtime import coordinator
from workers.runtime.context import Job, Runtime, finish, load_job
from workers.runtime.lease import MemoryLeases
from workers.runtime.seating import defer_after

LEASE_TTL = 600.0  # the heartbeats never renew during a test: the clock decides
REAP_AFTER = 120.0
CLI = AgentSpec(name="x", argv=["x", "{prompt}"], judge_argv=["x", "{prompt}"])


# --- what a pattern matches --------------------------------------------------------------------------------


def http(model: str, **extra: object) -> AgentSpec:
    return AgentSpec.model_validate(
        {"name": "m", "kind": "http", "base_url": "http://x", "model": model, **extra}
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (http("anthropic/claude-sonnet-4"), ["anthropic/claude-sonnet-4"]),
        (
            http("openrouter/anthropic/claude-sonnet-4"),
            ["openrouter/anthropic/claude-sonnet-4", "anthropic/openrouter/anthropic/claude-sonnet-4"],
        ),
        (
            AgentSpec(name="claude", argv=["claude", "{prompt}"], model="sonnet"),
            ["sonnet", "anthropic/sonnet"],
        ),
        (AgentSpec(name="claude", argv=["claude", "{prompt}"]), ["anthropic/default"]),
        (http("Local-Llama", family="meta"), ["local-llama", "meta/local-llama"]),
        (AgentSpec(name="mystery", argv=["mystery"]), []),
    ],
)
def test_subjects_are_the_model_and_family_slash_model(spec: AgentSpec, expected: list[str]) -> None:
    assert subjects(spec) == expected


def test_a_pattern_limits_every_agent_it_matches_case_insensitively() -> None:
    limits = Limits(per_model={"Anthropic/*": 8, "gpt-5*": 2, "nobody/*": 1})
    claude_cli = AgentSpec(name="claude", argv=["claude", "{prompt}"])
    assert [s.name for s in slots_for(limits, None, http("anthropic/claude-sonnet-4"))] == [
        "model:Anthropic/*"
    ]
    assert [s.name for s in slots_for(limits, None, claude_cli)] == ["model:Anthropic/*"]
    assert [(s.name, s.limit) for s in slots_for(limits, None, http("gpt-5-mini"))] == [("model:gpt-5*", 2)]
    assert slots_for(limits, None, CLI) == []  # no model, no family: no pattern holds it
    # the fallback models do not count: only the configured model
    assert slots_for(limits, None, http("acme/x", fallback=["anthropic/claude-sonnet-4"])) == []


def run_state(target: Target, limits: Limits, *, done: bool = False, agent: str | None = "a") -> RunState:
    config = JuryConfig(reviewers=["a"], judge="a", agents={"a": CLI}, limits=limits)
    events: list[Event] = [
        TargetEvent(eid="target:0", target=target),
        JuryConfigEvent(eid="config:0", config=config),
        ActionDispatched(eid="d", key="k", kind="review", round=1, agent=agent),
    ]
    if done:
        events.append(ActionDone(eid="k:done", key="k"))
    return fold(events, "s")


def test_the_repository_is_its_forge_identity_for_a_pr_and_its_path_for_a_local_one() -> None:
    pr = Target(url="https://github.com/Acme/App/pull/7", path="/state/mirrors/github.com/Acme/App.git")
    (slot,) = wanted(run_state(pr, Limits(per_repo=4)), "k")
    assert slot == Slot("repo:github.com/acme/app", 4, "[limits] per_repo = 4 (github.com/acme/app)")
    local = Target(path="/src/app", state="review")
    assert [s.name for s in wanted(run_state(local, Limits(per_repo=1)), "k")] == ["repo:/src/app"]


def test_nothing_is_wanted_without_limits_an_agent_or_work_to_do() -> None:
    local = Target(path="/src/app", state="review")
    assert wanted(run_state(local, Limits()), "k") == []
    assert wanted(run_state(local, Limits(per_repo=1), done=True), "k") == []
    assert wanted(run_state(local, Limits(per_repo=1), agent=None), "k") == []  # a push: no agent
    ended = Target(path="/src/app", state="cancelled")
    assert wanted(run_state(ended, Limits(per_repo=1)), "k") == []
    assert wanted(run_state(local, Limits(per_repo=1)), "other") == []


# --- run_task puts an action back -------------------------------------------------------------------------


@dataclass
class Twins:
    rt: Runtime
    clock: ManualClock
    store: MemoryStore
    leases: MemoryLeases
    slots: MemorySlots
    sent: list[tuple[str, str, str]] = field(default_factory=list)
    later: list[tuple[str, str, str, float]] = field(default_factory=list)

    def state(self, slug: str) -> RunState:
        return fold(self.store.read(slug), slug)


@pytest.fixture
def tw(tmp_path: Path) -> Twins:
    clock = ManualClock()
    store, leases, slots = MemoryStore(clock), MemoryLeases(clock), MemorySlots(clock)
    settings = Settings(
        dir=tmp_path / "state", lease_ttl=LEASE_TTL, reap_after=REAP_AFTER, retention=3600, limit_wait=4.0
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
        slots_backend=slots,
    )
    return Twins(rt, clock, store, leases, slots, sent, later)


def start(tw: Twins, slug: str, path: str, limits: Limits) -> None:
    """A run of the repository at ``path`` with one reviewer, dispatched by one coordinator pass."""
    config = JuryConfig(
        reviewers=["a"], judge="a", agents={"a": CLI}, sandbox=SandboxSettings(mode="none"), limits=limits
    )
    target = Target(repo="r", id=slug, state="review", head="h0", base="b0", path=path)
    tw.store.append(
        slug, [TargetEvent(eid="target:0", target=target), JuryConfigEvent(eid="config:0", config=config)]
    )
    coordinator.coordinate(tw.rt, slug)


KEY = "review:r1:a"


@dataclass
class Review:
    """A reviewer's handler: launch, ``during`` (the agent's time), report and done in one batch."""

    during: Callable[[], None] = lambda: None
    runs: list[str] = field(default_factory=list)

    def __call__(self, rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
        job = load_job(rt, slug, key, stop)
        if job is None:
            return
        self.runs.append(slug)
        rt.store.append(slug, [AgentLaunch(eid=f"{key}:launch", agent="a", round=1, key=key)])
        self.during()
        finish(
            rt,
            job,
            [AgentReport(eid=f"{key}:report", agent="a", round=1, verdict="clean", seconds=1, key=key)],
        )


def test_a_task_whose_repository_slot_is_full_is_put_back_and_not_lost(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    """per_repo = 1: while run one's review holds the slot, run two's is put back with a countdown, undone,
    its lease free; the reaper leaves it alone (its sent mark is fresh); once the slot is free it runs."""
    limits = Limits(per_repo=1)
    start(tw, "one", "/src/app", limits)
    start(tw, "two", "/src/app", limits)
    start(tw, "other", "/src/lib", limits)
    inner = Review()

    def meanwhile() -> None:
        tw.clock.advance(REAP_AFTER - 1)  # its first sending is nearly old enough for the reaper
        coordinator.run_task(tw.rt, "review", "two", KEY)  # same repository: put back
        coordinator.run_task(tw.rt, "review", "other", KEY)  # another repository: runs now

    outer = Review(during=meanwhile)
    monkeypatch.setattr(coordinator, "TASKS", {"review": lambda *a: (inner if a[1] != "one" else outer)(*a)})
    tw.sent.clear()
    coordinator.run_task(tw.rt, "review", "one", KEY)

    assert outer.runs == ["one"] and inner.runs == ["other"]
    (kind, slug, key, seconds) = tw.later.pop()
    assert (kind, slug, key) == ("review", "two", KEY) and 0.1 <= seconds <= REAP_AFTER / 2
    # run one's task gave the slot back: the task waiting for it is sent again at once (a wake), the
    # countdown copy still queued
    assert tw.sent == [("review", "two", KEY)]
    waited = [e for e in tw.store.read("two") if isinstance(e, ActionDeferred)]
    assert [(e.eid, e.reason, e.note) for e in waited] == [
        (f"{KEY}:wait:0", "slot", "[limits] per_repo = 1 (/src/app) is full")
    ]
    assert not tw.leases.is_done(f"two:{KEY}") and tw.leases.holder(f"two:{KEY}") is None
    assert tw.state("two").actions[KEY].deferred == "slot: [limits] per_repo = 1 (/src/app) is full"
    assert tw.slots.holders("repo:/src/app") == []  # run one's task ended: its slot is back
    # the reaper does not hand it out again while it waits in the broker
    tw.clock.advance(seconds)
    tw.sent.clear()
    assert coordinator.reap(tw.rt) == []

    coordinator.run_task(tw.rt, "review", "two", KEY)  # its countdown is over
    assert inner.runs == ["other", "two"] and tw.leases.is_done(f"two:{KEY}")
    assert tw.later == []


def test_a_slot_is_given_back_when_the_task_crashes_and_expires_when_its_worker_dies(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = Limits(per_repo=1)
    start(tw, "one", "/src/app", limits)

    def crash(*_: object) -> None:
        assert tw.slots.holders("repo:/src/app") != []  # held while it runs
        raise RuntimeError("agent exploded")

    monkeypatch.setattr(coordinator, "TASKS", {"review": crash})
    coordinator.run_task(tw.rt, "review", "one", KEY)
    assert tw.slots.holders("repo:/src/app") == []

    # a worker that dies holding a slot renews it no more: it is free once the lease's TTL has passed
    dead = Slot("repo:/src/app", 1, "x")
    assert tw.slots.take([dead], "dead-worker", LEASE_TTL) is None
    assert tw.slots.take([dead], "live-worker", LEASE_TTL) == dead
    tw.clock.advance(LEASE_TTL + 1)
    assert tw.slots.take([dead], "live-worker", LEASE_TTL) is None
    assert tw.slots.holders(dead.name) == ["live-worker"]


def test_a_wake_sends_only_known_kinds_and_a_failed_send_loses_nothing(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waiters are names read back from Redis: one that is not a waiter, or names a kind no handler is
    bound to, sends nothing; a broker that refuses one send does not stop the next (the refused task's
    countdown copy is still queued)."""
    assert parse_waiter("not json") is None and parse_waiter('["review", "one"]') is None
    assert parse_waiter(waiter_id("review", "a:b", KEY)) == Waiter("review", "a:b", KEY)
    sent: list[tuple[str, str, str]] = []

    def send(kind: str, slug: str, key: str) -> None:
        if slug == "refused":
            raise ConnectionError("the broker is restarting")
        sent.append((kind, slug, key))

    monkeypatch.setattr(tw.rt, "send", send)
    woken = [Waiter("review", "refused", KEY), Waiter("jury.evil", "x", KEY), Waiter("review", "two", KEY)]
    coordinator.wake_waiters(tw.rt, woken)
    assert sent == [("review", "two", KEY)]


def test_a_rate_limited_model_puts_its_action_back_numbering_each_attempt(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    start(tw, "one", "/src/app", Limits())
    attempts: list[int] = []

    def limited(rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
        job = load_job(rt, slug, key, stop)
        assert job is not None
        attempts.append(job.action.backoffs)
        raise RateLimited(600.0, "acme/x answered 429 with Retry-After 600s")

    monkeypatch.setattr(coordinator, "TASKS", {"review": limited})
    coordinator.run_task(tw.rt, "review", "one", KEY)
    coordinator.run_task(tw.rt, "review", "one", KEY)
    assert attempts == [0, 1]
    backs = [e for e in tw.store.read("one") if isinstance(e, ActionDeferred)]
    assert [(e.eid, e.reason, e.seconds) for e in backs] == [
        (f"{KEY}:backoff:1", "rate-limit", 600.0),  # 600 s asked: 600 s it is (the sent mark says so)
        (f"{KEY}:backoff:2", "rate-limit", 600.0),
    ]
    assert [x[:3] for x in tw.later] == [("review", "one", KEY)] * 2
    state = tw.state("one")
    assert not tw.leases.is_done(f"one:{KEY}") and state.actions[KEY].backoffs == 2
    # what `jury show` says of it while it waits, and no longer once it runs again
    shown = Console(record=True, width=200)
    summary(shown, state)
    assert f"{KEY} waiting (rate-limit: acme/x answered 429 with Retry-After 600s)" in shown.export_text()
    tw.store.append("one", [AgentLaunch(eid=f"{KEY}:b2:launch", agent="a", round=1, key=KEY)])
    assert tw.state("one").actions[KEY].deferred is None


def test_the_seat_is_told_to_defer_until_max_backoffs() -> None:
    """``defer_after`` stops deferring after MAX_BACKOFFS put-backs; ``run_task`` never gets there: it ends
    the action at its MAX_BACKOFFS-th refusal instead of a sleep in the slot
    (tests/unit/test_reap_backoff.py, ``test_a_spent_quota_ends_the_action_after_max_backoffs...``)."""
    state = run_state(Target(path="/src/app", state="review"), Limits())
    events = [
        ActionDeferred(eid=f"k:backoff:{n}", key="k", reason="rate-limit", seconds=1) for n in range(1, 40)
    ]
    for n, event in enumerate(events, 1):
        before = defer_after(Job(slug="s", state=state, action=state.actions["k"]))
        assert before == (SLEEP_AT_MOST if n - 1 < MAX_BACKOFFS else None)
        apply(state, event)
    assert state.actions["k"].backoffs == 39
