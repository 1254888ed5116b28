"""Redis bytes per ended run, before and after archiving: ``python -m bench.run_bytes [--prs N]``.

A real fleet (one ``jury worker``, fake agents in Jury's sandbox: three reviewers and a judge, one finding,
as ``bench.fleet``) reviews ``--prs`` PRs with no archive, as a fleet without ``JURY_ARCHIVE`` keeps them:
each ended run's keys are summed with ``MEMORY USAGE`` (every key of the run, found by SCAN). Then each run
is archived to a directory (``ArchivingStore.archive_run``, what the coordinator calls when a run ends) and
measured again: the stub and what stays with its own expiry (leases, done markers, ledger calls, the cancel
flag). Then a late ``verify.ran`` is appended to each (loaded back, appended, archived again) and it is
measured once more. Every read of each run (its fold, its events) is checked to be the same before and
after. The projection: a week of retention (``JURY_RETENTION``'s default) at 100,000 PRs a day.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

import redis

from bench import fleet
from bench.stats import Figure, figure
from orchestrator.config import Settings
from orchestrator.domain import VerifyRan
from orchestrator.run_reader import read_state
from orchestrator.store.archive import DirectoryArchive
from orchestrator.store.redis import RedisStore
from orchestrator.store.redis_archive import ArchivingStore

TARGET_BYTES = 5 * 1024  # issue 49: Redis bytes an ended run keeps once archived
WEEK_OF_PRS = 7 * 100_000  # a week of retention at 100,000 PRs a day


def footprint(store: RedisStore, slug: str) -> tuple[int, dict[str, int]]:
    """The run's bytes in Redis (MEMORY USAGE of each of its keys) and their split by kind of key."""
    by_kind: dict[str, int] = collections.Counter()
    for key in store.scan_run_keys(slug):
        parts = key[len(store.prefix) + 1 :].split(":")
        kind = parts[2] if parts[0] == "run" else parts[0]
        by_kind[kind] += int(store.client.memory_usage(key, samples=0) or 0)
    return sum(by_kind.values()), dict(by_kind)


def ended_runs(url: str, base: Path, prs: int) -> list[str]:
    """Review ``prs`` PRs on a one-worker fleet without an archive; the slugs of the runs, all ended."""
    plans = fleet.draw(prs, 0.02)
    prep = Settings(dir=base / "prep", redis_url=url)
    firsts = fleet.prepare(prep, base, list(plans), ",".join(fleet.REVIEWERS))
    settings = Settings(dir=base / "state", redis_url=url)
    env = fleet.fleet_env(url, settings.dir)
    env.pop("JURY_ARCHIVE", None)  # the fleet as it runs without one
    procs = fleet.Processes(env, base / "logs")
    try:
        fleet.jury_workers(procs, 1)
        fleet.submit_and_wait(settings, firsts, timeout=600)
    finally:
        procs.stop()
    return RedisStore(redis.Redis.from_url(url), prefix="jury").runs()


def seen(store: RedisStore, slug: str) -> tuple[object, ...]:
    state, position, origin, _ = read_state(store, slug)
    return state.model_dump(mode="json"), position, origin, [e.eid for e in store.read(slug)]


def largest(kinds: dict[str, int], runs: int) -> str:
    """The six kinds of key that hold the most bytes, a run's share of each."""
    return ", ".join(f"{k} {v // runs:,}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:6])


def measure(base_url: str, prs: int) -> list[Figure]:
    fleet.need_sandbox()
    before: list[float] = []
    after: list[float] = []
    late: list[float] = []
    copies: list[float] = []
    kinds: dict[str, int] = collections.Counter()
    kept: dict[str, int] = collections.Counter()
    with fleet.private_db(base_url) as url, tempfile.TemporaryDirectory() as d:
        base = Path(d)
        slugs = ended_runs(url, base, prs)
        store = ArchivingStore(redis.Redis.from_url(url), prefix="jury", archive=DirectoryArchive(base / "a"))
        for slug in slugs:
            total, split = footprint(store, slug)
            before.append(total)
            kinds.update(split)
            read = seen(store, slug)
            if not store.archive_run(slug):
                raise SystemExit(f"bench: run {slug} was not archived")
            total, split = footprint(store, slug)
            after.append(total)
            kept.update(split)
            copies.append(store.stub(slug)["bytes"])  # type: ignore[index]
            if seen(store, slug) != read:
                raise SystemExit(f"bench: run {slug} reads otherwise once archived")
            event = VerifyRan(eid=f"bench:{slug}", id="f1", command="pytest", tree="trunk", passed=True)
            store.append(slug, [event])
            late.append(footprint(store, slug)[0])
    top, rest = largest(kinds, len(slugs)), largest(kept, len(slugs))
    week = WEEK_OF_PRS / 1e9
    return [
        figure("run bytes", "ended run in Redis, no archive", "bytes", before, note=f"largest: {top}"),
        figure(
            "run bytes", "ended run in Redis, archived", "bytes", after, note=f"<= {TARGET_BYTES:,}: {rest}"
        ),
        figure("run bytes", "after a late verify.ran (re-archived)", "bytes", late),
        figure("run bytes", "the run's copy in the archive", "bytes", copies, note="zlib JSON, on disk"),
        figure("run bytes", "a week at 100,000 PRs/day, no archive", "GB", [b * week for b in before]),
        figure("run bytes", "a week at 100,000 PRs/day, archived", "GB", [b * week for b in after]),
    ]


def main(argv: list[str] | None = None) -> int:
    from bench.__main__ import quiet_logs, report
    from bench.machine import describe

    ap = argparse.ArgumentParser(prog="python -m bench.run_bytes", description=__doc__.splitlines()[0])
    ap.add_argument("--prs", type=int, default=3, help="PRs reviewed (default 3)")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = ap.parse_args(argv)
    quiet_logs()
    client = redis.Redis.from_url(args.redis)
    client.ping()
    figures = measure(args.redis, args.prs)
    report(describe(client) | {"quick": False, "seconds": "-"}, figures, as_json=False)
    return 0 if figures[1].high <= TARGET_BYTES else 1


if __name__ == "__main__":
    sys.exit(main())
