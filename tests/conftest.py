"""Shared fixtures: a sample repository with a real bug, fake agent configs, the CLI in a subprocess."""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from orchestrator.demo import make_sample_repo
from tests.redis_server import redis_url, shown

# Under CI=true a skipped test fails the session: a check that did not run is not a pass. A failed test
# that used ``state_dir`` shows what its runs said (tests/run_digest.py).
pytest_plugins = ["tests.ci_skips", "tests.run_digest"]

FAKE = Path(__file__).parent / "fakes" / "agent.py"
# The e2e tests' Redis databases: each test session takes one of these for itself (a file lock held for
# the whole session), so two sessions on one machine never flush each other's keys.
TEST_DBS = range(1, 16)


# The fake agents run in the sandbox, which shows them an empty /tmp and no environment but its own
# allow-list: they keep their state under $FAKE_STATE (a test's own directory under this root), so their
# entries pass that variable and bind that root as a state directory (operator keys: --config). A root
# dedicated to them: a root worker's jail owns its state directories while it runs
# (workers.isolation.jailuid).
FAKE_STATE_ROOT = Path(tempfile.gettempdir()) / f"jury-fake-state-{getpass.getuser()}"
FAKE_SANDBOX_KEYS = f'env_pass = ["FAKE_STATE"]\nstate_dirs = [{json.dumps(str(FAKE_STATE_ROOT))}]\n'


# The fake agents are scripts of this folder; the checkout may sit under /tmp or HOME, which the sandbox
# hides, so every worker and CLI the tests start gets this folder as a read-only path of the sandbox.
SANDBOX_RO_PATHS = {"JURY_SANDBOX_RO_PATHS": str(Path(__file__).resolve().parent)}
os.environ.update(SANDBOX_RO_PATHS)  # the workers and sandboxes the tests start in-process


def outside_env() -> dict[str, str]:
    """The test process's environment for a ``jury`` subprocess: none of the developer's ``JURY_*``
    settings (a shared Redis URL, a state directory), but the sandbox paths the fake agents need."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JURY_")}
    env.update(SANDBOX_RO_PATHS)
    return env


def logging_git(where: Path) -> tuple[Path, Path]:
    """A ``git`` that logs each call's arguments, a line each, then runs the real one: (its directory, to
    put first on PATH; the log)."""
    real = shutil.which("git")
    calls, bin_dir = where / "git-calls.log", where / "git-bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {real} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    return bin_dir, calls


def fake_agent(name: str, mode: str, judge_mode: str | None = None) -> str:
    """A jury.toml entry for the fake agent script in ``mode`` (and ``judge_mode`` when it judges)."""
    argv = json.dumps([sys.executable, str(FAKE), mode, "{prompt_file}"])
    entry = f"[agents.{name}]\nargv = {argv}\nexpect_seconds = 5\n{FAKE_SANDBOX_KEYS}"
    if judge_mode:
        entry += f"judge_argv = {json.dumps([sys.executable, str(FAKE), judge_mode, '{prompt_file}'])}\n"
    return entry


@pytest.fixture(autouse=True)
def ordinary_umask() -> Iterator[None]:
    """Each test starts with the ordinary umask 022: a test that runs ``jury_cli.app.main`` in this process
    leaves the private 077 behind it (as every jury command sets), and the files a later test makes for a
    jail's own uid to read (a check agent's tool) would be its alone."""
    before = os.umask(0o022)
    yield
    os.umask(before)


@pytest.fixture
def sample_repo(tmp_path: Path) -> Path:
    return make_sample_repo(tmp_path / "src")


@pytest.fixture
def write_config(tmp_path: Path):
    def write(*entries: str) -> Path:
        path = tmp_path / "jury-test.toml"
        path.write_text("\n".join(entries))
        return path

    return write


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    d = tmp_path / "state"
    d.mkdir()
    return d


@pytest.fixture
def fake_state() -> Iterator[Path]:
    FAKE_STATE_ROOT.mkdir(mode=0o700, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="fake-", dir=FAKE_STATE_ROOT))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def jury(state_dir: Path, fake_state: Path):
    """Run ``jury ARGS`` in a subprocess with its own state directory."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Result:
        full = outside_env()
        full.update({"JURY_DIR": str(state_dir), "FAKE_STATE": str(fake_state), "NO_COLOR": "1"})
        full.update(env or {})
        p = subprocess.run(
            [sys.executable, "-m", "jury_cli", *args],
            capture_output=True,
            text=True,
            env=full,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        return Result(p.returncode, p.stdout, p.stderr)

    return run


@pytest.fixture(scope="session")
def test_db() -> Iterator[int]:
    """A Redis database number no other test session on this machine holds (flock on a file per db)."""
    lock_dir = Path(tempfile.gettempdir()) / "jury-test-dbs"
    lock_dir.mkdir(exist_ok=True)
    for db in TEST_DBS:
        fh = (lock_dir / f"db{db}.lock").open("w")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue
        try:
            yield db
        finally:
            fh.close()
        return
    pytest.fail(f"every test Redis database ({TEST_DBS.start}..{TEST_DBS.stop - 1}) is held by a session")


@pytest.fixture
def shared_redis(test_db: int) -> Iterator[str]:
    """A URL to this session's database of the test Redis (``JURY_TEST_REDIS_URL``), empty before and
    after the test."""
    url = redis_url(test_db)
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(f"the tests need Redis at {shown()} (JURY_TEST_REDIS_URL; see docs/testing.md)")
    client.flushdb()
    yield url
    client.flushdb()
    client.close()
