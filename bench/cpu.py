"""Where a fleet figure's CPU went: the worker processes' own time, their child processes' (git, bwrap and
the agents, which the workers wait for), Redis's, and how busy the machine's cores were.

A rate alone does not say what limits it: on a machine whose cores are all busy, a path is as fast as
the CPU it spends, and these say whose CPU that is. Linux only (``/proc``); elsewhere every reading is
missing and the figures built from it are left out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import redis

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_seconds(pid: int) -> tuple[float, float, float] | None:
    """CPU seconds of process ``pid`` so far: its own (user + system), its waited-for children's, and the
    user part of its own (the rest of its own is the kernel's work on its behalf: its system calls)."""
    try:
        # The command name (field 2) may hold spaces and parentheses: split after its closing one.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / TICK, (cutime + cstime) / TICK, utime / TICK


def machine_ticks() -> tuple[int, int] | None:
    """All and idle (idle + iowait) ticks of every core since boot, from ``/proc/stat``."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    ticks = [int(x) for x in first[1:]]
    return sum(ticks), ticks[3] + ticks[4]


def machine_busy_seconds(script: str) -> float:
    """Seconds of CPU the whole machine spent not idle since boot, for a measuring script named ``script``
    (``bench/results``), which cannot go on without it: SystemExit, saying so, where /proc/stat is not."""
    ticks = machine_ticks()
    if ticks is None:
        raise SystemExit(f"{script}: the whole machine's CPU needs Linux's /proc/stat")
    every, idle = ticks
    return (every - idle) / TICK


def redis_seconds(client: redis.Redis) -> float | None:
    """CPU seconds the Redis server has used (user + system, its main thread and the others)."""
    try:
        info = client.info("cpu")
    except redis.RedisError:
        return None
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


@dataclass
class Spent:
    """CPU seconds spent over one measured stretch, and the cores busy on average over it."""

    workers: float  # the worker processes' own
    workers_user: float  # of it, in user mode (Python, not the system calls it makes)
    children: float  # their child processes' (those they waited for)
    redis: float
    busy_cores: float  # 0 .. the machine's cores


# Each process's (own, children's, own user) seconds, Redis's seconds, the machine's (all, idle) ticks.
Reading = tuple[list[tuple[float, float, float] | None], float | None, tuple[int, int] | None]


class CpuMeter:
    """``start()`` before a measured stretch, ``stop()`` after: what the given processes and Redis spent."""

    def __init__(self, pids: list[int], client: redis.Redis) -> None:
        self.pids, self.client = pids, client
        self._start: Reading | None = None

    def _read(self) -> Reading:
        return [process_seconds(p) for p in self.pids], redis_seconds(self.client), machine_ticks()

    def start(self) -> None:
        self._start = self._read()

    def stop(self) -> Spent | None:
        """What was spent since ``start()``; None when a reading is missing (not Linux, a process gone)."""
        if self._start is None:
            raise RuntimeError("CpuMeter.stop() before start()")
        (procs0, redis0, ticks0), (procs1, redis1, ticks1) = self._start, self._read()
        if redis0 is None or redis1 is None or ticks0 is None or ticks1 is None:
            return None
        own = children = user = 0.0
        for before, after in zip(procs0, procs1, strict=True):
            if before is None or after is None:
                return None
            own += after[0] - before[0]
            children += after[1] - before[1]
            user += after[2] - before[2]
        all_ticks, idle_ticks = ticks1[0] - ticks0[0], ticks1[1] - ticks0[1]
        cores = os.cpu_count() or 1
        busy = cores * (1 - idle_ticks / all_ticks) if all_ticks > 0 else 0.0
        return Spent(
            workers=own, workers_user=user, children=children, redis=redis1 - redis0, busy_cores=busy
        )
