"""What the figures were measured on: they mean nothing without the machine and the date."""

from __future__ import annotations

import datetime as dt
import os
import platform
import tempfile
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


def mount_of(path: Path, mountinfo: str) -> tuple[str, str] | None:
    """The file system type and the device (``major:minor``) of the mount ``path`` is on, from the text of
    ``/proc/self/mountinfo``: the mount whose mount point is the longest prefix of ``path``, the later of
    two at the same point (it hides the earlier one)."""
    best: tuple[int, str, str] | None = None
    for line in mountinfo.splitlines():
        mine, _, theirs = line.partition(" - ")
        fields, rest = mine.split(), theirs.split()
        if len(fields) < 5 or not rest:
            continue
        point = Path(fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\"))
        if path == point or point in path.parents:
            depth = len(point.parts)
            if best is None or depth >= best[0]:
                best = (depth, rest[0], fields[2])
    return None if best is None else (best[1], best[2])


def file_system(path: Path) -> str | None:
    """What ``path`` is on: its file system's type and, for ext4, whether it keeps a journal.

    Why it is in the header: ext4 without a journal does not reuse an inode freed in the last minute (longer
    while the inode's table block is not yet written back), and it looks at each such inode in turn when it
    allocates one. So creating a file there costs more the more files were removed lately: on 2026-12-06,
    after the test suite and a few dispatch runs, creating an empty file took 530 µs of system time in a
    directory under /tmp, 35 µs in one under /work on the same disk and 22 µs on a tmpfs. Figures that
    create and remove files, Jury's runs and checkouts among them, then depend on what ran before them
    on the same disk (``TMPDIR`` moves the bench's files elsewhere)."""
    try:
        found = mount_of(path.resolve(), Path("/proc/self/mountinfo").read_text())
    except OSError:
        return None
    if found is None:
        return None
    kind, device = found
    if kind != "ext4":
        return kind
    block = Path(f"/sys/dev/block/{device}")  # a link to the device's directory: vda, dm-0, as jbd2 names it
    jbd2 = Path("/proc/fs/jbd2")  # absent while jbd2 runs no journal at all (a module not loaded)
    try:
        if not block.exists():
            return "ext4"
        journals = [p.name for p in jbd2.iterdir()] if jbd2.is_dir() else []
    except OSError:
        return "ext4"
    return ext4_kind(block.resolve().name, journals)


def ext4_kind(device: str, journals: list[str]) -> str:
    """Whether the ext4 on ``device`` keeps a journal: jbd2 lists each journal it runs in /proc/fs/jbd2 as
    the device's name, a dash and the journal's inode (``vda-8``)."""
    journaled = any(j.rpartition("-")[0] == device for j in journals)
    return "ext4, journal" if journaled else "ext4, no journal"


def describe(client: redis.Redis | None) -> dict[str, Any]:
    """Cores (those this process may use, and the host's), memory, CPU model, Python, Redis, date, and
    the file system the bench's temporary files (repositories, checkouts, Jury's state) are written to."""
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
        "tmp_fs": file_system(Path(tempfile.gettempdir())),
    }
