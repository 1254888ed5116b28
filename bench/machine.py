"""What the figures were measured on: they mean nothing without the machine and the date."""

from __future__ import annotations

import datetime as dt
import os
import platform
from pathlib import Path
from typing import Any

import redis


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def describe(client: redis.Redis | None) -> dict[str, Any]:
    """Cores (those this process may use, and the host's), memory, CPU model, Python, Redis, date."""
    version = None
    if client is not None:
        try:
            version = str(client.info("server").get("redis_version"))
        except redis.RedisError:
            version = None
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "host_cores": os.cpu_count(),
        "memory_gb": memory_gb(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "redis": version,
        "platform": platform.platform(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }
