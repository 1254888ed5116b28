"""An agent's state directory named by the worker's environment (``state_dirs = ["$CODEX_HOME"]``) is bound
read-write in the sandbox wherever it lies: a ``CODEX_HOME`` outside HOME was shown read-only (the root
file system) and codex's own writes there (sessions, refreshed auth) failed. A real fake agent, in the real
sandbox, writes into it and the write lands on the host."""

from __future__ import annotations

import shutil
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.agent_keys import check_agent
from orchestrator.config import load_config
from orchestrator.errors import ConfigError
from orchestrator.spec import AgentSpec, SandboxSettings
from workers.agents.cli import run_cli_agent
from workers.isolation.sandbox import sandbox_problem

pytestmark = pytest.mark.skipif(sandbox_problem(SandboxSettings()) is not None, reason="no bubblewrap here")

WRITER = """
import os, pathlib, sys
where = pathlib.Path(os.environ["CODEX_HOME"]) / "sessions" / "rollout-1.jsonl"
try:
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text("session kept")
    print("WROTE", where)
except OSError as exc:
    print("ERRNO", exc.errno, where)
"""


@pytest.fixture
def outside_home() -> Iterator[tuple[Path, Path]]:
    """(HOME, CODEX_HOME): two directories side by side, neither under the other, not under /tmp."""
    root = Path(tempfile.mkdtemp(prefix="jury-codex-home-", dir="/var/tmp"))
    home, codex_home = root / "home", root / "codex"
    home.mkdir()
    codex_home.mkdir()
    yield home, codex_home
    shutil.rmtree(root, ignore_errors=True)


def agent(tmp_path: Path, state_dirs: list[str]) -> AgentSpec:
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(WRITER))
    return AgentSpec.model_validate(
        {
            "name": "fake",
            "argv": [sys.executable, str(script), "{prompt_file}"],
            "state_dirs": [*state_dirs, str(tmp_path)],  # the script sits under /tmp, hidden otherwise
            "env_pass": ["CODEX_HOME"],
        }
    )


def run(tmp_path: Path, spec: AgentSpec, env: dict[str, str]) -> str:
    worktree = tmp_path / "wt"
    worktree.mkdir(exist_ok=True)
    done = run_cli_agent(
        spec,
        role="reviewer",
        prompt="p",
        worktree=worktree,
        out_dir=tmp_path / "out",
        name=f"n{len(list(tmp_path.glob('out/*')))}",
        timeout=30,
        base_env=env,
    )
    assert done.proc.error is None, done.proc.error
    return done.stdout


def test_codex_home_outside_home_is_writable_in_the_sandbox(
    tmp_path: Path, outside_home: tuple[Path, Path]
) -> None:
    home, codex_home = outside_home
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "CODEX_HOME": str(codex_home)}
    out = run(tmp_path, agent(tmp_path, ["~/.codex", "$CODEX_HOME"]), env)
    assert "WROTE" in out, out
    assert (codex_home / "sessions" / "rollout-1.jsonl").read_text() == "session kept"
    # without it, CODEX_HOME is the read-only root file system's: the write fails (what codex met)
    (codex_home / "sessions" / "rollout-1.jsonl").unlink()
    out = run(tmp_path, agent(tmp_path, ["~/.codex"]), env)
    assert "ERRNO" in out and not (codex_home / "sessions" / "rollout-1.jsonl").exists(), out
    # unset: nothing more is bound, and the agent runs as before
    assert "ERRNO" in run(tmp_path, agent(tmp_path, ["$CODEX_HOME"]), {**env, "CODEX_HOME": ""})


def test_the_codex_catalog_entry_binds_codex_home_and_names_are_checked() -> None:
    codex = load_config(None).agents["codex"]
    assert "$CODEX_HOME" in codex.state_dirs and "CODEX_HOME" in codex.env_pass
    for bad in ("$", "$1X", "$A-B", "$A/b"):
        with pytest.raises(ConfigError, match="environment variable"):
            check_agent("jury.toml", "x", {"argv": ["x", "{prompt}"], "state_dirs": [bad]}, None)
    assert check_agent(
        "jury.toml", "x", {"argv": ["x", "{prompt}"], "state_dirs": ["$MY_HOME"]}, None
    ).state_dirs == ["$MY_HOME"]
