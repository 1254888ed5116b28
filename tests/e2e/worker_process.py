"""A real ``jury worker`` in a process of its own, for the end-to-end tests that need one on the shared
Redis: started in its own session, its output in a log file the failure digest reads, stopped with
SIGTERM (its drain) and killed when it does not stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def jury_worker(
    env: Mapping[str, str], log_path: Path, concurrency: int, module: str = "jury_cli"
) -> Iterator[subprocess.Popen[bytes]]:
    """``jury worker --concurrency N`` with ``env`` until the block ends; ``module`` is the entry point
    run with ``python -m`` (a test's own, which registers a kind first, then runs jury)."""
    argv = [
        sys.executable,
        "-m",
        module,
        "worker",
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "INFO",
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv, env=dict(env), stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
        )
    try:
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
