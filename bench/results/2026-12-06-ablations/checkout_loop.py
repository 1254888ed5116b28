"""What a review's checkout costs alone: ``python bench/results/2026-12-06-ablations/checkout_loop.py``.

Makes and removes 300 fresh checkouts (``Worktrees.checkout``, a local target's path) of the dispatch
section's five-file sample repository, in one process, once on the file system of the home directory and
once on a tmpfs (``/dev/shm``), and prints the CPU a checkout took: this process's and git's, and the whole
machine's (``/proc/stat``, after a sync, so the file system's own work is in it too).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path

import structlog

from bench.cpu import machine_busy_seconds
from bench.fleet import make_sample_repo
from orchestrator.git import rev_parse
from workers.isolation.worktree import Worktrees

N = 300


def own_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measure(where: str) -> str:
    with tempfile.TemporaryDirectory(dir=where) as d:
        base = Path(d)
        repo = make_sample_repo(base / "pr")
        sha = rev_parse(repo, "feature")
        wts = Worktrees(base / "state" / "worktrees", base / "state" / "locks")
        for _ in range(20):  # warm
            with wts.checkout(repo, sha, name="warm"):
                pass
        os.sync()
        own, busy, wall = own_cpu(), machine_busy_seconds("checkout_loop"), time.perf_counter()
        for i in range(N):
            with wts.checkout(repo, sha, name=f"x.{i}"):
                pass
        os.sync()
        busy = machine_busy_seconds("checkout_loop") - busy
        own, wall = own_cpu() - own, time.perf_counter() - wall
    return (
        f"{where}: a checkout made and removed: {1e3 * own / N:.2f} ms of this process and git, "
        f"{1e3 * busy / N:.2f} ms of the whole machine, {1e3 * wall / N:.2f} ms of wall time"
    )


if __name__ == "__main__":
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    for where in (str(Path.home()), "/dev/shm"):
        print(measure(where))
