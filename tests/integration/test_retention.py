"""Retention: an ended run's Redis keys expire ``JURY_RETENTION`` after it ended; its files record stays.

Real Redis, the real coordinator (``workers.coordinator.coordinate``) on runs whose log says they are live,
ended or resumed; no workers are needed for that (``send`` and ``kick`` only record).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from orchestrator.config import Settings
from orchestrator.domain import TargetEvent
from orchestrator.spec import Target
from orchestrator.store import keys
from orchestrator.store.base import RunVanished, read_run
from orchestrator.store.files import FileStore
from orchestrator.store.redis import RedisStore
from workers import coordinator
from workers.runtime import Runtime

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


def populate(rt: Runtime, slug: str = SLUG) -> dict[str, str]:
    """Every kind of key a run has, as the workers leave them; returns name -> key."""
    c, p = rt.client, rt.prefix
    rt.store.put_artifact(slug, "round-1.codex.stdout.txt", b"report")
    rt.store.put_artifact(slug, "patches/r1-codex-1.patch", b"diff")
    made = {
        "ledger": keys.ledger_run(p, slug),
        "lease": keys.lease(p, f"{slug}:review:r1:codex"),
        "done": keys.done(p, f"{slug}:review:r1:claude"),
        "sent": keys.sent(p, f"{slug}:review:r1:codex"),
        "call": keys.ledger_call(p, f"{slug}:review:r1:codex"),
        "cancel": keys.cancel(p, slug),
    }
    c.hset(made["ledger"], mapping={"spent": 10, "reserved": 0})
    c.set(made["lease"], "token", px=60_000)
    c.set(made["done"], "1", ex=7 * 86400)
    c.set(made["sent"], "1", ex=7 * 86400)
    c.hset(made["call"], mapping={"run": slug, "state": "settled"})
    c.expire(made["call"], 30 * 86400)
    c.set(made["cancel"], "1", ex=7 * 86400)
    made["events"] = keys.events(p, slug)
    made["eids"] = keys.eids(p, slug)
    made["state"] = keys.state(p, slug)
    made["artifact"] = keys.artifact(p, slug, "round-1.codex.stdout.txt")
    made["patch"] = keys.artifact(p, slug, "patches/r1-codex-1.patch")
    return made


RECORD = ("events", "eids", "state", "artifact", "patch", "ledger")


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
    assert client.ttl(keys.artifact(prefix, SLUG, "late.txt")) == -1
    # Another pass over the ended run, by a worker with a longer retention: the late key is caught and
    # given the same deadline; nothing is pushed back.
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
