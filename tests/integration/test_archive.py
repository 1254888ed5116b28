"""The archive (``JURY_ARCHIVE``): an ended run's record leaves Redis for the archive, leaving a stub of a few
hundred bytes, and reads the same from there; a late event lands; a crash between the copy and the delete
loses nothing.

Real Redis, the real coordinator on a real run's record (``tests/data/records``: a converged review with
its artifacts), a directory archive under the test's tmp_path; ``jury show`` in a subprocess.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pytest
import redis

from orchestrator.config import Settings
from orchestrator.domain import VerifyRan, parse_event
from orchestrator.errors import StoreError
from orchestrator.run_reader import read_state
from orchestrator.store import keys
from orchestrator.store.archive import DirectoryArchive, RunArchived
from orchestrator.store.files import FileStore
from orchestrator.store.redis import RedisStore
from orchestrator.store.redis_archive import ArchivingStore
from workers.runtime import coordinator
from workers.runtime.context import Runtime

RECORD = Path(__file__).parents[1] / "data" / "records" / "0eae4e3" / "runs" / "sample-feature-20261207-2336"
SLUG = "sample-feature-20261207-2336"
STUB_BUDGET = 5 * 1024  # issue 49: at most 5 KB of Redis per ended run once archived


def make_rt(client: redis.Redis, prefix: str, state_dir: Path) -> Runtime:
    store = ArchivingStore(client, prefix=prefix, archive=None)
    return Runtime(
        settings=Settings(dir=state_dir, retention=3600),
        store=store,
        files=FileStore(state_dir),
        send=lambda *a: None,
        kick=lambda s: None,
    )


def load_record(rt: Runtime, slug: str = SLUG) -> None:
    """The recorded run as a fleet leaves it: its log and artifacts in Redis, a coordinator pass that
    found it ended (so it is deactivated, set to expire, and, with an archive, archived)."""
    lines = (RECORD / "events.ndjson").read_bytes().splitlines()
    rt.store.append(slug, [e for line in lines if (e := parse_event(line)) is not None])
    arts = {p.name: p.read_bytes() for p in RECORD.iterdir() if p.name.endswith((".md", ".txt", ".jsonl"))}
    rt.store.put_artifacts(slug, arts)
    rt.store.mark_sent(slug, "review:r1:demo-finder")
    rt.store.mark_taken(slug, "review:r1:demo-finder")
    coordinator.coordinate(rt, slug)


def footprint(store: RedisStore, slug: str) -> int:
    """Bytes of Redis the run holds: MEMORY USAGE of every key of it (found by SCAN, not by its key set)."""
    return sum(int(store.client.memory_usage(k, samples=0) or 0) for k in store.scan_run_keys(slug))


def everything(store: RedisStore, slug: str) -> dict[str, Any]:
    """What readers see of the run: the fold (as the coordinator and the console read it), the events,
    run.json, the artifacts, the listing's state, the log's ends."""
    state, position, origin, _ = read_state(store, slug)
    return {
        "fold": state.model_dump(mode="json"),
        "position": position,
        "origin": origin,
        "events": [e.model_dump(mode="json") for e in store.read(slug)],
        "run.json": store.read_state(slug),
        "artifact": store.get_artifact(slug, "triage.r1-demo-finder-1.1.stdout.txt"),
        "listed": store.run_states([slug]),
        "ends": store.log_ends([slug]),
        "exists": store.exists(slug),
    }


def verify_ran(n: int) -> VerifyRan:
    return VerifyRan(
        eid=f"reverify:f1:{n}", id="f1", command="pytest", tree="trunk", sha="a" * 40, passed=True
    )


@pytest.fixture
def rt(client: redis.Redis, prefix: str, tmp_path: Path) -> Runtime:
    return make_rt(client, prefix, tmp_path / "state")


def test_an_ended_run_leaves_a_stub_and_reads_the_same(rt: Runtime, tmp_path: Path) -> None:
    store = rt.store
    assert isinstance(store, ArchivingStore)
    load_record(rt)
    before, bytes_before = everything(store, SLUG), footprint(store, SLUG)
    assert before["fold"]["target"]["state"] == "converged" and not store.stub(SLUG)
    store.archive = DirectoryArchive(tmp_path / "archive")
    coordinator.coordinate(rt, SLUG)  # the pass that finds the run ended archives it
    assert store.stub(SLUG) is not None
    bytes_after = footprint(store, SLUG)
    assert bytes_after <= STUB_BUDGET < bytes_before, (bytes_before, bytes_after)
    assert everything(store, SLUG) == before
    coordinator.coordinate(rt, SLUG)  # a late kick: the pass writes the fold again, and drops it
    assert footprint(store, SLUG) <= STUB_BUDGET and everything(store, SLUG) == before
    # Another process with no JURY_ARCHIVE of its own finds the copy where the stub says.
    assert everything(ArchivingStore(store.client, prefix=store.prefix), SLUG) == before


def test_a_late_event_lands_and_reads(rt: Runtime, tmp_path: Path) -> None:
    store = rt.store
    assert isinstance(store, ArchivingStore)
    store.archive = DirectoryArchive(tmp_path / "archive")
    load_record(rt)
    origin = store.origin(SLUG)
    assert store.stub(SLUG) is not None
    assert store.append(SLUG, [verify_ran(1)]) == 1
    assert store.append(SLUG, [verify_ran(1)]) == 0  # the archived eids still dedupe
    events = store.read(SLUG)
    assert events[-1].eid == "reverify:f1:1" and len(events) == 63
    state, _, read_origin, _ = read_state(store, SLUG)
    assert state.events == 63 and read_origin == origin  # the log's ids survived the round trip
    assert store.stub(SLUG) is not None and footprint(store, SLUG) <= STUB_BUDGET  # archived again
    # A plain RedisStore (a host without the archive code) refuses rather than start a log without its start.
    with pytest.raises(RunArchived):
        RedisStore(store.client, prefix=store.prefix).append(SLUG, [verify_ran(2)])


def test_a_crash_between_the_copy_and_the_delete_loses_nothing(
    rt: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = rt.store
    assert isinstance(store, ArchivingStore)
    load_record(rt)
    before, bytes_before = everything(store, SLUG), footprint(store, SLUG)
    store.archive = archive = DirectoryArchive(tmp_path / "archive")

    def crash(**_: Any) -> int:
        raise StoreError("the worker died here")

    monkeypatch.setattr(store, "_drop_script", crash)
    with pytest.raises(StoreError):
        store.archive_run(SLUG)
    assert archive.get(SLUG) is not None  # the copy was written first
    assert store.stub(SLUG) is None and footprint(store, SLUG) == bytes_before
    assert everything(store, SLUG) == before
    monkeypatch.undo()
    store.archive = archive
    assert store.archive_run(SLUG)  # the next try completes it
    assert everything(store, SLUG) == before


def test_a_write_while_the_copy_is_made_keeps_the_run_in_redis(rt: Runtime, tmp_path: Path) -> None:
    store = rt.store
    assert isinstance(store, ArchivingStore)
    load_record(rt)
    archive = DirectoryArchive(tmp_path / "archive")

    class Meanwhile:
        """An archive whose write is overtaken by an artifact landing in Redis (an agent that outlived
        the run writing its output)."""

        where = archive.where
        get = archive.get

        def put(self, slug: str, blob: bytes) -> None:
            archive.put(slug, blob)
            store.put_artifact(slug, "late.stdout.txt", b"late")

    store.archive = Meanwhile()
    assert not store.archive_run(SLUG)
    assert store.stub(SLUG) is None
    assert store.get_artifact(SLUG, "late.stdout.txt") == b"late"
    assert len(store.read(SLUG)) == 62


def test_jury_show_reads_an_archived_run(jury: Any, shared_redis: str, tmp_path: Path) -> None:
    client = redis.Redis.from_url(shared_redis)
    rt = make_rt(client, keys.PREFIX, tmp_path / "state")
    load_record(rt)
    env = {"JURY_REDIS_URL": shared_redis}
    shown = jury("show", SLUG, "--json", env=env)
    assert shown.code == 0, shown.err
    assert isinstance(rt.store, ArchivingStore)
    rt.store.archive = DirectoryArchive(tmp_path / "archive")
    assert rt.store.archive_run(SLUG)
    again = jury("show", SLUG, "--json", env=env)  # JURY_ARCHIVE unset: the stub names the archive
    assert again.code == 0, again.err
    assert json.loads(again.out) == json.loads(shown.out)


def test_scrub_reaches_the_archived_copy(rt: Runtime, tmp_path: Path) -> None:
    from jury_cli.scrub import scrub_archived
    from orchestrator.redaction import Redactor

    store = rt.store
    assert isinstance(store, ArchivingStore)
    archive = DirectoryArchive(tmp_path / "archive")
    store.archive = archive
    load_record(rt)
    secret = "sk-archived-0123456789abcdef"
    store.append(SLUG, [verify_ran(1).model_copy(update={"output_tail": f"token {secret}"})])
    copy = archive.get(SLUG)
    assert store.stub(SLUG) is not None and copy is not None and secret.encode() in zlib.decompress(copy)
    plain = ArchivingStore(store.client, prefix=store.prefix)  # a host without JURY_ARCHIVE scrubs
    assert scrub_archived(plain, SLUG, Redactor.of([secret]))
    assert store.stub(SLUG) is not None
    copy = archive.get(SLUG)
    assert copy is not None and b"sk-archived" not in zlib.decompress(copy)
    assert secret not in json.dumps([e.model_dump(mode="json") for e in store.read(SLUG)])
