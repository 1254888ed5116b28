"""``tests/ci_skips.py``: under ``CI=true`` a skipped test fails the session, in a real pytest subprocess
(plain and under pytest-xdist, as ``.ci/run`` runs the suite); off CI a skip stays a skip. Each sample
session has a second module whose test passes, so an exit of 1 is the skip's doing, not "no tests"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SKIPS = """
import pytest

def test_passes():
    pass

def test_needs_a_tool():
    pytest.skip("no frobnicator here")
"""

XFAIL_ONLY = """
import pytest

def test_passes():
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_known_bug():
    assert False
"""

MODULE_SKIP = """
import pytest

pytest.skip("this module needs a frobnicator", allow_module_level=True)

def test_never_collected():
    pass
"""


def run_pytest(
    tmp_path: Path, source: str, *, ci: bool, xdist: bool = False
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_sample.py").write_text(source)
    (tmp_path / "test_other.py").write_text("def test_other_passes():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER"}}
    env |= {"PYTHONPATH": str(REPO), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    if ci:
        env["CI"] = "true"
    argv = [sys.executable, "-m", "pytest", "-p", "tests.ci_skips", "-p", "no:cacheprovider"]
    argv += ["-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path)]
    if xdist:
        argv += ["-p", "xdist", "-n", "2"]
    return subprocess.run(
        [*argv, str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("xdist", [False, True], ids=["plain", "xdist"])
def test_a_skip_under_ci_fails_the_session_and_names_the_test(tmp_path: Path, xdist: bool) -> None:
    done = run_pytest(tmp_path, SKIPS, ci=True, xdist=xdist)
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout
    assert "1 skipped under CI=true" in done.stdout
    assert "test_sample.py::test_needs_a_tool: no frobnicator here" in done.stdout


def test_a_skip_off_ci_stays_a_skip(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, SKIPS, ci=False)
    assert done.returncode == pytest.ExitCode.OK, done.stdout
    assert "2 passed, 1 skipped" in done.stdout
    assert "under CI=true" not in done.stdout


def test_a_module_skipped_at_collection_counts_too(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, MODULE_SKIP, ci=True)
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout
    assert "this module needs a frobnicator" in done.stdout


def test_an_expected_failure_is_not_a_skip(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, XFAIL_ONLY, ci=True)
    assert done.returncode == pytest.ExitCode.OK, done.stdout
    assert "2 passed, 1 xfailed" in done.stdout
