"""Two ``jury worker`` processes on one host: each has a node name of its own (Celery's default,
``celery@<host>``, would be the same for both), and what they print of the broker is Jury's redacted URL,
not kombu's ``redis://:**@`` for a URL that has no password at all."""

from __future__ import annotations

import re
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.conftest import outside_env
from tests.e2e.worker_process import jury_worker

BANNER_NODE = re.compile(r"(\S+@\S+) v\d")  # the banner's first line: "<node> v<celery version> (...)"


def wait_for_text(path: Path, pattern: re.Pattern[str], seconds: float = 60) -> re.Match[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = pattern.search(path.read_text(errors="replace")) if path.exists() else None
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"{path.name} never showed {pattern.pattern}: {path.read_text(errors='replace')[-2000:]}")


def test_two_workers_of_one_host_have_their_own_names_and_show_jurys_url(
    shared_redis: str, state_dir: Path, tmp_path: Path
) -> None:
    assert "@" not in shared_redis  # a URL without a password
    env = outside_env() | {"JURY_REDIS_URL": shared_redis, "JURY_DIR": str(state_dir), "JURY_LOG_JSON": "0"}
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    with ExitStack() as stack:
        for log in logs:
            stack.enter_context(jury_worker(env, log, concurrency=1))
        names = [wait_for_text(log, BANNER_NODE)[1] for log in logs]
        transports = [wait_for_text(log, re.compile(r"transport:\s+(\S+)"))[1] for log in logs]
    assert names[0] != names[1] and all(n.startswith("jury-") for n in names), names
    assert transports == [shared_redis, shared_redis], transports  # no ":**@" where there is no password
    for log in logs:
        wait_for_text(log, re.compile(re.escape(f"Connected to {shared_redis}")))
        assert ":**@" not in log.read_text(errors="replace")
