"""What ``jury review`` shows while it runs, end to end: in a terminal (a pty), the rounds and findings as
they happen above the live panel; through a pipe, the plain lines only, without a panel or an escape
sequence. The fake agents find the median bug, the judge fixes it."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import outside_env
from tests.e2e.test_review import review_args, standard_jury

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def in_a_terminal(argv: list[str], env: dict[str, str], deadline: float) -> tuple[int, str]:
    """Run ``argv`` with a pty for its stdout and stderr; its exit code and all it wrote."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    got = bytearray()
    try:
        while True:
            assert time.monotonic() < deadline, got.decode(errors="replace")
            ready, _, _ = select.select([master], [], [], 5.0)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the pty is gone
                break
            if not chunk:
                break
            got += chunk
        return proc.wait(timeout=max(1.0, deadline - time.monotonic())), got.decode(errors="replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_review_in_a_terminal_shows_rounds_and_findings_as_they_happen(
    sample_repo: Path, write_config, state_dir: Path, fake_state: Path
) -> None:
    env = outside_env()
    env.update({"JURY_DIR": str(state_dir), "FAKE_STATE": str(fake_state), "NO_COLOR": "1"})
    argv = [sys.executable, "-m", "jury_cli", *review_args(sample_repo, standard_jury(write_config))]
    code, raw = in_a_terminal(argv, env, time.monotonic() + 600)
    said = ESCAPES.sub("", raw)
    assert code == 0, said
    assert "\x1b[" in raw  # a live panel: cursor movements
    assert re.search(r"round 1 started at [0-9a-f]{12}", said), said
    assert re.search(r"finding (\S+) raised by finder: .+\(stats\.py", said), said
    assert re.search(r"finding \S+ accepted by judge", said), said
    assert re.search(r"findings: \d+ raised, \d+ accepted", said), said  # the panel
    assert "converged" in said


def test_a_review_through_a_pipe_prints_plain_lines_only(jury, sample_repo: Path, write_config) -> None:
    r = jury(*review_args(sample_repo, standard_jury(write_config)))
    assert r.code == 0, r.out + r.err
    assert "\x1b" not in r.out + r.err, repr(r.out)
    assert not re.search(r"findings: \d+ raised,", r.out), r.out  # no panel
    assert "handed back" not in r.out
    assert re.search(r"round 1 started at [0-9a-f]{12}", r.out), r.out
    assert "  finder (reviewer) launched" in r.out
    assert re.search(r"  finding \S+ raised by finder: ", r.out), r.out
