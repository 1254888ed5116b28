"""The real codex CLI with its ``CODEX_HOME`` outside the worker's HOME (an operator's shared or mounted
configuration): Jury binds it read-write in its sandbox (the catalog's ``state_dirs = [..., "$CODEX_HOME"]``),
so codex keeps its sessions there, the review converges, and Jury reads codex's session file from it.
Before, that directory was part of the read-only root inside the sandbox and codex could not start a
session (its thread store: permission denied)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import fake_agent
from tests.e2e.test_codex_seat import (  # noqa: F401 (fixtures)
    codex_bin,
    codex_egress,
    codex_env,
    home_outside_tmp,
    reports,
    review,
    reviewer_brain,
    run_dir,
)
from tests.fakes.responses_server import ResponsesServer, write_codex_home


@pytest.fixture
def codex_home_beside(home_outside_tmp: Path) -> Iterator[Path]:  # noqa: F811 (the fixture)
    """A CODEX_HOME next to the HOME, under neither it nor /tmp."""
    where = Path(tempfile.mkdtemp(prefix="codex-home-", dir=home_outside_tmp.parent))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def test_codex_with_codex_home_outside_home_keeps_its_sessions_there(
    jury,
    codex_bin,  # noqa: F811 (the fixture)
    home_outside_tmp,  # noqa: F811 (the fixture)
    codex_home_beside,
    sample_repo,
    write_config,
    state_dir,
) -> None:
    assert not codex_home_beside.is_relative_to(home_outside_tmp)
    with ResponsesServer(reviewer_brain) as server:
        config = write_config(fake_agent("judge", "clean", "fix"), codex_egress(server))
        env = codex_env(codex_bin, home_outside_tmp, server)
        shutil.rmtree(home_outside_tmp / ".codex")  # only the CODEX_HOME beside HOME holds codex's files
        env["CODEX_HOME"] = str(write_codex_home(codex_home_beside, server.url))
        r = jury(*review(sample_repo, config, "codex"), env=env)
    assert r.code == 0, r.out + r.err
    d = run_dir(state_dir)
    doc = json.loads((d / "run.json").read_text())
    assert doc["target"]["state"] == "converged", doc["target"]
    sessions = {e["sessionId"] for e in reports(d) if e["agent"] == "codex"}
    assert len(sessions) == 2
    written = [p.name for p in (codex_home_beside / "sessions").rglob("rollout-*.jsonl")]
    assert all(any(s in name for name in written) for s in sessions), (sessions, written)
