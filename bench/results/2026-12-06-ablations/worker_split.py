"""Whose CPU the dispatch workload spends, user and system apart, and what would be left of it if Jury's
own Python cost no more than Celery's: ``python bench/results/2026-12-06-ablations/worker_split.py``.

Why: the dispatch target (0.3 of Celery's no-op rate) asks how much of the machine a run of three tasks
may take. This runs the dispatch section's workload (``bench.dispatch``: runs of one reviewer whose agent
exits at once, on two ``jury worker`` processes) and then Celery's no-op task on two workers, in the same
minutes, and prints for each the CPU a run (three tasks) took: the workers' user and system time, their
waited-for children's (git, bwrap, the agents), and the whole machine's (``/proc/stat``). The last line
is an upper bound, not a measurement: the rate Jury would reach if its workers' user time were only what
Celery's no-op workers spend on three tasks, everything else (the system calls, the sandbox, the
checkout, Redis, the kernel) unchanged, with the cores as busy as Jury's were, and as Celery's were.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import redis
from celery import Celery

from bench.cpu import TICK, machine_busy_seconds
from bench.dispatch import noop_tasks
from bench.fleet import Processes, fleet_env, jury_workers, prepare, private_db, submit_and_wait
from orchestrator.config import Settings

RUNS = 300
WARM = 20
KINDS = ("user", "system", "children's user", "children's system")


def split(pid: int) -> list[float]:
    """Process ``pid``'s CPU seconds so far: user, system, its waited-for children's user and system."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return [int(x) / TICK for x in fields[11:15]]


class Stretch:
    """The workers' CPU, split, and the machine's over one measured stretch."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.before = [split(p) for p in pids]
        self.machine = machine_busy_seconds("worker_split")
        self.t0 = time.perf_counter()

    def stop(self, per: int) -> tuple[list[float], float, float]:
        """Each kind's ms per ``per`` units of work, the machine's, and the cores busy."""
        wall = time.perf_counter() - self.t0
        machine = machine_busy_seconds("worker_split") - self.machine
        after = [split(p) for p in self.pids]
        kinds = [
            1000 * sum(a[i] - b[i] for a, b in zip(after, self.before, strict=True)) / per for i in range(4)
        ]
        return kinds, 1000 * machine / per, machine / wall


def jury(url: str, base: Path) -> tuple[float, list[float], float, float]:
    settings = Settings(dir=base / "state", redis_url=url)
    procs = Processes(fleet_env(url, settings.dir), base / "logs")
    try:
        firsts = prepare(settings, base, [None] * (WARM + RUNS), "r2")
        os.sync()
        jury_workers(procs, 2)
        submit_and_wait(settings, firsts[:WARM], timeout=600)
        stretch = Stretch([p.pid for p in procs.procs])
        wall, states = submit_and_wait(settings, firsts[WARM:], timeout=600)
        kinds, machine, cores = stretch.stop(RUNS)
        if set(states) != {"converged"}:
            raise SystemExit(f"worker_split: runs ended {sorted(set(states))}, not converged: is bwrap here?")
        return 3 * RUNS / wall, kinds, machine, cores
    finally:
        procs.stop()


def celery(url: str, base: Path) -> tuple[float, list[float], float, float]:
    procs = Processes(fleet_env(url, base / "state"), base / "noop-logs")
    argv = [sys.executable, "-m", "celery", "-A", "bench.noop", "worker", "-P", "threads", "-c", "1"]
    argv += ["-l", "INFO", "-Q", "bench-noop"]
    try:
        procs.ready([procs.spawn(argv) for _ in range(2)])
        sender = Celery("bench_sender", broker=url)
        noop_tasks(redis.Redis.from_url(url), sender, "bench.noop", "bench-noop", 300)
        stretch = Stretch([p.pid for p in procs.procs])
        k = 3 * RUNS
        seconds = noop_tasks(redis.Redis.from_url(url), sender, "bench.noop", "bench-noop", k)
        kinds, machine, cores = stretch.stop(RUNS)  # a "run" of three no-op tasks, to compare with Jury's
        return k / seconds, kinds, machine, cores
    finally:
        procs.stop()


def main() -> None:
    with private_db(os.environ.get("JURY_REDIS_URL", "redis://127.0.0.1:6379/0")) as url:
        with tempfile.TemporaryDirectory() as d:
            j_rate, j, j_machine, j_cores = jury(url, Path(d))
            c_rate, c, c_machine, c_cores = celery(url, Path(d))
    print(f"{'CPU a run of three tasks, ms':34} {'jury':>8} {'celery no-op':>13}")
    for i, kind in enumerate(KINDS):
        print(f"{'workers, ' + kind:34} {j[i]:8.2f} {c[i]:13.2f}")
    print(f"{'the whole machine':34} {j_machine:8.2f} {c_machine:13.2f}")
    print(f"{'cores busy':34} {j_cores:8.2f} {c_cores:13.2f}")
    print(f"{'tasks/s':34} {j_rate:8.1f} {c_rate:13.1f}")
    print(f"jury / celery: {j_rate / c_rate:.3f}")
    leaner = j_machine - (j[0] - c[0])  # Jury's workers' user time cut to Celery's for three tasks
    print(f"if Jury's workers' user time were Celery's: {leaner:.1f} ms of the machine a run")
    for cores, which in ((j_cores, "Jury's"), (c_cores, "Celery's")):
        bound = 3 * 1000 * cores / leaner
        print(
            f"  with {which} cores busy ({cores:.2f}): {bound:.0f} tasks/s,"
            f" {bound / c_rate:.3f} of Celery's rate"
        )


if __name__ == "__main__":
    main()
