"""A reaper pass over ten thousand active runs: ``python -m bench.reaper [--runs N] [--repeat N]`` (or
``python -m bench --only reaper``).

One worker makes this pass every reap period (``JURY_REAP_EVERY``, 15 s), holding the reaper's lock, and it
reads every active run: whether it ended, its actions in flight, their sent marks and leases. Read one run
at a time, a pass cost 0.5-1.1 ms a run (its round trips and its whole fold), so past some 15,000 runs a
pass outlived the period. The figures: a pass over ``--runs`` active runs as the reaper makes it (batches
of ``coordinator.REAP_BATCH`` runs, each batch a few round trips, each run read from its snapshot's
digest: ``workers.fleet.reaping``), and the same pass one run a batch, what each round trip costs on top.

Each run has its two reviewers sent and not yet taken (a fleet's backlog: the commonest case; their sends
are young, so the pass sends nothing again). One run is made by a real coordinate pass; the others are
copies of its keys under their own names (DUMP and RESTORE, so the log's ids, and the digest's origin, are
the same), which makes ten thousand in seconds instead of minutes of coordinate passes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

import redis

from bench.eventlog import head, runtime, scratch_prefix
from bench.stats import Figure, figure, ratio, seconds_of
from orchestrator.store import keys
from workers.runtime import coordinator
from workers.runtime.context import Runtime

RUNS = 10_000
TARGET_SECONDS = 1.0  # issue 49: a pass over 10,000 active runs


def dump(client: redis.Redis, key: str) -> bytes:
    blob = cast(bytes | None, client.dump(key))
    if blob is None:
        raise RuntimeError(f"reaper bench: the template run has no {key}")
    return blob


def seed(rt: Runtime, client: redis.Redis, runs: int) -> None:
    """``runs`` active runs, each with two actions in flight: one coordinated, the rest its copies."""
    template = "bench-reap-0"
    rt.store.create_run(template)
    rt.store.append(template, head())
    rt.store.activate(template)
    state = coordinator.coordinate(rt, template)
    inflight = [a.key for a in state.inflight()]
    if len(inflight) != 2:
        raise RuntimeError(f"reaper bench: the template run has {len(inflight)} actions in flight")
    names = [keys.events, keys.snapshot, keys.state]
    dumped = {f: dump(client, f(rt.prefix, template)) for f in names}
    marks = {k: dump(client, keys.sent(rt.prefix, f"{template}:{k}")) for k in inflight}
    pipe = client.pipeline(transaction=False)
    for i in range(1, runs):
        slug = f"bench-reap-{i}"
        for f, blob in dumped.items():
            pipe.restore(f(rt.prefix, slug), 0, blob, replace=True)
        for k, blob in marks.items():
            pipe.restore(keys.sent(rt.prefix, f"{slug}:{k}"), 3_600_000, blob, replace=True)
        pipe.sadd(keys.active_runs(rt.prefix), slug)
        if i % 1000 == 0:
            pipe.execute()
    pipe.execute()
    if len(rt.store.active_runs()) != runs:
        raise RuntimeError("reaper bench: the active set does not hold every run")


def redis_cpu(client: redis.Redis) -> float:
    """Seconds of CPU the Redis server has used (user + system): what a pass costs it, beside the wall
    time, which on a shared machine is mostly waiting for a core."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def measure(client: redis.Redis, *, runs: int = RUNS, repeat: int = 5) -> list[Figure]:
    with scratch_prefix(client) as prefix, tempfile.TemporaryDirectory() as d:
        rt = runtime(client, prefix, Path(d), reap_after=3600.0)
        seed(rt, client, runs)
        cpu: list[float] = []
        server: list[float] = []

        def timed_pass() -> None:
            before, redis_before = time.process_time(), redis_cpu(client)
            coordinator.reap(rt)
            cpu.append(time.process_time() - before)
            server.append(redis_cpu(client) - redis_before)

        batched = seconds_of(timed_pass, repeat)
        if rt.store.active_runs() != sorted(rt.store.active_runs()) or len(rt.store.active_runs()) != runs:
            raise RuntimeError("reaper bench: a pass changed the active set")
        batch, coordinator.REAP_BATCH = coordinator.REAP_BATCH, 1
        try:
            one_by_one = seconds_of(lambda: coordinator.reap(rt), max(1, repeat // 2))
        finally:
            coordinator.REAP_BATCH = batch
    fast = figure(
        "reaper",
        f"pass over {runs:,} active runs",
        "ms",
        [s * 1e3 for s in batched],
        note=f"batches of {batch}; target < {TARGET_SECONDS * 1e3:,.0f} ms",
        runs_active=runs,
    )
    slow = figure(
        "reaper", f"pass over {runs:,} active runs, one run a batch", "ms", [s * 1e3 for s in one_by_one]
    )
    return [
        fast,
        figure("reaper", "pass, per run", "µs", [s * 1e6 / runs for s in batched]),
        figure("reaper", "pass, the reaper's CPU", "ms", [s * 1e3 for s in cpu], note="this process"),
        figure("reaper", "pass, the Redis server's CPU", "ms", [s * 1e3 for s in server], note="INFO cpu"),
        slow,
        ratio("reaper", "one run a batch / batched", slow, fast),
    ]


def main(argv: list[str] | None = None) -> int:
    from bench.__main__ import quiet_logs, report
    from bench.machine import describe

    ap = argparse.ArgumentParser(prog="python -m bench.reaper", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=RUNS, help=f"active runs (default {RUNS:,})")
    ap.add_argument("--repeat", type=int, default=5, help="passes timed (default 5)")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = ap.parse_args(argv)
    quiet_logs()
    client = redis.Redis.from_url(args.redis)
    client.ping()
    figures = measure(client, runs=args.runs, repeat=args.repeat)
    info = describe(client) | {"quick": False, "seconds": "-"}
    report(info, figures, as_json=False)
    return 0 if figures[0].median < TARGET_SECONDS * 1e3 else 1


if __name__ == "__main__":
    sys.exit(main())
