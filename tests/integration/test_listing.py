"""The run list from summaries: a page's cost does not grow with the number of runs (counted in a Redis
of its own), a summary is written when a run ends and rewritten when a later event lands on it (a nightly
``verify.ran``), it outlives the run's keys, and ``jury runs backfill`` writes the ones runs from before
summaries lack. The paging itself (every run once, filters, expiry) is in the store contract suite."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from orchestrator.domain import Event, RunResumed, TargetEvent, VerifyRan
from orchestrator.fold import apply, fold
from orchestrator.listing import list_runs
from orchestrator.spec import Target
from orchestrator.store import keys
from orchestrator.store.files import FileStore, mirror, record
from orchestrator.store.memory import MemoryStore
from orchestrator.store.redis import RedisStore, from_url
from orchestrator.summary import RunSummary
from tests.fakes import console_run as run
from workers.runtime.embedded import EmbeddedRedis

LIMIT = 50


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[str]:
    """A redis-server of this test's own: its command counts are this test's alone."""
    with EmbeddedRedis(tmp_path) as url:
        yield url


def seed(client: redis.Redis, prefix: str, runs: int) -> None:
    """``runs`` ended runs as the index and their summaries, written directly (a real run's keys would
    take minutes to make ten thousand of; the listing reads only these)."""
    pipe = client.pipeline(transaction=False)
    for i in range(runs):
        slug = f"seeded-{i:06d}"
        summary = RunSummary(slug=slug, repo=f"acme/r{i % 7}", state="converged" if i % 3 else "human")
        pipe.zadd(keys.runs_index(prefix), {slug: 1_700_000_000 + i})
        pipe.set(keys.summary(prefix, slug), summary.model_dump_json())
        if len(pipe) >= 5000:
            pipe.execute()
    pipe.execute()


def cost_of_first_page(url: str, prefix: str) -> dict[str, int]:
    """The commands (by name) and the keys looked up (``keyspace`` hits and misses) of the first page of
    ``jury runs`` (``list_runs``), from the server's own statistics."""
    client = redis.Redis.from_url(url)
    store = from_url(url, prefix=prefix)
    store.prune()  # load the scripts now: a first call's SCRIPT LOAD is not the page's
    client.config_resetstat()
    page = list_runs(store, LIMIT)
    stats = client.info("commandstats")
    looked = client.info("stats")
    store.close()
    client.close()
    assert len(page.runs) == LIMIT and page.next is not None
    cost = {name: int(v["calls"]) for name, v in stats.items() if name != "cmdstat_info"}
    cost["keys looked up"] = int(looked["keyspace_hits"]) + int(looked["keyspace_misses"])
    return cost


def test_the_first_page_costs_the_same_commands_at_100_and_10000_runs(own_redis: str) -> None:
    client = redis.Redis.from_url(own_redis)
    seed(client, "small", 100)
    seed(client, "large", 10_000)
    client.close()
    small, large = cost_of_first_page(own_redis, "small"), cost_of_first_page(own_redis, "large")
    assert small == large
    assert sum(n for name, n in small.items() if name.startswith("cmdstat_")) < 12, small


def converged_run() -> list[Event]:
    end = TargetEvent(eid="target:end", ts=run.at(80), target=Target(state="converged"))
    return [*run.started(), *run.alpha_found(), *run.judged(), end]


def late_check(passed: bool) -> VerifyRan:
    return VerifyRan(
        eid=f"verify:trunk:{passed}",
        ts=run.at(90_000),
        id="r1-alpha-1",
        command="pytest",
        tree="trunk",
        trunk="main",
        passed=passed,
    )


@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_a_summary_is_written_at_the_end_and_rewritten_by_a_late_event(
    kind: str, tmp_path: Path, prefix: str, client: redis.Redis
) -> None:
    live = MemoryStore() if kind == "memory" else RedisStore(client, prefix=prefix)
    files = FileStore(tmp_path)
    slug = "acme-7"
    live.append(slug, run.started())
    mirror(live, files, slug)  # a live run: no summary, a listing folds it
    assert live.read_summary(slug) is None and files.read_summary(slug) is None
    live.append(slug, converged_run())
    record(live, files, slug)  # the pass that sees the end
    first = live.read_summary(slug)
    assert first is not None and first.state == "converged" and first.trunk_checks == 0
    assert first.findings == {"accepted": 1} and first.seats[0].agent == "alpha"
    assert first.seats[0].raised == 1 and first.seats[0].accepted == 1
    assert files.read_summary(slug) == first  # summary.json beside run.json
    live.append(slug, [late_check(False)])  # `jury verify`, a night later
    mirror(live, files, slug)
    later = live.read_summary(slug)
    assert later is not None and (later.trunk_checks, later.trunk_failures) == (1, 1)
    assert later.ended == first.ended and later.updated != first.updated  # the end it had is kept
    assert files.read_summary(slug) == later
    (listed,) = list_runs(live, 10).runs
    assert listed == later
    new = [
        RunResumed(eid="resumed", ts=run.at(90_100), epoch=1),
        TargetEvent(eid="t:again", ts=run.at(90_100), target=Target(state="review")),
    ]
    live.append(slug, new)
    state = fold(live.read(slug)[: -len(new)], slug)
    for e in new:
        apply(state, e)
    record(live, files, slug, state, new)  # a coordinator pass: what is new only
    assert live.read_summary(slug) is None and files.read_summary(slug) is None  # live again: folded
    assert list_runs(live, 10).runs[0].state == "review"


def test_a_summary_outlives_the_run_keys(prefix: str, client: redis.Redis, tmp_path: Path) -> None:
    store = RedisStore(client, prefix=prefix)
    slug = "acme-7"
    store.append(slug, converged_run())
    mirror(store, FileStore(tmp_path), slug)
    store.expire_run(slug, 1)
    run_keys = store.run_keys(slug)
    assert run_keys and all(client.pttl(k) > 0 for k in run_keys), run_keys
    for key in (keys.summary(prefix, slug), keys.summaries(prefix)):
        assert client.pttl(key) == -1, key  # no TTL: a month of figures outlives the runs
    deadline = time.monotonic() + 10
    while store.exists(slug):
        assert time.monotonic() < deadline, "the run did not expire"
        time.sleep(0.05)
    assert list_runs(store, 10).runs == []  # an expired run is never listed
    kept = store.read_summary(slug)
    assert kept is not None and kept.state == "converged" and kept.fixes == 1


def test_backfill_writes_the_summaries_old_runs_lack_once(jury, state_dir: Path) -> None:
    files = FileStore(state_dir)
    files.append("old-1", converged_run())  # ended before summaries: none written
    files.append("old-2", run.started(state="human"))
    files.append("live-1", run.started())
    assert files.read_summary("old-1") is None
    first = jury("runs", "backfill")
    assert first.code == 0, first.err
    assert "summaries written: 2, already there: 0, runs not ended: 1, unreadable: 0" in first.out
    assert (state_dir / "runs" / "old-1" / "summary.json").is_file()
    again = jury("runs", "backfill")
    assert "summaries written: 0, already there: 2, runs not ended: 1" in again.out
    listed = jury("runs", "--json", "--limit", "2")
    assert listed.code == 0, listed.err
    page = json.loads(listed.out)
    assert [r["slug"] for r in page["runs"]] == ["live-1", "old-2"] and page["next"]
    rest = json.loads(jury("runs", "--json", "--cursor", page["next"]).out)
    assert [r["slug"] for r in rest["runs"]] == ["old-1"] and rest["next"] is None
    assert rest["runs"][0]["findings"] == {"accepted": 1}
    human = jury("runs", "--state", "human", "--repo", "ACME/widgets")
    assert human.out.split()[:2] == ["old-2", "human"], human.out
