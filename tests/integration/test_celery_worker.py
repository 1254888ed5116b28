"""A real Celery worker (in this process, threads pool) on a real Redis runs a whole review."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker

from orchestrator.config import load_settings
from orchestrator.domain import JuryConfigEvent, TargetEvent
from orchestrator.fold import apply, fold
from orchestrator.spec import TERMINAL_STATES, AgentSpec, JuryConfig
from orchestrator.store.redis import from_url
from orchestrator.target import resolve_local
from tests.conftest import FAKE, FAKE_STATE_ROOT
from workers.runtime import tasks
from workers.runtime.app import app, celery_config


def spec(name: str, mode: str, judge: str | None = None) -> AgentSpec:
    argv = [sys.executable, str(FAKE), mode, "{prompt_file}"]
    return AgentSpec(
        name=name,
        argv=argv,
        judge_argv=[sys.executable, str(FAKE), judge, "{prompt_file}"] if judge else None,
        expect_seconds=5,
        env_pass=["FAKE_STATE"],  # the fake keeps its state there, inside the sandbox
        state_dirs=[str(FAKE_STATE_ROOT)],
    )


@pytest.fixture
def worker(shared_redis: str, tmp_path: Path, fake_state: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("JURY_REDIS_URL", shared_redis)
    monkeypatch.setenv("JURY_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FAKE_STATE", str(fake_state))
    tasks.get_runtime.cache_clear()
    app.conf.update(celery_config(load_settings()))
    with start_worker(
        app,
        pool="threads",
        concurrency=3,
        perform_ping_check=False,
        shutdown_timeout=30,
        queues=["control", "review", "triage", "reply"],
    ):
        yield shared_redis
    tasks.get_runtime.cache_clear()


def test_worker_runs_a_review_to_convergence(worker: str, sample_repo: Path) -> None:
    store = from_url(worker)
    target = resolve_local(sample_repo, "feature", "main")
    agents = {
        "finder": spec("finder", "find"),
        "quiet": spec("quiet", "clean"),
        "judge": spec("judge", "clean", "fix"),
    }
    cfg = JuryConfig(reviewers=["finder", "quiet"], judge="judge", agents=agents, rounds=3)
    slug = "sample-feature-celery"
    store.append(
        slug, [TargetEvent(eid="target:0", target=target), JuryConfigEvent(eid="config:0", config=cfg)]
    )
    app.send_task("jury.coordinate", args=[slug])

    state = fold([], slug)
    seen, deadline = 0, time.monotonic() + 60
    while state.state not in TERMINAL_STATES and time.monotonic() < deadline:
        for e in store.wait(slug, after=seen, timeout=1.0):
            seen += 1
            apply(state, e)
    assert state.state == "converged", state.target.state_note
    assert [f.status for f in state.findings.values()] == ["accepted"]
    assert len(state.rounds) == 2
    # every dispatched action ran exactly once and is done
    assert state.actions and all(a.done for a in state.actions.values())
    reports = [e for e in store.read(slug) if e.t == "agent.report"]
    assert len(reports) == len({(e.agent, e.round, e.role, e.key) for e in reports})
