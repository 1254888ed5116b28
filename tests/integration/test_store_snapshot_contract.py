"""The live store's snapshot contract, on RedisStore and MemoryStore alike: ``read_after`` (the log after a
position, each event with its own), the coordinator's snapshot beside the log, and the agents' latest
liveness ticks, kept beside the log instead of in it.

Redis tests use the test server (``JURY_TEST_REDIS_URL``) under a random key prefix
(``tests/integration/conftest.py``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis

from orchestrator.domain import AgentAlive, Event, FindingRaised, RoundStart
from orchestrator.run_json import run_json
from orchestrator.store.base import LiveStore
from orchestrator.store.files import FileStore, mirror
from orchestrator.store.memory import ManualClock, MemoryStore
from orchestrator.store.redis import RedisStore

SLUG = "acme-widgets-pr-7"


def round_start(n: int) -> RoundStart:
    return RoundStart(eid=f"round.start:{n}", n=n, sha="abc", prompt="p")


def raised(n: int) -> FindingRaised:
    return FindingRaised(
        eid=f"raised:{n}", id=f"r1-a-{n}", round=1, agent="a", claim=f"c{n}", loc=f"a.py:{n}"
    )


def tick(key: str, seconds: float, agent: str = "a") -> AgentAlive:
    return AgentAlive(
        eid=f"{key}:alive:{seconds}", agent=agent, round=1, seconds=seconds, quiet_seconds=1.0, key=key
    )


@pytest.fixture(params=["redis", "memory"])
def live(request: pytest.FixtureRequest) -> LiveStore:
    if request.param == "redis":
        client: redis.Redis = request.getfixturevalue("client")
        return RedisStore(client, prefix=request.getfixturevalue("prefix"))
    return MemoryStore(ManualClock())


def test_read_after_none_is_the_whole_log_each_event_with_its_position(live: LiveStore) -> None:
    events: list[Event] = [round_start(1), *(raised(n) for n in range(5))]
    live.append(SLUG, events)
    read = live.read_after(SLUG, None)
    assert read is not None
    assert [e for _, e in read] == live.read(SLUG) == events
    assert len({at for at, _ in read}) == len(events)  # a position names one event


def test_read_after_a_position_is_what_follows_it(live: LiveStore) -> None:
    live.append(SLUG, [round_start(1), raised(1), raised(2)])
    read = live.read_after(SLUG, None)
    assert read is not None
    assert live.read_after(SLUG, read[-1][0]) == []  # nothing after the last
    live.append(SLUG, [raised(3), raised(1)])  # the duplicate is not appended
    after = live.read_after(SLUG, read[0][0])
    assert after is not None
    assert [e.eid for _, e in after] == ["raised:1", "raised:2", "raised:3"]
    assert [at for at, _ in after[:2]] == [at for at, _ in read[1:]]  # a position stays the event's


def test_read_after_a_position_not_in_the_log_is_none(live: LiveStore) -> None:
    assert live.read_after(SLUG, None) == []  # an unknown run: empty, not gone
    live.append(SLUG, [round_start(1)])
    assert live.read_after(SLUG, "999999999999999-0" if isinstance(live, RedisStore) else "99") is None
    assert live.read_after(SLUG, "not-a-position") is None


def test_the_snapshot_is_kept_beside_the_log(live: LiveStore) -> None:
    assert live.read_snapshot(SLUG) is None
    live.append(SLUG, [round_start(1)])
    doc = {"version": 1, "position": "7", "state": {"slug": SLUG, "note": "é"}}
    live.write_snapshot(SLUG, doc)
    assert live.read_snapshot(SLUG) == doc
    live.write_snapshot(SLUG, {"version": 2})
    assert live.read_snapshot(SLUG) == {"version": 2}
    assert [e.eid for e in live.read(SLUG)] == ["round.start:1"]  # not in the log


def test_write_fold_writes_the_state_and_the_snapshot_that_reads_back(live: LiveStore) -> None:
    """A coordinator pass's closing write: run.json and the snapshot at once, the snapshot as
    ``read_from_snapshot`` reads it (its position and the log after it)."""
    live.append(SLUG, [round_start(1), raised(1)])
    read = live.read_after(SLUG, None)
    assert read is not None
    live.write_state(SLUG, {"state": "old"})
    doc = {"version": 1, "position": read[0][0], "state": {"note": "é\nnewline"}}
    live.write_fold(SLUG, {"state": "running", "note": "ü"}, doc)
    assert live.read_state(SLUG) == {"state": "running", "note": "ü"}
    assert live.read_snapshot(SLUG) == doc
    assert live.read_from_snapshot(SLUG) == (live.origin(SLUG), doc, read[1:])


def test_write_fold_keeps_an_ended_runs_expiry(live: LiveStore) -> None:
    live.append(SLUG, [round_start(1)])
    live.write_fold(SLUG, {"state": "converged"}, {"version": 1})
    live.expire_run(SLUG, 1)
    live.write_fold(SLUG, {"state": "converged", "pass": 2}, {"version": 1})  # a later pass's
    if isinstance(live, RedisStore):
        deadline = time.monotonic() + 15
        while live.read_state(SLUG) is not None or live.read_snapshot(SLUG) is not None:
            assert time.monotonic() < deadline, "the state and snapshot outlived the run"
            time.sleep(0.1)
    else:
        assert isinstance(live, MemoryStore) and isinstance(live.clock, ManualClock)
        live.clock.advance(2)
        assert live.read_state(SLUG) is None and live.read_snapshot(SLUG) is None


def test_mirror_copies_the_log_into_the_record_and_writes_run_json_to_both(
    live: LiveStore, tmp_path: Path
) -> None:
    """What a publish, a re-verification or the CLI's sync leaves: the files record holds the live log,
    and run.json, the log's fold, is the same in both stores."""
    files = FileStore(tmp_path / "state")
    live.append(SLUG, [round_start(1), raised(1)])
    state = mirror(live, files, SLUG)
    assert [e.eid for e in files.read(SLUG)] == ["round.start:1", "raised:1"]
    assert state.events == 2
    assert live.read_state(SLUG) == files.read_state(SLUG) == json.loads(json.dumps(run_json(state)))
    live.append(SLUG, [raised(2)])
    mirror(live, files, SLUG)  # again: the record gains only what is new
    assert [e.eid for e in files.read(SLUG)] == ["round.start:1", "raised:1", "raised:2"]
    assert live.read_state(SLUG) == files.read_state(SLUG)
    assert "r1-a-2" in json.dumps(live.read_state(SLUG))


def test_read_from_snapshot_is_origin_snapshot_and_the_log_after_its_position(live: LiveStore) -> None:
    assert live.read_from_snapshot(SLUG) == (None, None, None)  # no run
    live.append(SLUG, [round_start(1), raised(1)])
    origin, read = live.origin(SLUG), live.read_after(SLUG, None)
    assert origin is not None and read is not None
    assert live.read_from_snapshot(SLUG) == (origin, None, None)  # no snapshot: no tail
    doc = {"version": 1, "position": read[0][0], "state": {"note": "é\nnewline"}}
    live.write_snapshot(SLUG, doc)
    assert live.read_from_snapshot(SLUG) == (origin, doc, read[1:])
    live.append(SLUG, [raised(2)])
    got = live.read_from_snapshot(SLUG)
    assert got[:2] == (origin, doc) and got[2] is not None
    assert [e.eid for _, e in got[2]] == ["raised:1", "raised:2"]
    assert got[2] == live.read_after(SLUG, read[0][0])
    at_end = {**doc, "position": got[2][-1][0]}
    live.write_snapshot(SLUG, at_end)
    assert live.read_from_snapshot(SLUG) == (origin, at_end, [])  # nothing after it
    gone = {**doc, "position": "999999999999999-0" if isinstance(live, RedisStore) else "99"}
    live.write_snapshot(SLUG, gone)
    assert live.read_from_snapshot(SLUG) == (origin, gone, None)  # a position not in the log


def test_read_from_snapshots_is_each_runs_read_from_snapshot_in_order(live: LiveStore) -> None:
    """The reaper's batch: one read for many runs, each answer what the run's own read answers, whatever
    the run's case (no run, no snapshot, a tail, a position gone from the log)."""
    live.append("a-1", [round_start(1), raised(1)])
    live.append("b-1", [round_start(1), raised(1), raised(2)])
    read = live.read_after("b-1", None)
    assert read is not None
    live.write_snapshot("b-1", {"version": 1, "position": read[0][0], "state": {}})
    live.append("c-1", [round_start(1)])
    gone = "999999999999999-0" if isinstance(live, RedisStore) else "99"
    live.write_snapshot("c-1", {"version": 1, "position": gone, "state": {}})
    slugs = ["c-1", "none-1", "b-1", "a-1", "b-1"]
    assert live.read_from_snapshots(slugs) == [live.read_from_snapshot(slug) for slug in slugs]
    assert live.read_from_snapshots([]) == []


def test_a_reap_digest_is_given_only_while_nothing_follows_its_snapshot(live: LiveStore) -> None:
    """The reaper reads a run's digest instead of its fold only while the digest is the log's whole truth:
    the snapshot is of this log and nothing was appended after its position."""
    digest = {"state": "review", "publishing": False, "inflight": [["review", "review:r1:a"]]}
    assert live.reap_digests(["a-1"]) == [None]  # no run
    live.append("a-1", [round_start(1), raised(1)])
    read = live.read_after("a-1", None)
    assert read is not None
    origin, at_end = live.origin("a-1"), read[-1][0]
    doc = {"version": 1, "position": at_end, "origin": origin, "state": {}}
    live.write_snapshot("a-1", doc)
    assert live.reap_digests(["a-1"]) == [None]  # a snapshot without a digest
    live.write_snapshot("a-1", {**doc, "reap": digest})
    assert live.read_from_snapshot("a-1") == (origin, {**doc, "reap": digest}, [])  # the body reads as ever
    assert live.reap_digests(["a-1", "none-1", "a-1"]) == [digest, None, digest]
    live.write_snapshot("a-1", {**doc, "reap": digest, "position": read[0][0]})
    assert live.reap_digests(["a-1"]) == [None]  # an event after its position
    live.write_snapshot("a-1", {**doc, "reap": digest, "origin": "1-1"})
    assert live.reap_digests(["a-1"]) == [None]  # another log's
    live.write_snapshot("a-1", {**doc, "reap": digest})
    live.append("a-1", [raised(2)])
    assert live.reap_digests(["a-1"]) == [None]  # a worker appended after the pass
    assert live.reap_digests([]) == []


def test_read_from_snapshot_pages_through_a_long_tail(live: LiveStore) -> None:
    live.append(SLUG, [round_start(1)])
    first = live.read_after(SLUG, None)
    assert first is not None
    live.write_snapshot(SLUG, {"version": 1, "position": first[0][0]})
    events = [raised(n) for n in range(2500)]  # past a page of the Redis store's reads (1,000)
    for i in range(0, len(events), 500):
        live.append(SLUG, events[i : i + 500])
    tail = live.read_from_snapshot(SLUG)[2]
    assert tail is not None and [e.eid for _, e in tail] == [e.eid for e in events]


def test_the_latest_tick_of_each_agent_run_replaces_the_one_before(live: LiveStore) -> None:
    assert live.alive(SLUG) == []
    live.append(SLUG, [round_start(1)])
    for seconds in (30.0, 60.0, 90.0):
        live.put_alive(SLUG, tick("review:r1:a", seconds))
    live.put_alive(SLUG, tick("review:r1:b", 30.0, agent="b"))
    ticks = {t.key: t for t in live.alive(SLUG)}
    assert set(ticks) == {"review:r1:a", "review:r1:b"}
    assert ticks["review:r1:a"].seconds == 90.0 and ticks["review:r1:b"].seconds == 30.0
    assert [e.t for e in live.read(SLUG)] == ["round.start"]  # the log does not grow with ticks


def test_snapshot_and_ticks_go_with_the_run(live: LiveStore) -> None:
    live.append(SLUG, [round_start(1)])
    live.write_snapshot(SLUG, {"version": 1})
    live.put_alive(SLUG, tick("review:r1:a", 30.0))
    if isinstance(live, RedisStore):
        names = live.run_keys(SLUG)
        assert any(n.endswith(":snapshot") for n in names) and any(n.endswith(":alive") for n in names)
        live.expire_run(SLUG, 1)
        deadline = time.monotonic() + 15
        while live.read_snapshot(SLUG) is not None or live.alive(SLUG):
            assert time.monotonic() < deadline, "the snapshot and ticks outlived the run"
            time.sleep(0.1)
    else:
        assert isinstance(live, MemoryStore) and isinstance(live.clock, ManualClock)
        live.expire_run(SLUG, 1)
        live.clock.advance(2)
        assert live.read_snapshot(SLUG) is None and live.alive(SLUG) == []


def test_a_snapshot_stored_before_its_position_led_it_is_read_and_folded_again(
    client: redis.Redis, prefix: str
) -> None:
    """A snapshot written by an earlier release (its JSON alone) still reads, and gives no tail: the
    reader folds the whole log once, and the next pass writes the snapshot as it is now."""
    from orchestrator.store import keys

    live = RedisStore(client, prefix=prefix)
    live.append(SLUG, [round_start(1), raised(1)])
    read = live.read_after(SLUG, None)
    assert read is not None
    doc = {"version": 1, "position": read[0][0]}
    client.set(keys.snapshot(prefix, SLUG), json.dumps(doc))
    assert live.read_snapshot(SLUG) == doc
    assert live.read_from_snapshot(SLUG) == (live.origin(SLUG), doc, None)
