"""The ``publish`` action on the in-memory twins: an ended run with ``publish`` on stays active (the reaper
keeps an eye on it) until its publish is recorded, a dead publisher's action is handed out again, a
crashed one is recorded as a failed publish, and a run without ``publish`` is forgotten as it ends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.config import Settings
from orchestrator.domain import JuryConfigEvent, RunPublished, TargetEvent
from orchestrator.fold import fold
from orchestrator.spec import AgentSpec, JuryConfig, Target
from orchestrator.store.files import FileStore
from orchestrator.store.memory import ManualClock, MemoryStore
from workers.fleet.ledger import MemoryLedger
from workers.runtime import coordinator
from workers.runtime.context import Job, Runtime, finish
from workers.runtime.lease import MemoryLeases

SLUG = "acme-widgets-7"
KEY = "publish:converged:e0"
REAP_AFTER = 120.0


@pytest.fixture
def twins(tmp_path: Path) -> tuple[Runtime, ManualClock, MemoryStore, MemoryLeases, list, list]:
    clock = ManualClock()
    store, leases = MemoryStore(clock), MemoryLeases(clock)
    settings = Settings(dir=tmp_path / "state", lease_ttl=600.0, reap_after=REAP_AFTER, retention=3600)
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
    return rt, clock, store, leases, sent, kicked


def ended(store: MemoryStore, publish: bool) -> None:
    spec = AgentSpec(name="a", argv=["a"], judge_argv=["a"])
    config = JuryConfig(reviewers=["a"], judge="a", agents={"a": spec}, publish=publish)
    target = Target(
        repo="widgets", url="https://github.com/acme/widgets/pull/7", head="h" * 40, state="review"
    )
    store.append(
        SLUG,
        [
            TargetEvent(eid="target:0", target=target),
            JuryConfigEvent(eid="config:0", config=config),
            TargetEvent(eid="end", target=Target(state="converged", state_note="all clean")),
        ],
    )


def test_an_ended_run_stays_active_until_its_publish_is_recorded(twins, monkeypatch) -> None:
    rt, clock, store, leases, sent, _ = twins
    ended(store, publish=True)
    coordinator.coordinate(rt, SLUG)
    assert sent == [("publish", SLUG, KEY)]
    assert store.active_runs() == [SLUG]  # ended, but still to be published
    sent.clear()
    dead = leases.lease(f"{SLUG}:{KEY}", ttl=600.0)
    assert dead.acquire()  # a worker took it and died
    store.mark_taken(SLUG, KEY)  # (as run_task marks it, once it holds the lease)
    clock.advance(601)
    assert coordinator.reap(rt) == [f"{SLUG}:{KEY}"] and sent == [("publish", SLUG, KEY)]

    def posted(rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
        s = fold(rt.store.read(slug), slug)
        job = Job(slug=slug, state=s, action=s.actions[key], interrupted=stop)
        event = RunPublished(eid=f"{key}:published", key=key, state="converged", ok=True, review_id="1")
        finish(rt, job, [event])

    monkeypatch.setattr(coordinator, "TASKS", {"publish": posted})
    coordinator.run_task(rt, "publish", SLUG, KEY)
    coordinator.coordinate(rt, SLUG)
    assert store.active_runs() == []  # published: the reaper forgets it
    assert [p["reviewId"] for p in fold(store.read(SLUG), SLUG).published] == ["1"]
    coordinator.coordinate(rt, SLUG)
    assert sent == [("publish", SLUG, KEY)]  # never dispatched twice for one end


def test_a_crashed_publish_is_a_failed_publish_on_record(twins, monkeypatch) -> None:
    rt, _, store, _, sent, _ = twins
    ended(store, publish=True)
    coordinator.coordinate(rt, SLUG)

    def boom(rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
        raise RuntimeError("the forge client broke")

    monkeypatch.setattr(coordinator, "TASKS", {"publish": boom})
    coordinator.run_task(rt, "publish", SLUG, KEY)
    coordinator.coordinate(rt, SLUG)
    (record,) = fold(store.read(SLUG), SLUG).published
    assert not record["ok"] and "the forge client broke" in record["error"] and record["key"] == KEY
    assert store.active_runs() == []


def test_a_run_without_publish_is_forgotten_as_it_ends(twins) -> None:
    rt, _, store, _, sent, _ = twins
    ended(store, publish=False)
    coordinator.coordinate(rt, SLUG)
    assert sent == [] and store.active_runs() == []
