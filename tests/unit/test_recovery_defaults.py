"""The issue's promise, pinned to the defaults: a dead worker's actions are handed out again in under a
minute (``JURY_LEASE_TTL`` + ``JURY_REAP_EVERY`` + the reaper's quarter period), so a change of a default
that breaks it fails here. The arithmetic is ``workers.fleet.reaper.recovery_bound``; that each of its terms
is what the code waits is checked beside it: the reaper's tries (``next_try``), and ``reap``, which sends a
dead worker's action again as soon as its lease lapses, whatever ``JURY_REAP_AFTER`` says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import Settings
from orchestrator.domain import JuryConfigEvent, TargetEvent
from orchestrator.spec import AgentSpec, JuryConfig, SandboxSettings, Target
from orchestrator.store.files import FileStore
from orchestrator.store.memory import ManualClock, MemoryStore
from workers.fleet import reaper
from workers.fleet.ledger import MemoryLedger
from workers.fleet.reaper import TRIES_PER_PERIOD, next_try, recovery_bound
from workers.runtime import coordinator
from workers.runtime.context import Runtime
from workers.runtime.lease import MemoryLeases

SPEC = AgentSpec(name="x", argv=["x", "{prompt}"], judge_argv=["x", "{prompt}"])
UNDER = 60.0  # "the defaults keep that under a minute" (issue 11, part 1)


def default(name: str) -> Any:
    """The default of a setting as ``Settings`` declares it (no environment read)."""
    return Settings.model_fields[name].default


def test_the_default_settings_recover_a_dead_workers_actions_in_under_a_minute() -> None:
    lease_ttl, reap_every = default("lease_ttl"), default("reap_every")
    bound = recovery_bound(lease_ttl, reap_every)
    assert bound == lease_ttl + reap_every + reap_every / TRIES_PER_PERIOD
    assert bound < UNDER, f"lease_ttl {lease_ttl} + reap_every {reap_every} (+ a quarter): {bound} s"


def test_the_reaper_tries_its_lock_at_least_every_quarter_period(monkeypatch: pytest.MonkeyPatch) -> None:
    period = default("reap_every")
    monkeypatch.setattr(reaper.random, "uniform", lambda a, b: b)  # the longest jitter allows
    assert next_try(period) == period / TRIES_PER_PERIOD
    monkeypatch.setattr(reaper.random, "uniform", lambda a, b: a)
    assert next_try(period) == period / TRIES_PER_PERIOD / 2


def test_reap_waits_for_nothing_but_the_lease_of_a_dead_workers_action(tmp_path: Path) -> None:
    """With the default settings: the lease lapses one lease_ttl after the last heartbeat, and the next
    reap sends the action again; nothing else (reap_after paces messages nobody took) adds to it."""
    clock = ManualClock()
    store, leases = MemoryStore(clock), MemoryLeases(clock)
    settings = Settings(dir=tmp_path / "state")
    sent: list[str] = []
    rt = Runtime(
        settings=settings,
        store=store,
        files=FileStore(settings.dir),
        send=lambda kind, slug, key: sent.append(key),
        kick=lambda slug: None,
        lease_backend=leases,
        ledger_backend=MemoryLedger(clock),
    )
    config = JuryConfig(reviewers=["a"], judge="a", agents={"a": SPEC}, sandbox=SandboxSettings(mode="none"))
    target = Target(repo="r", id="feat", state="review", head="h0", base="b0")
    store.append("run", [TargetEvent(eid="t", target=target), JuryConfigEvent(eid="c", config=config)])
    coordinator.coordinate(rt, "run")
    assert sent == ["review:r1:a"]
    dead = leases.lease("run:review:r1:a", ttl=default("lease_ttl"))
    assert dead.acquire()  # taken at once by a worker, whose heartbeat renews it ...
    store.mark_taken("run", "review:r1:a")
    clock.advance(default("lease_ttl") - 0.001)  # ... until it died; its last renewal's lease runs out
    assert coordinator.reap(rt) == []
    clock.advance(0.001)
    assert coordinator.reap(rt) == ["run:review:r1:a"]
