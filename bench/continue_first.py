"""Continuing work first: ``python -m bench.continue_first [--prs N ...] [--workers W] [--code DIR]``.

A sweep starts thousands of runs at once. Each run's reviews, its triage, its reply and its second round
are queued as it goes; when a queue was FIFO, a run's second round waited behind every other run's first
reviews, so a run took longer from its first task to its verdict the more runs there were (issue 49:
185/277 s p50/p95 at 3,000 PRs). Now the actions of a run none of whose actions has been taken are sent at
the broker's last priority step (``workers.runtime.tasks.send_new``), so a run under way finishes first.

The workload: N runs started at once (as ``jury review --detach`` starts one) on W ``jury worker
--concurrency 1`` processes (``bench.fleet``'s workers and private Redis database), each run one reviewer
that finds one thing, a triage that rejects it, a reply and a second round, every agent the bench's fake
(``bench/fakes/agent.sh``) answering at once, in Jury's sandbox. Per run: from its first agent's launch
to its verdict (the event that ends it). ``--code DIR``: the workers run that checkout of Jury instead
(``python -m`` imports from its working directory), for the figures of an earlier release.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from bench import fleet
from bench.stats import Figure
from orchestrator.config import Settings
from orchestrator.domain import Event

RATIO_TARGET = 2.0  # issue 49: p95 at 3,000 PRs within 2x of that at 100


def first_to_verdict(events: list[Event]) -> float | None:
    """Seconds from the run's first agent launch to the event that ended it (None: it has neither)."""
    launches = [datetime.fromisoformat(e.ts) for e in events if e.t == "agent.launch"]
    ends = [datetime.fromisoformat(e.ts) for e in events if e.t == "target" and e.eid.startswith("end:")]
    if not launches or not ends:
        return None
    return (min(ends) - min(launches)).total_seconds()


def one_size(url: str, base: Path, n: int, w: int, code: Path) -> tuple[list[float], float, list[str]]:
    """N runs on W fresh workers: each run's first-task-to-verdict seconds, the wall time, end states."""
    from jury_cli.backend import backend

    zero = fleet.Durations(review1=(0, 0, 0), review2=(0, 0, 0), triage=0, reply=0)
    prep = Settings(dir=base / f"prep{n}", redis_url=url)
    firsts = fleet.prepare(prep, base / f"repos{n}", [zero] * n, "r1")
    settings = Settings(dir=base / f"state{n}", redis_url=url)
    procs = fleet.Processes(fleet.fleet_env(url, settings.dir), base / f"logs{n}", code=code)
    try:
        fleet.jury_workers(procs, w)
        with backend(settings, 1) as b:
            t0 = time.perf_counter()
            slugs = [fleet.start_run(b, f"bench-pr-{i}", events) for i, events in enumerate(firsts)]
            wanted = set(slugs)
            fleet.wait_until("every run to end", lambda: not wanted & set(b.store.active_runs()), 3600, 0.2)
            wall = time.perf_counter() - t0
            logs = [b.store.read(s) for s in slugs]
    finally:
        procs.stop()
    from orchestrator.fold import fold

    seconds = [s for s in (first_to_verdict(events) for events in logs) if s is not None]
    return seconds, wall, [fold(events, s).state for events, s in zip(logs, slugs, strict=True)]


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20, method="inclusive")[18] if len(samples) > 1 else samples[0]


def measure(url: str, sizes: tuple[int, ...], w: int, code: Path) -> list[Figure]:
    fleet.need_sandbox()
    out: list[Figure] = []
    p95s: dict[int, float] = {}
    with fleet.private_db(url) as db, tempfile.TemporaryDirectory(prefix="jury-bench-continue-") as d:
        for n in sizes:
            seconds, wall, states = one_size(db, Path(d), n, w, code)
            note = f"{len(seconds)} runs, W={w}, wall {wall:.0f} s" + fleet.ended_otherwise(states)
            p95s[n] = p95(seconds)
            out.append(
                Figure(
                    "continue first",
                    f"{n:,} PRs: first task to verdict, p50 (min: p50, max: p95)",
                    "s",
                    statistics.median(seconds),
                    statistics.median(seconds),
                    p95s[n],
                    len(seconds),
                    note=note,
                )
            )
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        ratio = p95s[large] / p95s[small]
        out.append(
            Figure(
                "continue first",
                f"p95 at {large:,} / p95 at {small:,}",
                "x",
                ratio,
                ratio,
                ratio,
                1,
                note=f"target <= {RATIO_TARGET}x (at 3,000 / 100)",
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    from bench import machine
    from bench.__main__ import quiet_logs, report

    ap = argparse.ArgumentParser(prog="python -m bench.continue_first", description=__doc__.splitlines()[0])
    ap.add_argument("--prs", type=int, action="append", help="runs at once (repeatable; default 100 and 300)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--code", type=Path, default=fleet.ROOT, help="the checkout of Jury the workers run")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--redis", default=os.environ.get("JURY_REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = ap.parse_args(argv)
    quiet_logs()
    import redis

    client = redis.Redis.from_url(args.redis)
    figures = measure(args.redis, tuple(args.prs or (100, 300)), args.workers, args.code.resolve())
    report(machine.describe(client) | {"code": str(args.code)}, figures, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
