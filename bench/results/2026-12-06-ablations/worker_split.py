"""Whose CPU the dispatch workload spends, the workers' user and system time apart, and what would be left
of it if Jury's own Python cost no more than Celery's:
``python bench/results/2026-12-06-ablations/worker_split.py``.

Why: the dispatch target (0.3 of Celery's no-op rate) asks how much of the machine a run of three tasks
may take. This runs the dispatch section's two sides (``bench.dispatch.jury_side``: runs of one reviewer
whose agent exits at once, on two ``jury worker`` processes; then ``bench.dispatch.noop_side``: Celery's
no-op task on two workers), in the same minutes, and prints for each the CPU a run (three tasks) took:
the workers' user and system time, their waited-for children's (git, bwrap, the agents), and the whole
machine's. The last lines are an upper bound, not a measurement: the rate Jury would reach if its
workers' user time were only what Celery's no-op workers spend on three tasks, everything else (the
system calls, the sandbox, the checkout, Redis, the kernel) unchanged, with the cores as busy as Jury's
were, and as Celery's were.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import redis

from bench.cpu import Spent
from bench.dispatch import jury_side, noop_side
from bench.fleet import Processes, fleet_env, private_db

RUNS = 300
WARM = 20


def measured(spent: Spent | None) -> Spent:
    if spent is None:
        raise SystemExit("worker_split: CPU readings need Linux's /proc")
    return spent


def per_run(rate: float, spent: Spent) -> dict[str, float]:
    """What a run of three tasks took, in ms, of a side that ran ``rate`` tasks a second: each side ran
    ``RUNS`` of them (Jury's runs; Celery's no-op tasks three at a time)."""
    return {
        "workers, user": 1e3 * spent.workers_user / RUNS,
        "workers, system": 1e3 * (spent.workers - spent.workers_user) / RUNS,
        "their children": 1e3 * spent.children / RUNS,
        "the whole machine": 1e3 * spent.busy_cores * 3 / rate,
    }


def main() -> None:
    with private_db(os.environ.get("JURY_REDIS_URL", "redis://127.0.0.1:6379/0")) as url:
        client = redis.Redis.from_url(url)
        with tempfile.TemporaryDirectory() as d:
            base = Path(d)
            j_rate, j_used, states = jury_side(client, url, base, RUNS, WARM)
            if set(states) != {"converged"}:
                raise SystemExit(
                    f"worker_split: runs ended {sorted(set(states))}, not converged: is bwrap here?"
                )
            procs = Processes(fleet_env(url, base / "state"), base / "noop-logs")
            c_rate, c_used = noop_side(client, url, "celery", procs, 2, 300, 3 * RUNS)
    j_spent, c_spent = measured(j_used), measured(c_used)
    j, c = per_run(j_rate, j_spent), per_run(c_rate, c_spent)
    j_cores, c_cores = j_spent.busy_cores, c_spent.busy_cores
    print(f"{'CPU a run of three tasks, ms':34} {'jury':>8} {'celery no-op':>13}")
    for kind in j:
        print(f"{kind:34} {j[kind]:8.2f} {c[kind]:13.2f}")
    print(f"{'cores busy':34} {j_cores:8.2f} {c_cores:13.2f}")
    print(f"{'tasks/s':34} {j_rate:8.1f} {c_rate:13.1f}")
    print(f"jury / celery: {j_rate / c_rate:.3f}")
    # Jury's workers' user time cut to Celery's for three tasks
    leaner = j["the whole machine"] - (j["workers, user"] - c["workers, user"])
    print(f"if Jury's workers' user time were Celery's: {leaner:.1f} ms of the machine a run")
    for cores, which in ((j_cores, "Jury's"), (c_cores, "Celery's")):
        bound = 3 * 1000 * cores / leaner
        print(
            f"  with {which} cores busy ({cores:.2f}): {bound:.0f} tasks/s,"
            f" {bound / c_rate:.3f} of Celery's rate"
        )


if __name__ == "__main__":
    main()
