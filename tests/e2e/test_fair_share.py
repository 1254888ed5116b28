"""Fair sharing, end to end: real ``jury worker`` processes on a private redis-server, real git, the fake
agents of tests/fakes (a CLI agent a test holds until it opens a gate file; scripted HTTP models behind a
local chat server).

- ``[limits] per_repo = 1``, two runs of one repository and one of another on two workers of one slot
  each: the other repository's run is never waiting behind both (it converges while the busy
  repository's first review is still held), and the busy repository's two reviews never overlap.
- the same limit with a put-back countdown of five minutes or more: the waiting review runs as soon as the
  first one gives the repository's slot back (the release wakes it), long before its countdown ends;
- a 429 storm from one HTTP model (Retry-After: 30) on a worker of one slot: the rate-limited review is
  put back with a countdown (the 30 s asked for), and meanwhile a run using another model converges on
  that same worker; once the storm ends the first run converges too, its spend and ledger true;
- the same storm without Retry-After: nothing is slept in the slot (one request an attempt), the review
  is put back on its doubling back-off from ``JURY_LIMIT_WAIT``, the other run converges meanwhile.

The assertions are about order (what had or had not happened when something else was seen), never
about how long anything took; the waits have deadlines far above what the runs need.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.demo import make_sample_repo
from orchestrator.domain import ActionDeferred, AgentLaunch, AgentReport, Event
from tests.conftest import FAKE_SANDBOX_KEYS
from tests.e2e.test_fleet import (
    AGENT,
    Fleet,
    PrivateRedis,
    agent,
    assert_log_is_clean,
    git,
    pids_of,
    wait_for,
)
from tests.fakes.chat_server import ChatServer, Recorded, Reply, answer, status
from workers.fleet.ledger import Ledger
from workers.isolation.limits import RedisSlots

REVIEW = "review:r1"


@pytest.fixture
def fleet(tmp_path: Path, state_dir: Path, fake_state: Path) -> Iterator[Fleet]:
    redis_server = PrivateRedis(tmp_path / "redis")
    redis_server.start()
    f = Fleet(redis_server.url, state_dir, fake_state, tmp_path / "logs")
    f.extra["JURY_LIMIT_WAIT"] = "0.5"  # a task put back for a full slot comes again soon
    try:
        yield f
    finally:
        f.stop()
        f.store.close()
        redis_server.stop()


def held_agent(name: str, state: Path, gate: Path) -> str:
    """A reviewer that finds nothing, once ``gate`` exists (fleet_agent.py ``--gate``)."""
    argv = [sys.executable, str(AGENT), "--state", str(state), "--tag", name, "--gate", str(gate)]
    argv += ["clean", "{prompt_file}"]
    return f"[agents.{name}]\nargv = {json.dumps(argv)}\nexpect_seconds = 5\n{FAKE_SANDBOX_KEYS}"


def of(events: list[Event], kind: type) -> list:  # type: ignore[type-arg]
    return [e for e in events if isinstance(e, kind)]


def two_held_runs(fleet: Fleet, busy: Path, config: Path) -> list[str]:
    """Two workers of one slot, and two runs of ``busy`` (branches ``feature`` and ``feature2``) whose
    reviewer is held until its gate opens."""
    fleet.worker(concurrency=1)
    fleet.worker(concurrency=1)
    return [
        fleet.start(busy, config, "--reviewer", "held"),
        fleet.start(busy, config, "--reviewer", "held", branch="feature2"),
    ]


def launched(fleet: Fleet, slug: str) -> bool:
    return bool(of(fleet.events(slug), AgentLaunch))


def test_a_busy_repository_never_holds_another_back(
    fleet: Fleet, tmp_path: Path, write_config, fake_state: Path
) -> None:
    busy = make_sample_repo(tmp_path / "busy")
    git(busy, "branch", "feature2", "feature")
    other = make_sample_repo(tmp_path / "other")
    gate = fake_state / "gate"
    config = write_config(
        "[limits]\nper_repo = 1\n",
        held_agent("held", fake_state, gate),
        agent("quick", "clean", fake_state),
        agent("judge", "clean", fake_state, judge_mode="fix"),
    )
    busy_runs = two_held_runs(fleet, busy, config)
    other_run = fleet.start(other, config, "--reviewer", "quick")

    # The other repository's run converges while the busy repository's first review is still held: it
    # did not wait behind both (without the limit both workers hold a review of the busy repository).
    assert fleet.wait_ended(other_run, timeout=90).state == "converged"
    first = wait_for("one busy review to run", lambda: [s for s in busy_runs if launched(fleet, s)], 30)
    assert len(first) == 1 and len(pids_of(fake_state, "held")) == 1, "the busy repository ran two at once"
    (second,) = [s for s in busy_runs if s not in first]
    waits = of(fleet.events(second), ActionDeferred)
    assert waits and waits[0].reason == "slot", waits
    assert waits[0].note == f"[limits] per_repo = 1 ({busy}) is full"

    gate.touch()
    for slug in busy_runs:
        assert fleet.wait_ended(slug, timeout=90).state == "converged"
        assert_log_is_clean(fleet.events(slug))
    # one slot for the repository: its second review started only after the first one's report
    (report,) = of(fleet.events(first[0]), AgentReport)
    (launch,) = of(fleet.events(second), AgentLaunch)
    assert launch.ts >= report.ts
    assert len(pids_of(fake_state, "held")) == 2
    slots = RedisSlots(fleet.client)
    wait_for("the repository's slot to be given back", lambda: slots.holders(f"repo:{busy}") == [], 10)


def test_a_freed_slot_wakes_the_task_waiting_for_it(
    fleet: Fleet, tmp_path: Path, write_config, fake_state: Path
) -> None:
    """The countdown is 300 s to 600 s (``JURY_LIMIT_WAIT`` 600, kept under ``JURY_REAP_AFTER`` / 2), far
    beyond this test's deadlines: the second review can only run in time if the first one's release sends
    it on. Without the wake this test times out."""
    fleet.extra["JURY_LIMIT_WAIT"] = "600"
    fleet.extra["JURY_REAP_AFTER"] = "1200"  # nor does the reaper re-send it within the test
    busy = make_sample_repo(tmp_path / "busy")
    git(busy, "branch", "feature2", "feature")
    gate = fake_state / "gate"
    config = write_config(
        "[limits]\nper_repo = 1\n",
        held_agent("held", fake_state, gate),
        agent("judge", "clean", fake_state, judge_mode="fix"),
    )
    runs = two_held_runs(fleet, busy, config)
    slots = RedisSlots(fleet.client)
    waiting = wait_for(
        "one review to wait for the repository's slot",
        lambda: [s for s in runs if of(fleet.events(s), ActionDeferred)],
        60,
    )
    assert len(waiting) == 1 and len(pids_of(fake_state, "held")) <= 1
    (deferred,) = of(fleet.events(waiting[0]), ActionDeferred)
    assert deferred.reason == "slot" and deferred.seconds >= 300, deferred
    assert slots.waiters(f"repo:{busy}") != []  # in line for the slot

    gate.touch()
    for slug in runs:
        assert fleet.wait_ended(slug, timeout=120).state == "converged"
        assert_log_is_clean(fleet.events(slug))
    (first,) = [s for s in runs if s not in waiting]
    (report,) = of(fleet.events(first), AgentReport)
    (launch,) = of(fleet.events(waiting[0]), AgentLaunch)
    assert launch.ts >= report.ts  # still one at a time
    assert slots.waiters(f"repo:{busy}") == []
    wait_for("the repository's slot to be given back", lambda: slots.holders(f"repo:{busy}") == [], 10)


class Storm:
    """A model that answers 429 (with ``retry_after``, or no Retry-After when None) until ``over`` is set,
    then finds nothing."""

    def __init__(self, retry_after: str | None = "30") -> None:
        self.over = threading.Event()
        self.refused = 0
        self.retry_after = retry_after

    def __call__(self, _request: Recorded) -> Reply:
        if self.over.is_set():
            return answer("NO NEW FINDINGS", usage={"prompt_tokens": 1000, "completion_tokens": 100})
        self.refused += 1
        return status(429, retry_after=self.retry_after, body='{"error": "rate limited"}')


def http_agent(name: str, url: str, model: str) -> str:
    return (
        f'[agents.{name}]\nkind = "http"\nbase_url = {json.dumps(url)}\nmodel = {json.dumps(model)}\n'
        "timeout = 60\nmax_rounds = 4\nexpect_seconds = 5\nprice = { input = 1.0, output = 2.0 }\n"
    )


def test_a_429_storm_holds_no_worker_slot(
    fleet: Fleet, sample_repo: Path, write_config, fake_state: Path
) -> None:
    storm = Storm()
    with ChatServer() as server:
        server.think("acme/stormy-1", storm)
        server.think("acme/calm-1", lambda _r: answer("NO NEW FINDINGS"))
        config = write_config(
            http_agent("stormy", server.url, "acme/stormy-1"),
            http_agent("calm", server.url, "acme/calm-1"),
            agent("judge", "clean", fake_state, judge_mode="fix"),
        )
        git(sample_repo, "branch", "feature2", "feature")
        fleet.worker(concurrency=1)  # one slot for everything: the coordinator, both runs' reviews
        stormy = fleet.start(sample_repo, config, "--reviewer", "stormy")
        key = f"{REVIEW}:stormy"

        def sent_back() -> list[ActionDeferred]:
            return [e for e in of(fleet.events(stormy), ActionDeferred) if e.reason == "rate-limit"]

        wait_for("the rate-limited review to be put back", sent_back, 60, fleet.why(stormy))
        calm = fleet.start(sample_repo, config, "--reviewer", "calm", branch="feature2")
        # The other model's run converges on that one worker while the storm goes on: the backing-off
        # review held no slot (sleeping in it, the worker would have done nothing else for minutes).
        assert fleet.wait_ended(calm, timeout=90).state == "converged"
        state = fleet.state(stormy)
        assert not state.actions[key].done and state.state == "review"
        backs = sent_back()
        assert len(backs) >= 1 and backs[0].note == "acme/stormy-1 answered 429 with Retry-After 30s"
        assert 0 < backs[0].seconds <= 30

        storm.over.set()
        state = fleet.wait_ended(stormy, timeout=90)
    assert state.state == "converged", state.target.state_note
    events = fleet.events(stormy)
    assert_log_is_clean(events)
    (report,) = of(events, AgentReport)
    assert report.verdict == "clean" and report.error is None
    # every attempt was its own: the calls refused were dropped, not spent; the one answered is the spend
    totals = Ledger(fleet.client).spent(stormy)
    assert totals.reserved == 0 and not state.reserved
    assert state.total_spent == pytest.approx(1000 * 1.0 / 1e6 + 100 * 2.0 / 1e6)
    assert totals.spent == pytest.approx(state.total_spent)
    assert storm.refused >= len(backs)


def test_a_429_storm_without_retry_after_holds_no_worker_slot(
    fleet: Fleet, sample_repo: Path, write_config, fake_state: Path
) -> None:
    """No Retry-After: not a guess slept in the slot (1, 2, 4 s, then "every model failed"), but put back
    at once, on a back-off that doubles from JURY_LIMIT_WAIT (0.5 s here), while the slot does other work."""
    storm = Storm(retry_after=None)
    with ChatServer() as server:
        server.think("acme/stormy-1", storm)
        server.think("acme/calm-1", lambda _r: answer("NO NEW FINDINGS"))
        config = write_config(
            http_agent("stormy", server.url, "acme/stormy-1"),
            http_agent("calm", server.url, "acme/calm-1"),
            agent("judge", "clean", fake_state, judge_mode="fix"),
        )
        git(sample_repo, "branch", "feature2", "feature")
        fleet.worker(concurrency=1)  # one slot for everything
        stormy = fleet.start(sample_repo, config, "--reviewer", "stormy")
        key = f"{REVIEW}:stormy"

        def sent_back() -> list[ActionDeferred]:
            return [e for e in of(fleet.events(stormy), ActionDeferred) if e.reason == "rate-limit"]

        wait_for("the rate-limited review to be put back twice", lambda: len(sent_back()) >= 2, 60)
        calm = fleet.start(sample_repo, config, "--reviewer", "calm", branch="feature2")
        assert fleet.wait_ended(calm, timeout=90).state == "converged"
        state = fleet.state(stormy)
        assert not state.actions[key].done and state.state == "review"
        refused = storm.refused  # before the put-backs are read: each refusal's put-back is then in
        backs = sent_back()  # but perhaps the one attempt running
        assert {b.note for b in backs} == {"acme/stormy-1 answered 429 without Retry-After"}
        # the back-off of attempt n: 0.5 s x 2^n, jittered by up to half either way
        for n, b in enumerate(backs):
            assert 0.25 * 2**n <= b.seconds <= 0.75 * 2**n, (n, b.seconds)
        # one request an attempt: no retry was slept in the slot
        assert refused <= len(backs) + 1, (refused, len(backs))

        storm.over.set()
        state = fleet.wait_ended(stormy, timeout=180)
    assert state.state == "converged", state.target.state_note
    assert_log_is_clean(fleet.events(stormy))
    assert Ledger(fleet.client).spent(stormy).reserved == 0
