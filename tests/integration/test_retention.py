"""Retention: an ended run's Redis keys expire ``JURY_RETENTION`` after it ended; its files record stays.

Real Redis, the real coordinator (``workers.runtime.coordinator.coordinate``) on runs whose log says they are
live, ended or resumed; no workers are needed for that (``send`` and ``kick`` only record).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import redis

from orchestrator.config import Settings
from orchestrator.domain import AgentAlive, TargetEvent
from orchestrator.spec import Target
from orchestrator.store import keys
from orchestrator.store.base import LATE_WRITE_TTL, RunVanished, SweepClaim, SweptStart, pull_head, read_run
from orchestrator.store.files import FileStore
from orchestrator.store.redis import RedisStore
from workers.fleet.ledger import Ledger
from workers.runtime import coordinator
from workers.runtime.context import Runtime
from workers.runtime.lease import RedisLeases

RETENTION = 3600
SLUG = "repo-1-a"


def make_rt(client: redis.Redis, prefix: str, state_dir: Path, retention: int = RETENTION) -> Runtime:
    store = RedisStore(client, prefix=prefix)
    settings = Settings(dir=state_dir, retention=retention)
    return Runtime(
        settings=settings, store=store, files=FileStore(state_dir), send=lambda *a: None, kick=lambda s: None
    )


def live(rt: Runtime, slug: str = SLUG) -> None:
    rt.store.append(slug, [TargetEvent(eid="target:0", target=Target(repo="repo", state="review"))])
    coordinator.coordinate(rt, slug)


def end(rt: Runtime, slug: str = SLUG, eid: str = "end:1") -> None:
    rt.store.append(slug, [TargetEvent(eid=eid, target=Target(state="cancelled", state_note="stopped"))])
    coordinator.coordinate(rt, slug)


def resume(rt: Runtime, slug: str = SLUG) -> None:
    rt.store.append(slug, [TargetEvent(eid="resume:1", target=Target(state="review", state_note=None))])
    coordinator.coordinate(rt, slug)


def write_action_keys(rt: Runtime, slug: str) -> str:
    """The keys of a run's actions and agent calls, each written as a worker writes it: leases (one held,
    one finished), done markers, sent, taken and resent marks, a ledger call (its id is returned)."""
    p = rt.prefix
    leases = RedisLeases(rt.client, prefix=p)
    assert leases.lease(f"{slug}:review:r1:codex", ttl=60).acquire()
    finished = leases.lease(f"{slug}:review:r1:claude", ttl=60)
    assert finished.acquire() and finished.finish()
    leases.mark_done(f"{slug}:publish")
    rt.store.mark_sent(slug, "review:r1:codex")
    rt.store.mark_taken(slug, "review:r1:codex")
    rt.store.mark_sent(slug, "review:r1:gemini")
    assert rt.store.mark_resent(slug, "review:r1:gemini") == 1
    ledger = Ledger(rt.client, prefix=p)
    call = f"{slug}:review:r1:codex:call0"
    ok = ledger.reserve(
        slug=slug, call_id=call, projection=0.01, run_ceiling=None, call_ceiling=None, day_ceiling=None
    ).ok
    assert ok
    return call


def populate(rt: Runtime, slug: str = SLUG) -> dict[str, str]:
    """Every kind of key a run has, each written by the code that writes it in a fleet (so each is named
    in the run's key set, as there); returns name -> key."""
    rt.store.put_artifact(slug, "round-1.codex.stdout.txt", b"report")
    rt.store.put_artifact(slug, "patches/r1-codex-1.patch", b"diff")
    call = write_action_keys(rt, slug)
    rt.store.set_cancel_flag(slug)
    p = rt.prefix
    return {
        "ledger": keys.ledger_run(p, slug),
        "lease": keys.lease(p, f"{slug}:review:r1:codex"),
        "done": keys.done(p, f"{slug}:review:r1:claude"),
        "marked": keys.done(p, f"{slug}:publish"),
        "sent": keys.sent(p, f"{slug}:review:r1:codex"),
        "taken": keys.taken(p, f"{slug}:review:r1:codex"),
        "resent": keys.resent(p, f"{slug}:review:r1:gemini"),
        "call": keys.ledger_call(p, call),
        "cancel": keys.cancel(p, slug),
        "events": keys.events(p, slug),
        "eids": keys.eids(p, slug),
        "state": keys.state(p, slug),
        "index": keys.run_index(p, slug),
        "artifact": keys.artifact(p, slug, "round-1.codex.stdout.txt"),
        "patch": keys.artifact(p, slug, "patches/r1-codex-1.patch"),
    }


RECORD = ("events", "eids", "state", "index", "artifact", "patch", "ledger")


def all_keys(client: redis.Redis, prefix: str) -> dict[str, int]:
    """Every key under the prefix with its TTL in seconds (-1: none)."""
    return {
        k.decode(): int(client.ttl(k)) for k in client.scan_iter(match=keys.scan_pattern(prefix), count=1000)
    }


def test_a_live_run_has_no_expiry_on_its_record(client: redis.Redis, prefix: str, tmp_path: Path) -> None:
    rt = make_rt(client, prefix, tmp_path)
    live(rt)
    made = populate(rt)
    coordinator.coordinate(rt, SLUG)
    ttls = all_keys(client, prefix)
    assert {name: ttls[made[name]] for name in RECORD} == dict.fromkeys(RECORD, -1)
    assert client.zscore(keys.expiring_runs(prefix), SLUG) is None
    assert rt.store.exists(SLUG) and SLUG in rt.store.runs()


def test_an_ended_run_has_a_ttl_on_every_key(client: redis.Redis, prefix: str, tmp_path: Path) -> None:
    rt = make_rt(client, prefix, tmp_path)
    live(rt)
    made = populate(rt)
    # Neighbours that must not be touched: a slug that extends this one, and another run's artifact
    # whose name holds this slug between colons.
    live(rt, SLUG + "0")
    live(rt, "other")
    rt.store.put_artifact("other", f"x:{SLUG}:y", b"z")
    end(rt)
    ttls = all_keys(client, prefix)
    belongs = keys.run_key_re(prefix, SLUG)
    ours = {k: t for k, t in ttls.items() if belongs.match(k)}
    assert set(made.values()) <= set(ours)
    assert all(0 < t <= RETENTION for t in ours.values()), ours
    assert ttls[made["lease"]] <= 60  # a lease's own short TTL is never lengthened
    others = {k: t for k, t in ttls.items() if not belongs.match(k)}
    assert others[keys.events(prefix, SLUG + "0")] == -1
    assert others[keys.artifact(prefix, "other", f"x:{SLUG}:y")] == -1
    assert others[keys.runs_index(prefix)] == -1
    deadline = client.zscore(keys.expiring_runs(prefix), SLUG)
    assert deadline is not None and client.expiretime(made["events"]) == int(deadline)


def test_the_deadline_is_set_once(client: redis.Redis, prefix: str, tmp_path: Path) -> None:
    rt = make_rt(client, prefix, tmp_path)
    live(rt)
    end(rt)
    first = client.expiretime(keys.events(prefix, SLUG))
    rt.store.put_artifact(SLUG, "late.txt", b"written after the end")
    assert client.expiretime(keys.artifact(prefix, SLUG, "late.txt")) == first  # it expires with the run
    # Another pass over the ended run, by a worker with a longer retention: nothing is pushed back.
    end(make_rt(client, prefix, tmp_path, retention=10 * RETENTION), eid="end:2")
    assert client.expiretime(keys.artifact(prefix, SLUG, "late.txt")) == first
    assert client.expiretime(keys.events(prefix, SLUG)) == first


def test_writing_state_keeps_the_expiry(client: redis.Redis, prefix: str, tmp_path: Path) -> None:
    # `jury review` writes run.json into Redis once more after the run ended (its final sync).
    rt = make_rt(client, prefix, tmp_path)
    live(rt)
    rt.store.put_artifact(SLUG, "patches/r1-codex-1.patch", b"diff")
    end(rt)
    rt.store.write_state(SLUG, {"slug": SLUG})
    rt.store.put_artifact(SLUG, "patches/r1-codex-1.patch", b"again")
    assert 0 < client.ttl(keys.state(prefix, SLUG)) <= RETENTION
    assert 0 < client.ttl(keys.artifact(prefix, SLUG, "patches/r1-codex-1.patch")) <= RETENTION


def test_a_resumed_run_keeps_its_keys(client: redis.Redis, prefix: str, tmp_path: Path) -> None:
    rt = make_rt(client, prefix, tmp_path)
    live(rt)
    made = populate(rt)
    end(rt)
    resume(rt)
    assert rt.store.read_state(SLUG) is not None
    ttls = all_keys(client, prefix)
    assert {name: ttls[made[name]] for name in RECORD} == dict.fromkeys(RECORD, -1)
    assert 0 < ttls[made["lease"]] <= 60 and 0 < ttls[made["done"]]  # their own TTLs: never made permanent
    assert client.zscore(keys.expiring_runs(prefix), SLUG) is None


def wait_gone(client: redis.Redis, key: str, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while client.exists(key):
        assert time.monotonic() < deadline, f"{key} did not expire"
        time.sleep(0.05)


def test_the_files_record_stays_after_the_keys_are_gone(
    client: redis.Redis, prefix: str, tmp_path: Path
) -> None:
    rt = make_rt(client, prefix, tmp_path, retention=1)
    live(rt)
    populate(rt)
    end(rt)
    wait_gone(client, keys.events(prefix, SLUG))
    wait_gone(client, keys.artifact(prefix, SLUG, "patches/r1-codex-1.patch"))
    leftovers = [k for k in all_keys(client, prefix) if keys.run_key_re(prefix, SLUG).match(k)]
    assert leftovers == [keys.lease(prefix, f"{SLUG}:review:r1:codex")] or leftovers == []  # lease: ≤ 60 s
    # Forgotten by the index, kept in the files.
    assert SLUG not in rt.store.runs() and not rt.store.exists(SLUG)
    assert client.zscore(keys.expiring_runs(prefix), SLUG) is None
    files = FileStore(tmp_path)
    assert files.exists(SLUG) and [e.eid for e in files.read(SLUG)] == ["target:0", "end:1"]
    assert (files.read_state(SLUG) or {})["target"]["state"] == "cancelled"
    with pytest.raises(RunVanished, match=f"run {SLUG} is no longer in the store") as caught:
        read_run(rt.store, SLUG, tmp_path)
    assert caught.value.record == tmp_path / "runs" / SLUG and caught.value.exit_code == 1
    # The same name registered again is a new run, with no expiry.
    assert rt.store.create_run(SLUG)
    assert client.zscore(keys.expiring_runs(prefix), SLUG) is None


def test_a_run_whose_keys_expired_unpruned_comes_back_new(
    client: redis.Redis, prefix: str, tmp_path: Path
) -> None:
    rt = make_rt(client, prefix, tmp_path, retention=1)
    live(rt)
    end(rt)
    wait_gone(client, keys.events(prefix, SLUG))
    created = client.zscore(keys.runs_index(prefix), SLUG)
    assert created is not None  # nobody listed the runs yet
    assert rt.store.append(SLUG, [TargetEvent(eid="target:0", target=Target(repo="repo"))]) == 1
    again = client.zscore(keys.runs_index(prefix), SLUG)
    assert again is not None and again > created  # a new run, created now, not the old one's entry
    assert client.zscore(keys.expiring_runs(prefix), SLUG) is None
    assert client.ttl(keys.events(prefix, SLUG)) == -1


def test_a_live_run_whose_keys_were_deleted_leaves_the_active_set(
    client: redis.Redis, prefix: str, tmp_path: Path
) -> None:
    # Else the reaper would kick it forever, and each pass would write its state back into Redis.
    rt = make_rt(client, prefix, tmp_path)
    live(rt)
    assert client.sismember(keys.active_runs(prefix), SLUG)
    client.delete(*rt.store.run_keys(SLUG))
    state = coordinator.coordinate(rt, SLUG)
    assert state.events == 0
    assert not client.sismember(keys.active_runs(prefix), SLUG)
    assert rt.store.run_keys(SLUG) == [] and coordinator.reap(rt) == []


# -- the run's key set: what an ended run's expiry reads instead of SCANning the database ----------------


def test_the_key_set_names_every_key_the_writers_left(
    client: redis.Redis, prefix: str, tmp_path: Path
) -> None:
    rt = make_rt(client, prefix, tmp_path)
    live(rt)
    made = populate(rt)
    assert rt.store.scan_run_keys(SLUG) == rt.store.run_keys(SLUG)
    assert set(made.values()) <= set(rt.store.run_keys(SLUG))
    listed = {k.decode() for k in client.smembers(keys.run_index(prefix, SLUG))}
    assert keys.run_index(prefix, SLUG) in listed  # written when the run was created
    assert made["lease"] in listed and made["call"] in listed and made["patch"] in listed


def test_an_ended_run_expires_without_a_scan(
    client: redis.Redis, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = make_rt(client, prefix, tmp_path)
    live(rt)
    made = populate(rt)

    def no_scan(slug: str) -> list[str]:
        raise AssertionError(f"SCANned the database for the keys of {slug}")

    monkeypatch.setattr(rt.store, "scan_run_keys", no_scan)
    end(rt)
    ttls = all_keys(client, prefix)
    assert all(0 < ttls[key] <= RETENTION for key in made.values()), ttls
    assert ttls[made["lease"]] <= 60


def test_a_swept_run_starts_with_its_key_set(client: redis.Redis, prefix: str, tmp_path: Path) -> None:
    rt = make_rt(client, prefix, tmp_path)
    head = pull_head("github", "acme/app", 7, "a" * 40)
    start = TargetEvent(eid="target:0", target=Target(repo="repo", state="review"))
    assert rt.store.start_swept([SweptStart(head, SLUG, [start])]) == [SweepClaim("started")]
    index = keys.run_index(prefix, SLUG)
    assert client.sismember(index, index)


@pytest.mark.parametrize("how", ["no key set", "a key set without its mark"])
def test_a_run_from_before_key_sets_is_scanned_at_its_end(
    client: redis.Redis, prefix: str, tmp_path: Path, how: str
) -> None:
    # Keys written by a version that kept no key set: the run's end finds them with a SCAN, as it did then.
    rt = make_rt(client, prefix, tmp_path)
    live(rt)
    index = keys.run_index(prefix, SLUG)
    client.delete(index)
    old = [keys.artifact(prefix, SLUG, "round-1.codex.stdout.txt"), keys.done(prefix, f"{SLUG}:publish")]
    for key in old:
        client.set(key, b"written by the old version")
    # A worker of this version writes to the old run since: its key set stays away (a set without its own
    # name would say it listed the run's keys).
    rt.store.mark_sent(SLUG, "review:r1:codex")
    rt.store.put_artifact(SLUG, "round-1.claude.stdout.txt", b"report")
    RedisLeases(client, prefix=prefix).mark_done(f"{SLUG}:review:r1:claude")
    assert not client.exists(index)
    new = [
        keys.sent(prefix, f"{SLUG}:review:r1:codex"),
        keys.artifact(prefix, SLUG, "round-1.claude.stdout.txt"),
        keys.done(prefix, f"{SLUG}:review:r1:claude"),
    ]
    if how == "a key set without its mark":
        client.sadd(index, new[0])
    end(rt)
    ttls = all_keys(client, prefix)
    assert all(0 < ttls[key] <= RETENTION for key in old + new), ttls
    assert 0 < ttls[keys.events(prefix, SLUG)] <= RETENTION
    if how == "no key set":  # its log says it ended: what is written for it since expires with it
        late = keys.artifact(prefix, SLUG, "late.txt")
        rt.store.put_artifact(SLUG, "late.txt", b"written after the end")
        assert client.expiretime(late) == client.expiretime(keys.events(prefix, SLUG))


def write_unexpiring_keys(rt: Runtime, slug: str, artifact: str) -> list[str]:
    """The run's keys that keep no TTL of their own, each written as a worker writes it: an artifact, an
    agent's liveness tick, the run's ledger hash (a reservation, then its release); returns their names."""
    rt.store.put_artifact(slug, artifact, b"late report")
    tick = AgentAlive(eid=f"alive:{artifact}", agent="codex", round=1, seconds=1.0, quiet_seconds=0.0)
    rt.store.put_alive(slug, tick)
    ledger = Ledger(rt.client, prefix=rt.prefix)
    call = f"{slug}:review:r1:codex:{artifact}"
    assert ledger.reserve(
        slug=slug, call_id=call, projection=0.01, run_ceiling=None, call_ceiling=None, day_ceiling=None
    ).ok
    assert ledger.release(call)
    p = rt.prefix
    return [keys.artifact(p, slug, artifact), keys.alive(p, slug), keys.ledger_run(p, slug)]


def test_a_late_write_to_an_expired_run_leaves_no_key_without_a_ttl(
    client: redis.Redis, prefix: str, tmp_path: Path
) -> None:
    # A copy of a task that runs after the run's keys expired: its marks expire on their own, and what
    # keeps no TTL of its own (an artifact, a tick, the run's ledger hash) expires a day later, so a late
    # writer leaves nothing for ever. A key set made then would list names without its own, and stay.
    rt = make_rt(client, prefix, tmp_path, retention=1)
    live(rt)
    end(rt)
    # A call reserved after the end (its hash keeps its own 30 days) and settled once the run is gone.
    ledger = Ledger(rt.client, prefix=prefix)
    straggler = f"{SLUG}:review:r1:codex:straggler"
    assert ledger.reserve(
        slug=SLUG, call_id=straggler, projection=0.01, run_ceiling=None, call_ceiling=None, day_ceiling=None
    ).ok
    index = keys.run_index(prefix, SLUG)
    wait_gone(client, index)
    wait_gone(client, keys.events(prefix, SLUG))
    wait_gone(client, keys.ledger_run(prefix, SLUG))
    assert ledger.release(straggler)
    assert 0 < client.ttl(keys.ledger_run(prefix, SLUG)) <= LATE_WRITE_TTL
    write_action_keys(rt, SLUG)
    unexpiring = write_unexpiring_keys(rt, SLUG, "round-2.codex.stdout.txt")
    assert not client.exists(index)
    ttls = all_keys(client, prefix)
    late = [k for k in ttls if keys.run_key_re(prefix, SLUG).match(k)]
    assert set(unexpiring) <= set(late)
    assert all(ttls[k] > 0 for k in late), ttls
    assert all(ttls[k] <= LATE_WRITE_TTL for k in unexpiring), ttls


def test_a_key_written_after_the_run_ended_expires_with_it(
    client: redis.Redis, prefix: str, tmp_path: Path
) -> None:
    # An agent that outlives its run's end (cancelled while it ran) writes its report, a tick and its
    # cost after the end expired the run's keys, and no coordinator pass may follow to catch them.
    rt = make_rt(client, prefix, tmp_path)
    live(rt)
    end(rt)
    deadline = client.zscore(keys.expiring_runs(prefix), SLUG)
    assert deadline is not None
    late = write_unexpiring_keys(rt, SLUG, "round-1.codex.stdout.txt")
    assert {k: client.expiretime(k) for k in late} == dict.fromkeys(late, int(deadline))
    assert client.sismember(keys.run_index(prefix, SLUG), late[0])  # listed, as any artifact is
    live_keys = write_unexpiring_keys(rt, SLUG + "0", "round-1.codex.stdout.txt")  # a run never started
    assert all(0 < client.ttl(k) <= LATE_WRITE_TTL for k in live_keys)


def test_a_live_run_keeps_what_it_writes(client: redis.Redis, prefix: str, tmp_path: Path) -> None:
    rt = make_rt(client, prefix, tmp_path)
    live(rt)
    made = write_unexpiring_keys(rt, SLUG, "round-1.codex.stdout.txt")
    assert [client.ttl(k) for k in made] == [-1, -1, -1]


# -- prune: thousands of expired runs, forgotten in bounded batches and never listed -----------------------


def seed_runs(client: redis.Redis, prefix: str, slugs: list[str], deadline: float | None) -> None:
    """Register the runs as ``create_run`` does and, with a ``deadline``, set them to expire then (as
    ``expire_run`` does: keys.expiring_runs), in one pipeline."""
    store = RedisStore(client, prefix=prefix)
    pipe = client.pipeline(transaction=False)
    for slug in slugs:
        store._append_script(  # the registration itself, in one round trip for all
            keys=[
                keys.events(prefix, slug),
                keys.eids(prefix, slug),
                keys.runs_index(prefix),
                keys.expiring_runs(prefix),
                keys.run_index(prefix, slug),
                keys.archived(prefix, slug),
            ],
            args=[slug],
            client=pipe,
        )
    pipe.execute()
    if deadline is not None:
        client.zadd(keys.expiring_runs(prefix), dict.fromkeys(slugs, deadline))


def test_thousands_of_expired_runs_are_never_listed_and_all_pruned_in_bounded_batches(
    client: redis.Redis, prefix: str, tmp_path: Path
) -> None:
    rt = make_rt(client, prefix, tmp_path)
    store = rt.store
    assert isinstance(store, RedisStore)
    now = float(client.time()[0])
    expired = [f"old-{i}" for i in range(2500)]
    kept = [f"kept-{i}" for i in range(20)]  # ended, retention still running
    running = [f"live-{i}" for i in range(5)]  # never ended
    seed_runs(client, prefix, expired, deadline=now - 5)
    seed_runs(client, prefix, kept, deadline=now + 3600)
    seed_runs(client, prefix, running, deadline=None)
    assert client.zcard(keys.runs_index(prefix)) == 2525  # nobody pruned yet

    # Before any prune: a look-up and a state read already leave the expired out.
    assert not store.exists("old-7") and store.exists("kept-3") and store.exists("live-0")
    client.set(keys.state(prefix, "old-7"), b'{"target": {"state": "cancelled"}}')
    client.set(keys.state(prefix, "kept-3"), b'{"target": {"state": "cancelled"}}')
    assert store.run_states(["old-7", "kept-3"]) == {"old-7": None, "kept-3": "cancelled"}
    assert client.zcard(keys.runs_index(prefix)) == 2525  # a look-up prunes nothing

    # A prune cut short after one batch (a lister that died, another host between): the rest stay unlisted.
    calls: list[int] = []
    script = store._prune_script

    def one_batch(**call: list[Any]) -> int:
        calls.append(int(call["args"][0]))
        return int(script(**call))

    assert one_batch(keys=[keys.runs_index(prefix), keys.expiring_runs(prefix)], args=[1000]) == 1000
    full_prune = store.prune
    store.prune = lambda batch=1000: 0  # type: ignore[method-assign]  # this listing prunes nothing
    listed = store.runs()
    assert client.zcard(keys.runs_index(prefix)) == 1525  # 1,500 expired still in the index ...
    assert sorted(listed) == sorted(kept + running)  # ... and none of them listed

    # The whole prune: batches of at most 1,000 until a short one; every expired run gone from both sets.
    store.prune = full_prune  # type: ignore[method-assign]
    store._prune_script = one_batch  # type: ignore[assignment]
    assert store.prune() == 1500
    assert calls == [1000, 1000, 1000]  # the cut-short one, then 1,000 and 500 (short: none left)
    assert sorted(store.runs()) == sorted(kept + running)
    assert client.zcard(keys.runs_index(prefix)) == 25
    assert client.zrange(keys.expiring_runs(prefix), 0, -1) == sorted(s.encode() for s in kept)
