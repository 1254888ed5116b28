"""``tests/run_digest.py``: a failed test that used ``state_dir`` shows its runs' events, its agents'
stderr and its workers' logs in its report (a real pytest subprocess, plain and under pytest-xdist, as
``.ci/run`` runs the suite); a passing one, or one without ``state_dir``, gets nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.run_digest import MAX_EVENTS, MAX_LINE, MAX_SECTION, digest, event_line

REPO = Path(__file__).resolve().parents[2]

SAMPLE = """
import json
from pathlib import Path

import pytest


@pytest.fixture
def state_dir(tmp_path):
    run = tmp_path / "state" / "runs" / "sample-feature-1"
    run.mkdir(parents=True)
    events = [
        {"t": "target", "target": {"state": "queued"}},
        {"t": "agent.report", "agent": "finder", "round": 1, "verdict": "error", "error": "exited 2: boom"},
    ]
    (run / "events.ndjson").write_text("".join(json.dumps(e) + "\\n" for e in events))
    (run / "round-1.finder.stderr.txt").write_text("Traceback: FAKE_STATE is not readable\\n")
    (tmp_path / "state" / "logs").mkdir()
    (tmp_path / "state" / "logs" / "worker-1.log").write_text('{"event": "worker.started"}\\n')
    return tmp_path / "state"


def test_fails_with_runs(state_dir):
    assert False, "the finding was never raised"


def test_passes_with_runs(state_dir):
    pass


def test_fails_without_runs():
    assert False
"""


def run_pytest(tmp_path: Path, *, xdist: bool) -> str:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER"}}
    env |= {"PYTHONPATH": str(REPO), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    argv = [sys.executable, "-m", "pytest", "-p", "tests.run_digest", "-p", "no:cacheprovider"]
    argv += ["-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path)]
    if xdist:
        argv += ["-p", "xdist", "-n", "2"]
    p = subprocess.run(
        [*argv, str(tmp_path / "test_sample.py")], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert p.returncode == 1, p.stdout + p.stderr  # two tests failed, one passed
    return p.stdout


def section_of(out: str, test: str) -> str:
    """The failure report of ``test`` in pytest's output (from its header to the next one)."""
    start = out.index(f"_ {test} _")
    rest = out[start + 1 :]
    ends = [i for i in (rest.find("\n____"), rest.find("\n====")) if i >= 0]
    return rest[: min(ends)] if ends else rest


@pytest.mark.parametrize("xdist", [False, True], ids=["plain", "xdist"])
def test_a_failed_test_shows_what_its_runs_said(tmp_path: Path, xdist: bool) -> None:
    out = run_pytest(tmp_path, xdist=xdist)
    failed = section_of(out, "test_fails_with_runs")
    assert "jury runs" in failed
    assert "== run sample-feature-1" in failed
    assert "agent.report agent=finder round=1 verdict=error error=exited 2: boom" in failed
    assert "target target.state=queued" in failed
    assert "-- round-1.finder.stderr.txt" in failed and "FAKE_STATE is not readable" in failed
    assert "== worker log worker-1.log" in failed and "worker.started" in failed
    assert "jury runs" not in section_of(out, "test_fails_without_runs")
    assert "2 failed, 1 passed" in out  # the sample ran as meant


def test_the_digest_is_bounded(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "long"
    run.mkdir(parents=True)
    lines = [json.dumps({"t": "agent.alive", "agent": f"a{i}", "error": "x" * 400}) for i in range(5000)]
    (run / "events.ndjson").write_text("\n".join(lines) + "\nnot json\n")
    text = digest(tmp_path)
    assert f"({5001 - MAX_EVENTS} earlier events not shown)" in text
    assert text.endswith("(not JSON) not json")  # the last event is kept, whatever is cut
    assert all(len(x) <= MAX_LINE + 10 for x in text.splitlines())
    for i in range(40):  # enough logs to pass the section's bound: its end is kept
        (tmp_path / "logs").mkdir(exist_ok=True)
        (tmp_path / "logs" / f"w{i:02}.log").write_text("y" * 5000 + f"last of w{i:02}\n")
    text = digest(tmp_path)
    assert len(text) <= MAX_SECTION + 100
    assert text.startswith("[... ") and text.rstrip().endswith("last of w39")


def test_an_event_line_names_who_and_why() -> None:
    line = event_line(json.dumps({"t": "finding.refused", "id": "r1-a-1", "reason": "no", "ts": "now"}))
    assert line == "finding.refused id=r1-a-1 reason=no"
    assert event_line("[1, 2]") == "(not an object) [1, 2]"
    assert digest(Path("/nonexistent-jury-state")) == "(no runs under /nonexistent-jury-state)"
