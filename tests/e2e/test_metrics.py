"""Metrics and logs of a real fleet: a ``jury worker --metrics-port 0`` subprocess on a private Redis,
scraped with httpx while a run is under way, then ``jury metrics`` checked against ``jury show --json``;
and the worker's own output read back as one JSON event per line.

The agents are ``tests/fakes/fleet_agent.py`` behind gates (``--gate FILE``): each reviewer waits until
the test creates its file, so the moments the test looks at (one review running, the other waiting in its
queue; one review done, the other still running) last as long as the test needs, with no sleep.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from orchestrator.config import load_settings
from tests.conftest import FAKE_SANDBOX_KEYS
from tests.e2e.test_fleet import (  # noqa: F401  (fixtures: the private Redis and the fleet on it)
    AGENT,
    Fleet,
    fleet,
    pids_of,
    private_redis,
    wait_for,
)
from workers.runtime.app import make_app

LEVELS = {"debug", "info", "warning", "error", "critical"}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def gated(name: str, mode: str, state: Path, *, judge_mode: str | None = None, usd_per_minute: float) -> str:
    """A jury.toml entry running fleet_agent.py as ``name``, waiting for ``state/go-<name>`` to answer."""

    def argv(m: str) -> str:
        opts = ["--state", str(state), "--tag", name, "--gate", str(state / f"go-{name}")]
        return json.dumps([sys.executable, str(AGENT), *opts, m, "{prompt_file}"])

    entry = f"[agents.{name}]\nargv = {argv(mode)}\nexpect_seconds = 5\nusd_per_minute = {usd_per_minute}\n"
    entry += FAKE_SANDBOX_KEYS
    if judge_mode:
        entry += f"judge_argv = {argv(judge_mode)}\n"
    return entry


def parse(text: str) -> Samples:
    """Every sample of a Prometheus exposition: (name, labels) -> value."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[(s.name, frozenset(s.labels.items()))] = s.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def json_lines(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text().splitlines():
        if line.strip():
            doc = json.loads(line)  # a line that is not JSON fails the test here
            assert isinstance(doc, dict), line
            yield doc


@pytest.fixture
def worker_logs(fleet: Fleet) -> tuple[Path, Path]:  # noqa: F811
    return fleet.logs / "worker.stdout.log", fleet.logs / "worker.stderr.log"


def start_worker(fleet: Fleet, out: Path, err: Path, *extra: str) -> subprocess.Popen[bytes]:  # noqa: F811
    argv = [sys.executable, "-m", "jury_cli", "worker", "--concurrency", "1", "--loglevel", "INFO"]
    with out.open("wb") as o, err.open("wb") as e:
        p = subprocess.Popen(
            [*argv, "--metrics-port", "0", *extra],
            env=fleet.env(),
            stdout=o,
            stderr=e,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    fleet.procs.append(p)
    return p


def scraper(fleet: Fleet, err: Path) -> Callable[[], Samples]:  # noqa: F811
    """Scrape the worker whose stderr is ``err``, once it said where its endpoint is."""

    def port() -> int | None:
        started = [d for d in json_lines(err) if d.get("event") == "worker.started"]
        return started[0]["metrics_port"] if started else None

    url = f"http://127.0.0.1:{wait_for('the worker to start', port, 60, fleet.why())}/metrics"

    def scrape() -> Samples:
        r = httpx.get(url, timeout=30)
        assert r.status_code == 200, r.text
        return parse(r.text)

    return scrape


def test_metrics_during_and_after_a_run_match_jury_show_and_logs_are_json(
    fleet: Fleet,  # noqa: F811
    sample_repo: Path,
    write_config,
    fake_state: Path,
    worker_logs: tuple[Path, Path],
) -> None:
    out, err = worker_logs
    fleet.extra["JURY_REAP_AFTER"] = "600"  # no re-sending of the review that waits in its queue
    worker = start_worker(fleet, out, err)
    scrape = scraper(fleet, err)

    config = write_config(
        gated("finder", "find", fake_state, usd_per_minute=0.6),
        gated("quiet", "clean", fake_state, usd_per_minute=0.3),
        gated("judge", "clean", fake_state, judge_mode="fix", usd_per_minute=1.2),
    )
    (fake_state / "go-judge").touch()
    slug = fleet.start(sample_repo, config, "--reviewer", "finder,quiet")

    # One slot: one review runs (held at its gate), the other waits in the review queue.
    first = wait_for(
        "a reviewer to start",
        lambda: next((t for t in ("finder", "quiet") if pids_of(fake_state, t)), None),
        60,
        fleet.why(slug),
    )
    other = "quiet" if first == "finder" else "finder"

    def under_way() -> Samples | None:
        s = scrape()
        ok = (
            value(s, "jury_fleet_runs", state="review") == 1
            and value(s, "jury_fleet_queue_depth", queue="review") >= 1
            and value(s, "jury_fleet_tasks_in_flight", queue="review") == 1
            and value(s, "jury_worker_tasks_in_flight", kind="review") == 1
        )
        return s if ok else None

    during = wait_for("the run, its queue and its task in the metrics", under_way, 60, fleet.why(slug))
    assert value(during, "jury_fleet_up") == 1
    assert value(during, "jury_fleet_workers", state="running") == 1  # its presence, one slot a queue
    assert value(during, "jury_fleet_worker_slots", queue="review") == 1
    assert value(during, "jury_fleet_runs") == 1  # every state named; only this run counted
    assert {ls for (n, ls) in during if n == "jury_fleet_queue_depth"} == {
        frozenset({("queue", q)}) for q in ("control", "review", "triage", "reply", "refute")
    }

    # The first review answers; the second runs (held) while the scrape shows the first one's duration.
    (fake_state / f"go-{first}").touch()

    def first_reported() -> Samples | None:
        s = scrape()
        done = value(s, "jury_agent_duration_seconds_count", agent=first, role="reviewer") == 1
        return s if done and pids_of(fake_state, other) else None

    later = wait_for(f"{first}'s agent duration", first_reported, 60, fleet.why(slug))
    assert value(later, "jury_fleet_runs", state="review") == 1
    assert value(later, "jury_agent_duration_seconds_bucket", agent=first, role="reviewer", le="+Inf") == 1
    assert value(later, "jury_agent_duration_seconds_count", agent=other) == 0

    (fake_state / f"go-{other}").touch()
    state = fleet.wait_ended(slug)
    assert state.state == "converged", state.target.state_note
    fleet.wait_settled(slug)

    # A second run the budget refuses at once: it ends human, a refusal counted.
    refused = fleet.start(sample_repo, config, "--reviewer", "finder,quiet", "--budget", "0")
    assert fleet.wait_ended(refused).state == "human"
    fleet.wait_settled(refused)

    shown = {}
    for s in (slug, refused):
        r = fleet.jury("show", s, "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        shown[s] = json.loads(r.stdout)
    spent: dict[str, float] = {}
    for doc in shown.values():
        for agent, usd in doc.get("spent", {}).items():
            spent[agent] = spent.get(agent, 0.0) + usd
    assert set(spent) == {"finder", "quiet", "judge"} and all(v > 0 for v in spent.values()), spent

    r = fleet.jury("metrics")
    assert r.returncode == 0, r.stdout + r.stderr
    fleet_now = parse(r.stdout)
    listed = fleet.jury("runs").stdout.splitlines()
    assert value(fleet_now, "jury_fleet_runs") == len(listed) == 2
    for name in ("converged", "human"):
        assert (
            value(fleet_now, "jury_fleet_runs", state=name)
            == [d["target"]["state"] for d in shown.values()].count(name)
            == 1
        )
    for agent, usd in spent.items():
        assert value(fleet_now, "jury_fleet_spent_usd", agent=agent) == pytest.approx(usd, abs=1e-6)
    assert value(fleet_now, "jury_fleet_queue_depth") == 0
    assert value(fleet_now, "jury_fleet_actions_in_flight") == 0

    # The worker appended every settlement once: its own spend counter says the same, by agent.
    after = scrape()
    for agent, usd in spent.items():
        assert value(after, "jury_agent_spend_usd_total", agent=agent) == pytest.approx(usd, abs=1e-6)
    assert value(after, "jury_budget_refusals_total") >= 1
    assert value(after, "jury_worker_tasks_in_flight") == 0
    assert value(after, "jury_worker_tasks_total", kind="review", state="SUCCESS") >= 2
    assert worker.poll() is None

    # Logs: one JSON event per line at its true level, the task's run, action and id bound.
    fleet.stop()
    # stdout holds only what Celery says from its signal handlers, where nothing may log: its shutdown.
    assert [ln for ln in out.read_text().splitlines() if ln.strip()] == [
        "worker: Warm shutdown (MainProcess)"
    ]
    lines = list(json_lines(err))
    assert lines and all(d.get("level") in LEVELS and "event" in d for d in lines)
    assert not [d for d in lines if "WARNING/MainProcess" in json.dumps(d)]
    ran = [d for d in lines if d["event"] == "agent.ran" and d.get("slug") == slug]
    assert ran and all(d["level"] == "info" and d.get("task_id") and d.get("key") for d in ran)
    assert {d["task"] for d in ran} >= {"jury.review", "jury.triage"}
    # Celery's own line for a task, at its own level, carries the binding too.
    succeeded = [
        d
        for d in lines
        if d.get("logger") == "celery.app.trace" and d.get("task") == "jury.review" and d.get("slug") == slug
    ]
    assert succeeded and all(
        d["level"] == "info" and d.get("key", "").startswith("review:") for d in succeeded
    )


def test_a_prefork_worker_serves_what_its_pool_children_counted(
    fleet: Fleet,  # noqa: F811
    worker_logs: tuple[Path, Path],
) -> None:
    """With ``--pool prefork`` tasks run in child processes: their counters reach the parent's endpoint
    through prometheus-client's multiprocess directory, which the worker removes when it stops."""
    out, err = worker_logs
    worker = start_worker(fleet, out, err, "--pool", "prefork")
    scrape = scraper(fleet, err)
    app = make_app(load_settings().model_copy(update={"redis_url": fleet.url}))
    app.send_task("jury.reap")  # a task, run by a pool child
    reaped = wait_for(
        "the reap task, counted by a pool child",
        lambda: (
            (s := scrape()) and value(s, "jury_worker_tasks_total", kind="reap", state="SUCCESS") >= 1 and s
        ),
        60,
        fleet.why(),
    )
    assert value(reaped, "jury_fleet_up") == 1
    (folder,) = (fleet.state_dir / "metrics").iterdir()
    assert folder.name == f"worker-{worker.pid}" and any(folder.glob("counter_*.db"))
    fleet.stop()
    assert not folder.exists()


def test_jury_metrics_serves_the_fleet_and_says_when_it_cannot_read_it(
    fleet: Fleet,  # noqa: F811
) -> None:
    """``jury metrics --port 0`` serves the fleet's gauges until stopped; without a Redis to read it says
    what to set (exit 2), with one that does not answer it says so (exit 1)."""
    env = fleet.env()
    argv = [sys.executable, "-m", "jury_cli", "metrics", "--port", "0", "--host", "127.0.0.1"]
    p = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    fleet.procs.append(p)  # type: ignore[arg-type]  (stopped with its process group, as the workers are)
    assert p.stderr is not None
    line = p.stderr.readline()  # "serving the fleet's metrics on http://127.0.0.1:PORT/metrics"
    served = re.search(r"http://127\.0\.0\.1:\d+/metrics", line)
    assert served, line
    samples = parse(httpx.get(served.group(0), timeout=30).text)
    assert value(samples, "jury_fleet_up") == 1 and value(samples, "jury_fleet_runs") == 0
    assert {ls for (n, ls) in samples if n == "jury_fleet_queue_depth"} == {
        frozenset({("queue", q)}) for q in ("control", "review", "triage", "reply", "refute")
    }
    fleet.stop()
    p.stderr.close()

    fleet.extra["JURY_REDIS_URL"] = ""
    r = fleet.jury("metrics")
    assert r.returncode == 2 and "set JURY_REDIS_URL" in r.stderr, r.stdout + r.stderr
    fleet.extra["JURY_REDIS_URL"] = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    r = fleet.jury("metrics")
    assert r.returncode == 1 and "jury_fleet_up 0.0" in r.stdout, r.stdout + r.stderr
    assert "could not read the fleet's Redis" in r.stderr
