"""The first page of the run list at ten and a hundred thousand runs: ``python -m bench.listing [--runs N
...] [--repeat N] [--old N]`` (or ``python -m bench --only listing``).

Listing read every run's whole log and folded it, two round trips a run: with 10,000 finished runs,
``jury runs`` took 5.5-15 s and the console's first ``/api/runs`` 7.9-18 s. A page now reads the index
from a cursor and one summary a run (``orchestrator.listing``): the figures are a first page of
``list_runs`` (what ``jury runs`` and ``/api/runs`` call), of the store's ``summary_page`` alone, a page
filtered by state, and ``jury runs`` itself (a process, start-up included), each at every ``--runs``;
the Redis commands of a first page (the server's ``INFO commandstats``: the same at every size); and the
old listing (every log folded) at ``--old`` runs, for comparison.

The runs are ended runs seeded straight into a redis-server of the bench's own (the index and the
summaries; for the old listing, copies of one real run's log, by DUMP and RESTORE), so a hundred
thousand take seconds and nothing else on the machine's Redis is counted or touched.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

import redis

from bench.stats import Figure, figure, ratio, seconds_of
from orchestrator.domain import Event, FindingRaised, RoundStart, TargetEvent
from orchestrator.fold import fold
from orchestrator.listing import list_runs
from orchestrator.spec import Target
from orchestrator.store import keys
from orchestrator.store.redis import RedisStore
from orchestrator.summary import RunSummary, SeatCounts
from workers.runtime.embedded import EmbeddedRedis

SIZES = (10_000, 100_000)
OLD = 10_000
LIMIT = 50
PREFIX = keys.PREFIX  # the bench's server is its own: `jury runs` reads it under the default prefix
TARGET_MS = 100.0  # a first page, whatever the number of runs


def seed(client: redis.Redis, start: int, stop: int) -> None:
    """Ended runs ``start``..``stop`` as the store keeps them: the index (by creation) and summaries."""
    pipe = client.pipeline(transaction=False)
    for i in range(start, stop):
        slug = f"bench-list-{i:06d}"
        summary = RunSummary(
            slug=slug,
            repo=f"acme/repo-{i % 40}",
            pr=str(i),
            state="human" if i % 10 == 0 else "converged",
            rounds=2,
            findings={"accepted": 2, "rejected": 1},
            seats=[SeatCounts(agent="alpha", raised=2, accepted=1), SeatCounts(agent="beta", raised=1)],
        )
        pipe.zadd(keys.runs_index(PREFIX), {slug: 1_700_000_000 + i})
        pipe.set(keys.summary(PREFIX, slug), summary.model_dump_json())
        if len(pipe) >= 10_000:
            pipe.execute()
    pipe.execute()


def commands_of(client: redis.Redis, store: RedisStore) -> int:
    """The Redis commands one first page of ``list_runs`` costs (scripts' own commands included)."""
    store.prune()  # loads the prune script: a first call's SCRIPT LOAD is no page's
    client.config_resetstat()
    list_runs(store, LIMIT)
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for name, v in stats.items() if name != "cmdstat_info")


def jury_runs(url: str, state_dir: str) -> None:
    """``jury runs --limit LIMIT`` in a process of its own, on the bench's Redis."""
    env = os.environ | {"JURY_REDIS_URL": url, "JURY_DIR": state_dir, "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "jury_cli", "runs", "--limit", str(LIMIT)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    if done.returncode != 0 or done.stdout.count("\n") < LIMIT:
        raise RuntimeError(f"listing bench: jury runs failed: {done.stderr[-2000:]}")


def page_figures(client: redis.Redis, url: str, runs: int, repeat: int, state_dir: str) -> list[Figure]:
    store = RedisStore(client, prefix=PREFIX)
    listed = [s * 1e3 for s in seconds_of(lambda: list_runs(store, LIMIT), repeat)]
    page = [s * 1e3 for s in seconds_of(lambda: store.summary_page(LIMIT), repeat)]
    filtered = [s * 1e3 for s in seconds_of(lambda: list_runs(store, LIMIT, state="human"), repeat)]
    cli = [s * 1e3 for s in seconds_of(lambda: jury_runs(url, state_dir), max(1, repeat // 2))]
    n = f"{runs:,} runs"
    return [
        figure(
            "listing",
            f"first page, list_runs, {n}",
            "ms",
            listed,
            note=f"{LIMIT} runs; target < {TARGET_MS:.0f} ms",
        ),
        figure("listing", f"first page, summary_page, {n}", "ms", page),
        figure("listing", f"first page --state human, {n}", "ms", filtered, note="1 run in 10 matches"),
        figure("listing", f"jury runs --limit {LIMIT}, {n}", "ms", cli, note="a process: start-up included"),
        figure(
            "listing", f"Redis commands, first page, {n}", "commands", [float(commands_of(client, store))]
        ),
    ]


def old_listing(client: redis.Redis, runs: int) -> Figure:
    """The listing before summaries: every run's whole log read and folded (``runs`` copies of a small
    real log, under a prefix of their own)."""
    prefix = "bench-old"
    store = RedisStore(client, prefix=prefix)
    template = "bench-old-0"
    target = Target(repo="acme/widgets", id="7", state="converged")
    events: list[Event] = [
        TargetEvent(eid="t", target=target),
        RoundStart(eid="r1", n=1, sha="a" * 40, prompt="p"),
    ]
    events += [
        FindingRaised(eid=f"f{i}", id=f"r1-alpha-{i}", round=1, agent="alpha", claim="c", loc="a.py:1")
        for i in range(8)
    ]
    store.append(template, events)
    blobs = {f: cast(bytes, client.dump(f(prefix, template))) for f in (keys.events, keys.eids)}
    pipe = client.pipeline(transaction=False)
    for i in range(1, runs):
        slug = f"bench-old-{i}"
        for f, blob in blobs.items():
            pipe.restore(f(prefix, slug), 0, blob, replace=True)
        pipe.zadd(keys.runs_index(prefix), {slug: 1_700_000_000 + i})
        if len(pipe) >= 10_000:
            pipe.execute()
    pipe.execute()

    def every_log() -> None:
        for slug in store.runs():
            fold(store.read(slug), slug)

    took = seconds_of(every_log, 1)
    return figure("listing", f"old listing: every log folded, {runs:,} runs", "ms", [s * 1e3 for s in took])


def measure(*, sizes: tuple[int, ...] = SIZES, repeat: int = 5, old: int = OLD) -> list[Figure]:
    """The figures (see the module docstring), on a redis-server started for them and stopped after."""
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="jury-bench-") as d, EmbeddedRedis(Path(d)) as url:
        client = redis.Redis.from_url(url)
        seeded = 0
        for runs in sorted(sizes):
            begun = time.perf_counter()
            seed(client, seeded, runs)
            seeded = runs
            print(
                f"listing bench: {runs:,} runs seeded in {time.perf_counter() - begun:.1f} s", file=sys.stderr
            )
            figures += page_figures(client, url, runs, repeat, d)
        if old:
            slow = old_listing(client, old)
            fast = next(f for f in figures if f.name.startswith("first page, list_runs"))
            figures += [slow, ratio("listing", f"old listing / first page, {old:,} runs", slow, fast)]
        client.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    from bench.__main__ import quiet_logs, report
    from bench.machine import describe

    ap = argparse.ArgumentParser(prog="python -m bench.listing", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--runs", type=int, action="append", help="runs listed (repeatable; default 10,000 and 100,000)"
    )
    ap.add_argument("--repeat", type=int, default=5, help="pages timed (default 5)")
    ap.add_argument(
        "--old", type=int, default=OLD, help=f"runs of the old listing (default {OLD:,}; 0: none)"
    )
    args = ap.parse_args(argv)
    quiet_logs()
    figures = measure(sizes=tuple(args.runs or SIZES), repeat=args.repeat, old=args.old)
    report(describe(None) | {"quick": False, "seconds": "-"}, figures, as_json=False)
    return (
        0 if all(f.median < TARGET_MS for f in figures if f.name.startswith("first page, list_runs")) else 1
    )


if __name__ == "__main__":
    sys.exit(main())
