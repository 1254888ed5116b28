"""A checkout's ``.git`` link is Jury's, not the reviewed code's: what runs in a checkout cannot choose
the repository (and so the ``config``, its filters and drivers) that Jury's own git reads there.

The attack: code under review that may write its worktree (the judge, the PR's tests during
verification) replaces the worktree's ``.git`` file with a repository of its own whose ``config`` names
a ``filter``, and a ``.gitattributes`` that applies it; Jury's next ``git add`` / ``checkout-index`` in
that worktree, outside the sandbox, would run the filter's command as the worker.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.config import Settings
from orchestrator.spec import SandboxSettings
from workers.isolation.sandbox import Jail, confine, git_dirs_of, sandbox_problem
from workers.isolation.worktree import (
    POOL_DIR,
    Worktrees,
    changed_paths,
    diff_patch,
    discard_changes,
    genuine_link,
    git,
    host_worktrees,
    pinned_git_dir,
    rev_parse,
)

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
needs_bwrap = pytest.mark.skipif(sandbox_problem(SandboxSettings()) is not None, reason="no bubblewrap here")


def sh_git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *IDENTITY, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    sh_git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("alpha\n")
    (path / ".gitignore").write_text("build/\n")
    sh_git(path, "add", "-A")
    sh_git(path, "commit", "-q", "-m", "first")
    return path


def plant_repository(wt: Path, marker: Path) -> None:
    """What hostile code would do with a writable worktree: its own .git, a filter, attributes."""
    link = wt / ".git"
    if link.is_dir():
        return
    link.unlink()
    subprocess.run(["git", "init", "-q", str(wt)], check=True, capture_output=True)
    command = f"sh -c 'touch {marker}; cat'"
    for kind in ("clean", "smudge"):
        subprocess.run(["git", "-C", str(wt), "config", f"filter.pwn.{kind}", command], check=True)
    (wt / ".gitattributes").write_text("* filter=pwn\n")


def test_jurys_git_never_reads_a_planted_repository(repo: Path, tmp_path: Path) -> None:
    """Even when the link was replaced (no sandbox: ``mode = "none"``, or a hole in it), every git
    command Jury runs in the checkout uses the git directory pinned when the checkout was made."""
    marker = tmp_path / "filter-ran"
    head = rev_parse(repo, "HEAD")
    with Worktrees(tmp_path / "wts").checkout(repo, head, "judge") as wt:
        admin = pinned_git_dir(wt)
        assert admin is not None and admin == genuine_link(wt, repo)
        (wt / "a.txt").write_text("alpha, fixed\n")
        plant_repository(wt, marker)
        assert genuine_link(wt, repo) is None  # the link on disk is the attacker's now
        assert git(["rev-parse", "HEAD"], wt).strip() == head  # Jury's git: still the reviewed repository
        assert changed_paths(wt) == [".gitattributes", "a.txt"]
        patch = diff_patch(wt).decode()
        assert "+alpha, fixed" in patch and "filter=pwn" in patch
        assert git_dirs_of(wt)[0] == admin  # the sandbox binds the pinned dirs, not the planted ones
        discard_changes(wt)
        git(["checkout-index", "--all", "--force"], wt)
        assert (wt / "a.txt").read_text() == "alpha\n"
    assert not marker.exists(), "a filter the reviewed code planted ran in the worker"
    assert pinned_git_dir(wt) is None  # the pin ends with the checkout


@needs_bwrap
def test_sandboxed_code_cannot_replace_the_link(repo: Path, tmp_path: Path) -> None:
    worker_env = dict(os.environ)
    head = rev_parse(repo, "HEAD")
    with Worktrees(tmp_path / "wts").checkout(repo, head, "judge") as wt:
        before = (wt / ".git").read_bytes()
        jail = Jail(worktree=wt, git_dirs=git_dirs_of(wt))
        tries = {
            "rm": "rm -f .git",
            "mv": "mv .git moved",
            "write": "echo 'gitdir: /tmp/evil' > .git",
            "init": "git init -q .",
        }
        for what, script in tries.items():
            confined = confine(jail, ["sh", "-c", f"{script} && echo WORKED"], wt, worker_env)
            ran = subprocess.run(confined.argv, env=confined.env, cwd=wt, capture_output=True, text=True)
            assert "WORKED" not in ran.stdout, f"{what}: {ran.stdout} {ran.stderr}"
        # The worktree itself stays writable: the judge's fix lands, and Jury's git sees it.
        confined = confine(jail, ["sh", "-c", "echo fixed > a.txt"], wt, worker_env)
        subprocess.run(confined.argv, env=confined.env, cwd=wt, check=True)
        assert (wt / ".git").read_bytes() == before
        assert changed_paths(wt) == ["a.txt"]


# --- recycled checkouts ----------------------------------------------------------------------------


def second_commit(repo: Path) -> str:
    (repo / "a.txt").write_text("alpha\nbeta\n")
    (repo / "b.txt").write_text("new\n")
    sh_git(repo, "add", "-A")
    sh_git(repo, "commit", "-q", "-m", "second")
    return rev_parse(repo, "HEAD")


def tree_of(wt: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(wt):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for f in filenames:
            p = Path(dirpath) / f
            if p.name != ".git":
                out[p.relative_to(wt).as_posix()] = p.read_bytes()
    return out


def test_a_recycled_checkout_is_exactly_a_fresh_one(repo: Path, tmp_path: Path) -> None:
    first = rev_parse(repo, "HEAD")
    second = second_commit(repo)
    pooled, fresh = Worktrees(tmp_path / "pooled", pool=2), Worktrees(tmp_path / "fresh")
    with pooled.checkout(repo, first, "one") as wt:
        used = wt
        (wt / "a.txt").write_text("changed\n")  # a tracked file changed
        (wt / "untracked.py").write_text("x\n")
        (wt / "build").mkdir()
        (wt / "build" / "out.o").write_bytes(b"\0")  # ignored output
        (wt / "nested").mkdir()
        subprocess.run(["git", "init", "-q", str(wt / "nested")], check=True)  # a repository inside
        os.chmod(wt / "a.txt", 0o755)
    for sha in (second, first):
        with pooled.checkout(repo, sha, "two") as wt, fresh.checkout(repo, sha, "two") as clean:
            assert wt == used  # the same checkout, taken again
            assert rev_parse(wt, "HEAD") == sha
            assert tree_of(wt) == tree_of(clean)
            assert os.stat(wt / "a.txt").st_mode == os.stat(clean / "a.txt").st_mode
            assert changed_paths(wt) == []


def test_holders_at_once_get_checkouts_of_their_own(repo: Path, tmp_path: Path) -> None:
    head = rev_parse(repo, "HEAD")
    wts = Worktrees(tmp_path / "wts", pool=2)
    with wts.checkout(repo, head, "a") as one, wts.checkout(repo, head, "b") as two:
        with wts.checkout(repo, head, "c") as three:  # the pool is full: a worktree of its own
            assert len({one, two, three}) == 3
            assert three == (tmp_path / "wts" / "c").resolve()
        assert not three.exists()  # removed after use, as without a pool
    assert one.is_dir() and two.is_dir()  # kept for the next holders


def test_a_recycled_checkout_whose_link_was_replaced_is_made_afresh(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "filter-ran"
    head = rev_parse(repo, "HEAD")
    wts = Worktrees(tmp_path / "wts", pool=1)
    with wts.checkout(repo, head, "a") as wt:
        plant_repository(wt, marker)
        (wt / "left-behind.txt").write_text("x\n")
    with wts.checkout(repo, head, "b") as wt:
        assert genuine_link(wt, repo) is not None
        assert sorted(tree_of(wt)) == [".gitignore", "a.txt"]
        assert changed_paths(wt) == []
    assert not marker.exists()
    listed = git(["worktree", "list", "--porcelain"], repo)
    assert listed.count("worktree ") == 2  # the repository and the one pooled checkout, nothing stale


def test_idle_recycled_checkouts_are_removed(repo: Path, tmp_path: Path) -> None:
    head = rev_parse(repo, "HEAD")
    with Worktrees(tmp_path / "wts", pool=2).checkout(repo, head, "a") as wt:
        pass
    assert wt.is_dir()
    busy = Worktrees(tmp_path / "wts", pool=2, idle=3600.0)
    busy.evict_idle()
    assert wt.is_dir()  # used a moment ago
    Worktrees(tmp_path / "wts", pool=2, idle=1e-6).evict_idle()
    assert not wt.exists()
    assert git(["worktree", "list", "--porcelain"], repo).count("worktree ") == 1


def test_a_host_recycles_checkouts_of_its_own_mirrors_only(repo: Path, tmp_path: Path) -> None:
    settings = Settings(dir=tmp_path / "state")
    mirror = settings.dir / "mirrors" / "example.com" / "acme" / "repo.git"
    mirror.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(mirror)], check=True)
    head = rev_parse(repo, "HEAD")
    wts = host_worktrees(settings)
    with wts.checkout(mirror, head, "pr") as wt:
        assert wt.parent.parent.name == POOL_DIR
    assert wt.is_dir()  # kept for the next task
    with wts.checkout(repo, head, "local") as wt:
        assert wt == (settings.dir / "worktrees" / "local").resolve()
    assert not wt.exists()
    assert git(["worktree", "list", "--porcelain"], repo).count("worktree ") == 1  # nothing left there


def test_the_pin_holds_by_any_path_to_the_checkout(repo: Path, tmp_path: Path) -> None:
    """The http agents' git tools name the checkout by its resolved path; a root reached through a
    symbolic link (a JURY_DIR that is one) must find the same pin."""
    real = tmp_path / "real-state"
    real.mkdir()
    (tmp_path / "state").symlink_to(real)
    for wts in (Worktrees(tmp_path / "state" / "wts"), Worktrees(tmp_path / "state" / "pooled", pool=1)):
        with wts.checkout(repo, "HEAD", "judge") as wt:
            admin = pinned_git_dir(wt)
            assert admin is not None and pinned_git_dir(wt.resolve()) == admin
