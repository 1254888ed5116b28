"""The coordinator folds from its snapshot: only the events after the position it covers are read, a
snapshot that does not match is rebuilt from the whole log, and liveness ticks stay beside the log.

On the in-memory twins (``tests/unit/test_coordinator_twins.py``): a ``MemoryStore`` that counts the
events it hands out, so "reads only the tail" is a count, not a timing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog

from orchestrator import fold as fold_module
from orchestrator.config import Settings
from orchestrator.domain import AgentAlive, AgentLaunch, Event, RoundStart
from orchestrator.fold import RunState, apply, fold, restore, snapshot
from orchestrator.store.files import FileStore
from orchestrator.store.memory import ManualClock, MemoryStore
from tests.unit.test_coordinator_twins import SLUG, FakeReview, Twins, deliver, handlers, start
from workers.fleet.ledger import MemoryLedger
from workers.runtime import coordinator
from workers.runtime.context import Job, Runtime, load_job
from workers.runtime.lease import MemoryLeases


class CountingStore(MemoryStore):
    """A ``MemoryStore`` that counts the events its reads return."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.handed = 0

    def read(self, slug: str, after: int = 0) -> list[Event]:
        events = super().read(slug, after)
        self.handed += len(events)
        return events

    def read_after(self, slug: str, position: str | None) -> list[tuple[str, Event]] | None:
        found = super().read_after(slug, position)
        self.handed += len(found or [])
        return found


@pytest.fixture
def tw(tmp_path: Path) -> Twins:
    clock = ManualClock()
    store, leases = CountingStore(clock), MemoryLeases(clock)
    settings = Settings(dir=tmp_path / "state", lease_ttl=600.0, reap_after=120.0, retention=3600)
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


def converge(tw: Twins, monkeypatch: pytest.MonkeyPatch, during: Callable[[Job], None] | None = None) -> None:
    handlers(monkeypatch, review=FakeReview(during=during))
    start(tw)
    for _ in range(20):
        for kind, slug, key in deliver(tw):
            coordinator.run_task(tw.rt, kind, slug, key)
        if not tw.kicked:
            break
        tw.kicked.clear()
        coordinator.coordinate(tw.rt, SLUG)


def full(state: RunState) -> dict[str, Any]:
    return state.model_dump(mode="json")


def old_ticks(n: int) -> list[AgentAlive]:
    """Ticks as logs written before they were kept beside the log hold them (round 9: no such slot)."""
    return [
        AgentAlive(eid=f"old:alive:{i}", agent="a", round=9, seconds=float(i), quiet_seconds=0.0)
        for i in range(n)
    ]


def test_snapshot_and_the_tail_fold_to_the_whole_log_at_every_cut(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    converge(tw, monkeypatch)
    events = tw.store.read(SLUG)
    assert fold(events, SLUG).state == "converged"
    origin = tw.store.origin(SLUG)
    whole = full(fold(events, SLUG))
    for cut in range(len(events) + 1):
        doc = json.loads(json.dumps(snapshot(fold(events[:cut], SLUG), str(cut), origin)))  # as stored
        restored = restore(doc, origin)
        assert restored is not None and restored[1] == str(cut)
        state = restored[0]
        for e in events[cut:]:
            apply(state, e)
        assert full(state) == whole, f"cut at {cut}"


def test_a_pass_with_a_snapshot_reads_only_the_events_after_it(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    converge(tw, monkeypatch)
    store = tw.store
    assert isinstance(store, CountingStore)
    store.append(SLUG, old_ticks(500))  # a long log (an old run's ticks)
    coordinator.coordinate(tw.rt, SLUG)  # folds them once
    store.handed = 0
    state = coordinator.coordinate(tw.rt, SLUG)
    assert store.handed == 0  # nothing new: nothing read
    store.append(SLUG, old_ticks(503)[500:])
    state = coordinator.coordinate(tw.rt, SLUG)
    assert store.handed == 3
    assert full(state) == full(fold(store.read(SLUG), SLUG))
    assert [e.eid for e in tw.rt.files.read(SLUG)] == [e.eid for e in store.read(SLUG)]  # mirrored, all of it
    assert json.loads((tw.rt.settings.dir / "runs" / SLUG / "run.json").read_text())["jury"]["events"] == len(
        store.read(SLUG)
    )


def test_the_reaper_and_a_task_read_only_the_events_after_the_snapshot(
    tw: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    converge(tw, monkeypatch)
    store = tw.store
    assert isinstance(store, CountingStore)
    store.append(SLUG, old_ticks(500))  # a long log
    coordinator.coordinate(tw.rt, SLUG)  # the snapshot covers it
    key = next(iter(fold(store.read(SLUG), SLUG).actions))
    store.handed = 0
    coordinator.reap(tw.rt)
    assert load_job(tw.rt, SLUG, key) is None  # done long ago: read, and nothing to run
    assert store.handed == 0  # neither folded the 500 events again


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda doc, store: doc.update(version=doc["version"] + 1), id="another fold version"),
        pytest.param(lambda doc, store: doc.update(kinds="0" * 16), id="other event kinds"),
        pytest.param(lambda doc, store: doc.update(position="100000"), id="a position not in the log"),
        pytest.param(lambda doc, store: doc.update(position=None), id="no position"),
        pytest.param(lambda doc, store: doc.update(origin="another log"), id="another log"),
        pytest.param(lambda doc, store: doc.update(state={"slug": 7}), id="a state that does not validate"),
    ],
)
def test_a_snapshot_that_does_not_match_is_rebuilt_from_the_log(
    tw: Twins, monkeypatch: pytest.MonkeyPatch, spoil: Callable[[dict[str, Any], MemoryStore], None]
) -> None:
    converge(tw, monkeypatch)
    store = tw.store
    assert isinstance(store, CountingStore)
    doc = store.read_snapshot(SLUG)
    assert doc is not None
    doc["state"]["target"]["state_note"] = "FROM THE SNAPSHOT"
    store.write_snapshot(SLUG, doc)
    assert coordinator.coordinate(tw.rt, SLUG).target.state_note == "FROM THE SNAPSHOT"  # it is trusted
    spoil(doc, store)
    store.write_snapshot(SLUG, doc)
    whole = store.read(SLUG)
    store.handed = 0
    state = coordinator.coordinate(tw.rt, SLUG)
    assert store.handed == len(whole)  # the whole log was read
    assert state.target.state_note != "FROM THE SNAPSHOT"
    assert full(state) == full(fold(whole, SLUG))
    rebuilt = restore(store.read_snapshot(SLUG), store.origin(SLUG))
    assert rebuilt is not None and full(rebuilt[0]) == full(state)  # and the snapshot written again


def test_a_bumped_fold_version_rebuilds(tw: Twins, monkeypatch: pytest.MonkeyPatch) -> None:
    converge(tw, monkeypatch)
    origin = tw.store.origin(SLUG)
    assert restore(tw.store.read_snapshot(SLUG), origin) is not None
    monkeypatch.setattr(fold_module, "FOLD_VERSION", fold_module.FOLD_VERSION + 1)
    assert restore(tw.store.read_snapshot(SLUG), origin) is None


def test_ticks_stay_beside_the_log_and_show_in_run_json(tw: Twins, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def during(job: Job) -> None:  # while agent a runs: two ticks, then a pass shows the latest
        if job.action.agent != "a":
            return
        for seconds in (30.0, 60.0):
            tw.rt.store.put_alive(
                SLUG,
                AgentAlive(
                    eid=f"{job.action.key}:alive:{seconds}",
                    agent="a",
                    round=job.action.round,
                    seconds=seconds,
                    quiet_seconds=seconds / 2,
                    key=job.action.key,
                ),
            )
        state = coordinator.coordinate(tw.rt, SLUG)
        seen["slot"] = state.rounds[-1].agents["a"].model_dump()
        seen["json"] = json.loads((tw.rt.settings.dir / "runs" / SLUG / "run.json").read_text())

    converge(tw, monkeypatch, during)
    assert seen["slot"]["state"] == "running" and seen["slot"]["seconds"] == 60.0
    assert seen["slot"]["quiet_seconds"] == 30.0
    verdicts = seen["json"]["rounds"][-1]["verdicts"]
    assert [v["seconds"] for v in verdicts if v["a"] == "a"] == [60.0]
    assert not any(e.t == "agent.alive" for e in tw.store.read(SLUG))  # the log did not grow
    snap = restore(tw.store.read_snapshot(SLUG), tw.store.origin(SLUG))
    assert snap is not None and full(snap[0]) == full(fold(tw.store.read(SLUG), SLUG))  # nor the snapshot


def test_an_old_log_with_ticks_in_it_still_folds() -> None:
    converged = RunState(slug=SLUG)
    events: list[Event] = [
        RoundStart(eid="round.start:1", n=1, sha="h", prompt="p"),
        AgentLaunch(eid="k:launch", agent="a", round=1, key="k"),
        AgentAlive(eid="k:alive:1", agent="a", round=1, seconds=30.0, quiet_seconds=5.0, key="k"),
    ]
    for e in events:
        apply(converged, e)
    slot = converged.rounds[0].agents["a"]
    assert (slot.state, slot.seconds, slot.quiet_seconds) == ("running", 30.0, 5.0)


def test_jury_show_lays_the_latest_tick_over_the_fold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from jury_cli import backend, runs

    store = MemoryStore()
    store.append(
        SLUG,
        [
            RoundStart(eid="round.start:1", n=1, sha="h", prompt="p"),
            AgentLaunch(eid="k:launch", agent="a", round=1, key="k"),
        ],
    )
    store.put_alive(
        SLUG, AgentAlive(eid="k:alive:2", agent="a", round=1, seconds=60.0, quiet_seconds=9.0, key="k")
    )
    monkeypatch.setattr(backend, "reading_store", lambda settings: store)  # imported by show when it runs
    saved = structlog.get_config()  # the command configures logging onto the captured stdout
    try:
        runs.show(SLUG, as_json=True, dir=tmp_path)
    finally:
        structlog.configure(**saved)
    slot = json.loads(capsys.readouterr().out)["rounds"][0]["agents"]["a"]
    assert (slot["seconds"], slot["quietSeconds"]) == (60.0, 9.0)
