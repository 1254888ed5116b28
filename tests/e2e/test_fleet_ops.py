"""Operating a fleet with no special worker, end to end: real Redis, real git, real ``jury worker`` processes.

Every worker takes its turn at reaping (``workers/fleet/reaper.py``: the reaper's lock in Redis, one worker
per period) and keeps its presence (``workers/fleet/presence.py``); SIGTERM drains a worker: its agents get
``JURY_SHUTDOWN_GRACE``, then their actions are handed back (``workers/runtime/shutdown.py``). Built on the
helpers of ``tests/e2e/test_fleet.py`` (its ``Fleet``, a private redis-server per test, the fake agent
``tests/fakes/fleet_agent.py``).

What each test proves:

- two workers, both reaping in turn; the one that reaped last is SIGKILLed while it runs a review: the
  survivor reaps on, takes the review over within lease TTL + one reap period (+ the start of its agent),
  finishes the run, and the log holds no duplicate event, report or finding; its metrics endpoint counts
  each review it recovered in ``jury_leases_recovered_total``, once;
- a rolling restart (SIGTERM each worker in turn while an agent runs, a new one started beside it): an
  agent that ends within the grace is recorded by its worker; one that does not is handed back and runs
  at once on another worker, with a 600 s lease the run never waits for; the run converges, no worker is
  listed once gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_fleet import (
    Fleet,
    PrivateRedis,
    agent,
    ancestors_of,
    assert_converged_with_the_fix,
    assert_log_is_clean,
    assert_no_agent_left,
    free_port,
    pids_of,
    wait_for,
)
from tests.e2e.test_metrics import parse, value
from workers.fleet.ledger import Ledger
from workers.fleet.presence import WorkerPresence, live_workers
from workers.fleet.reaper import TRIES_PER_PERIOD

REAP_EVERY = 2.0


@pytest.fixture
def fleet(state_dir: Path, fake_state: Path, tmp_path: Path) -> Iterator[Fleet]:
    redis_server = PrivateRedis(tmp_path / "redis")
    redis_server.start()
    f = Fleet(redis_server.url, state_dir, fake_state, tmp_path / "logs")
    try:
        yield f
    finally:
        f.stop()
        f.store.close()
        redis_server.stop()


def present(fleet: Fleet) -> dict[int, WorkerPresence]:
    """The live workers by pid (``jury worker`` runs Celery in its own process)."""
    return {w.pid: w for w in live_workers(fleet.client, fleet.store.prefix)}


def worker_of(agent_pid: int, workers: list[int]) -> int:
    """Which of ``workers`` (pids) runs the agent ``agent_pid``."""
    (found,) = [w for w in workers if w in ancestors_of(agent_pid)]
    return found


def test_the_worker_that_reaped_last_killed_mid_review_the_survivor_finishes_the_run(
    fleet: Fleet, sample_repo: Path, write_config, fake_state: Path
) -> None:
    lease_ttl = 8.0  # far above a scheduler stall: a live worker never loses its lease here
    fleet.extra.update(
        {"JURY_LEASE_TTL": str(lease_ttl), "JURY_REAP_EVERY": str(REAP_EVERY), "JURY_REAP_AFTER": "2"}
    )
    ports = [free_port(), free_port()]
    started = [fleet.worker(2, "--metrics-port", str(port)) for port in ports]
    workers = {p.pid: p for p in started}
    metrics_of = {p.pid: f"http://127.0.0.1:{port}/metrics" for p, port in zip(started, ports, strict=True)}

    def recovered(pid: int) -> float:
        """``jury_leases_recovered_total`` as the worker ``pid`` serves it."""
        return value(parse(httpx.get(metrics_of[pid], timeout=30).text), "jury_leases_recovered_total")

    # both are listed, and both take turns at reaping (the reaper's lock goes to whoever tries first)
    wait_for(
        "both workers to have reaped",
        lambda: set(workers) == {pid for pid, w in present(fleet).items() if w.reaped_at},
        60,
        fleet.why(),
    )
    for w in present(fleet).values():
        assert "review" in w.queues and w.state == "running" and w.concurrency == 2, w

    go = fake_state / "go"  # each reviewer's run waits until the test touches it
    config = write_config(
        agent("finder", "find", fake_state, gate=go),
        agent("quiet", "clean", fake_state, gate=go),
        agent("judge", "clean", fake_state, judge_mode="fix"),
    )
    slug = fleet.start(sample_repo, config, "--reviewer", "finder,quiet")
    agents = {
        key: fleet.wait_launched(slug, key, tag)[0]
        for key, tag in (("review:r1:finder", "finder"), ("review:r1:quiet", "quiet"))
    }
    runs_on = {key: worker_of(pid, list(workers)) for key, pid in agents.items()}
    lock = f"{fleet.store.prefix}:run:{slug}:lock"
    reaper = f"{fleet.store.prefix}:reaper"

    def reaper_to_kill() -> int | None:
        """The worker that just took the reaper's lock, if it runs one of the reviews and no coordinator
        holds the run (a worker killed inside a pass stalls the run for the lock's timeout)."""
        pipe = fleet.client.pipeline(transaction=True)
        pipe.get(reaper)
        pipe.pttl(reaper)
        pipe.exists(lock)
        holder, ttl_ms, locked = pipe.execute()
        by_id = {w.id: pid for pid, w in present(fleet).items()}
        pid = by_id.get(holder.decode()) if holder else None
        fresh = ttl_ms > REAP_EVERY * 1000 / 2  # nobody else reaps before the lock lapses
        return pid if pid in runs_on.values() and fresh and not locked else None

    victim = wait_for("the reaper to be a worker running a review", reaper_to_kill, 60, fleet.why(slug))
    assert victim is not None
    assert [recovered(pid) for pid in workers] == [0.0, 0.0]  # nobody died yet: nothing recovered
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    workers[victim].wait()
    survivor = next(pid for pid in workers if pid != victim)
    lost = [key for key, pid in runs_on.items() if pid == victim]

    # the survivor reaps on and hands the dead worker's reviews out again: its lease lapses at most one TTL
    # after the kill, the next reap comes within a period and a quarter; then the agent starts (a worktree)
    deadline = lease_ttl + REAP_EVERY * (1 + 1 / TRIES_PER_PERIOD) + 10
    for key in lost:
        tag = key.rsplit(":", 1)[1]
        fleet.wait_launched(slug, key, tag, nth=2, timeout=deadline - (time.monotonic() - killed_at))
    assert recovered(survivor) == len(lost)  # what the survivor's reaper handed out again, each once
    go.touch()  # the reviews may end now

    state = fleet.wait_ended(slug, timeout=90)
    assert_converged_with_the_fix(state)
    events = fleet.events(slug)
    assert_log_is_clean(events)
    for key in lost:  # a launch event per start: the dead worker's, then the survivor's
        assert [e.eid for e in events if e.t == "agent.launch" and e.key == key] == [
            f"{key}:launch",
            f"{key}:launch:2",
        ]
    assert_no_agent_left(fake_state)
    assert Ledger(fleet.client).spent(slug).reserved == 0
    assert survivor in present(fleet)
    assert recovered(survivor) == len(lost)  # the rest of the run recovered nothing more


def test_rolling_restart_hands_running_actions_back_at_once(
    fleet: Fleet, sample_repo: Path, write_config, fake_state: Path
) -> None:
    """Workers A, then B are SIGTERMed while the finder's review runs on them (a new worker started beside
    each first). The quiet review A also runs ends within the grace and is A's to record; the finder's
    does not, and is handed back: with a 600 s lease, only the hand-back can move it."""
    grace = 10.0  # A's: the quiet review ends within it (the test lets it end once A drains)
    go = fake_state / "quiet.go"
    fleet.extra.update(
        {
            "JURY_LEASE_TTL": "600",
            "JURY_REAP_AFTER": "600",  # nor will the reaper send it again: the hand-back must
            "JURY_REAP_EVERY": str(REAP_EVERY),
            "JURY_SHUTDOWN_GRACE": str(grace),
        }
    )
    config = write_config(
        agent("finder", "find", fake_state, sleep=300, slow_runs=2),  # slow on A and on B
        agent("quiet", "clean", fake_state, gate=go),
        agent("judge", "clean", fake_state, judge_mode="fix"),
    )
    a = fleet.worker(concurrency=2)
    slug = fleet.start(sample_repo, config, "--reviewer", "finder,quiet")
    (finder,) = fleet.wait_launched(slug, "review:r1:finder", "finder")
    (quiet,) = fleet.wait_launched(slug, "review:r1:quiet", "quiet")
    started = time.monotonic()

    def restart(old: subprocess.Popen[bytes], nth: int, draining: Callable[[], None] = lambda: None) -> None:
        """Start a worker beside ``old``, SIGTERM ``old`` (``draining`` once it says it drains): the
        finder's review it runs is handed back and starts again (run ``nth``) on the new worker; ``old``
        exits cleanly and leaves the list."""
        new = fleet.worker(concurrency=2)
        wait_for("the new worker to be listed", lambda: new.pid in present(fleet), 60, fleet.why(slug))
        old.send_signal(signal.SIGTERM)
        wait_for(
            "the old worker to say it drains",
            lambda: (w := present(fleet).get(old.pid)) is not None and w.state == "draining",
            10,
            fleet.why(slug),
        )
        draining()
        again = fleet.wait_launched(slug, "review:r1:finder", "finder", nth=nth, timeout=grace + 30)
        if nth == 2:  # still running, slow (the third run is quick and gone before it can be traced)
            assert worker_of(again[0], [new.pid, old.pid]) == new.pid
        assert old.wait(timeout=30) == 0
        assert old.pid not in present(fleet)

    assert worker_of(finder, [a.pid]) == a.pid and worker_of(quiet, [a.pid]) == a.pid
    fleet.extra["JURY_SHUTDOWN_GRACE"] = "2"  # B's (nothing of B's is to end within it)
    restart(a, nth=2, draining=go.touch)  # the quiet review ends now, inside A's grace
    # the quiet review ended within A's grace: A recorded it, and it never ran again
    assert len(pids_of(fake_state, "quiet")) == 1
    assert "review:r1:quiet" in {e.key for e in fleet.events(slug) if e.t == "action.done"}
    assert [e.key for e in fleet.events(slug) if e.t == "agent.report"] == ["review:r1:quiet"]
    restart(fleet.procs[-1], nth=3)  # B, started by the first restart

    state = fleet.wait_ended(slug, timeout=90)
    assert time.monotonic() - started < 600  # the leases of the stopped workers never had to lapse
    assert_converged_with_the_fix(state)
    events = fleet.events(slug)
    assert_log_is_clean(events)
    reports = [
        e.key or "" for e in events if e.t == "agent.report" and (e.key or "").startswith("review:r1:")
    ]
    assert sorted(reports) == ["review:r1:finder", "review:r1:quiet"]
    assert len(pids_of(fake_state, "finder")) == 5  # round 1 three times, round 2, the reply
    logs = "".join(f.read_text(errors="replace") for f in fleet.logs.glob("worker-*.log"))
    assert logs.count("task.handed_back") == 2, logs[-3000:]
    assert_no_agent_left(fake_state)
    assert Ledger(fleet.client).spent(slug).reserved == 0
