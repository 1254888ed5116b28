"""A run's record (prompts, agent output, diffs of code under review) is its owner's alone: files 0600 in
directories 0700 — the files store, the workers' run directories and the worktree root."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import redis

from orchestrator.config import Settings
from orchestrator.demo import make_sample_repo
from orchestrator.domain import TargetEvent
from orchestrator.spec import Target
from orchestrator.store.files import FileStore, mirror
from orchestrator.store.redis import RedisStore
from workers.isolation.worktree import Worktrees, rev_parse
from workers.runtime.context import Runtime


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def tree_modes(root: Path) -> dict[str, int]:
    found = {".": mode(root)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            found[str(path.relative_to(root))] = mode(path)
    return found


def test_the_files_store_writes_0600_in_0700(tmp_path: Path) -> None:
    state_dir = tmp_path / "fresh" / "state"  # nothing of it exists yet
    files = FileStore(state_dir)
    files.create_run("r1")
    files.append("r1", [TargetEvent(eid="target:0", target=Target(repo="x"))])
    files.put_artifact("r1", "round-1.codex.stdout.txt", b"report")
    files.put_artifact("r1", "patches/deep/r1-codex-1.patch", b"diff")
    files.write_state("r1", {"slug": "r1"})
    with files.lock("r1"):
        pass
    assert mode(state_dir) == 0o700
    modes = tree_modes(state_dir / "runs")
    dirs = {p for p in modes if (state_dir / "runs" / p).is_dir()}
    assert dirs == {".", "r1", "r1/patches", "r1/patches/deep"}
    assert {p: m for p, m in modes.items() if p in dirs} == dict.fromkeys(dirs, 0o700)
    assert {p: m for p, m in modes.items() if p not in dirs} == {
        p: 0o600
        for p in (
            "r1/events.ndjson",
            "r1/.created",
            "r1/round-1.codex.stdout.txt",
            "r1/patches/deep/r1-codex-1.patch",
            "r1/run.json",
            "r1/.lock",
        )
    }


def test_loose_directories_of_ours_are_tightened(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    runs = state_dir / "runs"
    (runs / "r1").mkdir(parents=True)
    for d, m in ((state_dir, 0o755), (runs, 0o755), (runs / "r1", 0o777)):
        os.chmod(d, m)
    FileStore(state_dir).write_state("r1", {"slug": "r1"})
    assert mode(runs) == 0o700 and mode(runs / "r1") == 0o700
    assert mode(state_dir) == 0o755  # a state directory the operator made is left as it is


def test_a_workers_run_directory_and_worktree_root(client: redis.Redis, prefix: str, tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    rt = Runtime(
        settings=Settings(dir=state_dir),
        store=RedisStore(client, prefix=prefix),
        files=FileStore(state_dir),
        send=lambda *a: None,
        kick=lambda s: None,
    )
    run_dir = rt.run_dir("r1")  # where a worker's agents write prompts and output
    assert mode(state_dir / "runs") == 0o700 and mode(run_dir) == 0o700
    rt.store.append("r1", [TargetEvent(eid="target:0", target=Target(repo="x"))])
    mirror(rt.store, rt.files, "r1")
    assert mode(run_dir / "events.ndjson") == 0o600 and mode(run_dir / "run.json") == 0o600

    repo = make_sample_repo(tmp_path / "src")
    trees: Worktrees = rt.worktrees
    with trees.checkout(repo, rev_parse(repo, "feature"), "r1-review") as wt:
        assert (wt / ".git").exists()
        assert mode(state_dir / "worktrees") == 0o700
