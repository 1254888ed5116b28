"""An operator's read-only paths never show a jail Jury's state directory: a path inside it (one run's
folder) or above it (the folder that holds it) would let the reviewed code or an agent read other runs'
records. Real bubblewrap, real files: the jail is refused with the reason, and a path elsewhere still
shows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.spec import SandboxSettings
from workers.isolation.sandbox import RO_PATHS_ENV, Jail
from workers.isolation.supervise import ProcResult, run_supervised


def cat(tmp_path: Path, target: Path, ro_paths: list[str], env: dict[str, str]) -> tuple[ProcResult, str]:
    worktree = tmp_path / "wt"
    worktree.mkdir(exist_ok=True)
    jail = Jail(worktree=worktree, settings=SandboxSettings(ro_paths=ro_paths))
    out, err = tmp_path / "out", tmp_path / "err"
    result = run_supervised(
        ["cat", str(target)], cwd=worktree, timeout=60, jail=jail, env=env, stdout_path=out, stderr_path=err
    )
    return result, out.read_text() if out.exists() else ""


@pytest.fixture
def state(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A Jury state directory under a folder of its own, holding another run's record."""
    jury_dir = tmp_path / "srv" / "jury"
    record = jury_dir / "runs" / "other-run" / "run.json"
    record.parent.mkdir(parents=True)
    record.write_text("another run's record\n")
    record.chmod(0o644)  # readable to anyone who can reach it: only the jail's view may keep it out
    env = {k: v for k, v in os.environ.items() if k != RO_PATHS_ENV} | {"JURY_DIR": str(jury_dir)}
    return jury_dir, record, env


@pytest.mark.parametrize("where", ["inside", "above"])
def test_an_operators_read_only_path_over_the_state_directory_is_refused(
    tmp_path: Path, state: tuple[Path, Path, dict[str, str]], where: str
) -> None:
    jury_dir, record, env = state
    listed = jury_dir / "runs" if where == "inside" else jury_dir.parent
    result, shown = cat(tmp_path, record, [str(listed)], env)
    assert "another run" not in shown
    assert result.exit_code is None and result.error is not None
    assert "overlaps Jury's state directory" in result.error and str(listed) in result.error


def test_the_workers_environment_variable_is_held_to_the_same_rule(
    tmp_path: Path, state: tuple[Path, Path, dict[str, str]]
) -> None:
    jury_dir, record, env = state
    result, shown = cat(tmp_path, record, [], env | {RO_PATHS_ENV: str(jury_dir)})
    assert "another run" not in shown
    assert result.error is not None and "overlaps Jury's state directory" in result.error


def test_a_read_only_path_elsewhere_still_shows(
    tmp_path: Path, state: tuple[Path, Path, dict[str, str]]
) -> None:
    _, _, env = state
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("visible\n")
    (shared / "notes.txt").chmod(0o644)
    shared.chmod(0o755)
    tmp_path.chmod(0o755)
    result, shown = cat(tmp_path, shared / "notes.txt", [str(shared)], env)
    assert result.error is None and result.exit_code == 0, result
    assert shown == "visible\n"
