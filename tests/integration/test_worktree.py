"""Worktrees, change capture and deterministic commits against real git repositories."""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from orchestrator.errors import GitError
from orchestrator.git import merge_base
from tests.conftest import logging_git
from workers.isolation.worktree import (
    Worktrees,
    add_worktree,
    changed_paths,
    commit_deterministic,
    diff_patch,
    discard_changes,
    git,
    pinned_git_dir,
    rev_parse,
    update_ref,
)

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def sh_git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *IDENTITY, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    sh_git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("alpha\n")
    (path / "b.txt").write_text("beta\n")
    (path / "bin.dat").write_bytes(bytes(range(256)))
    sh_git(path, "add", "-A")
    sh_git(path, "commit", "-q", "-m", "first")
    (path / "a.txt").write_text("alpha\nmore\n")
    sh_git(path, "commit", "-q", "-am", "second")
    return path


def registered(repo: Path) -> list[str]:
    lines = git(["worktree", "list", "--porcelain"], repo).splitlines()
    return [line.split(" ", 1)[1] for line in lines if line.startswith("worktree ")]


def test_plumbing_helpers(repo: Path) -> None:
    head = rev_parse(repo, "HEAD")
    first = rev_parse(repo, "HEAD~1")
    assert len(head) == 40 and head != first
    assert merge_base(repo, "HEAD", first) == first
    update_ref(repo, "refs/jury/test", first)
    assert rev_parse(repo, "refs/jury/test") == first
    with pytest.raises(GitError) as info:
        rev_parse(repo, "no-such-rev")
    assert info.value.code != 0
    assert git(["status"], repo, check=False)  # check=False returns output


def test_checkout_detached_and_removed(repo: Path, tmp_path: Path) -> None:
    wts = Worktrees(tmp_path / "wts")
    first = rev_parse(repo, "HEAD~1")
    with wts.checkout(repo, first, "r1") as wt:
        assert wt == (tmp_path / "wts" / "r1").resolve()
        assert rev_parse(wt, "HEAD") == first
        assert git(["rev-parse", "--abbrev-ref", "HEAD"], wt).strip() == "HEAD"  # detached
        assert (wt / "a.txt").read_text() == "alpha\n"
        assert str(wt) in registered(repo)
    assert not wt.exists()
    assert str(wt) not in registered(repo)


def test_checkout_removed_when_body_raises(repo: Path, tmp_path: Path) -> None:
    wts = Worktrees(tmp_path / "wts")
    with pytest.raises(RuntimeError, match="boom"), wts.checkout(repo, "HEAD", "r1") as wt:
        (wt / "junk.txt").write_text("x")
        raise RuntimeError("boom")
    assert not wt.exists()
    assert registered(repo) == [str(repo.resolve())]


def test_stale_unregistered_directory_is_replaced(repo: Path, tmp_path: Path) -> None:
    stale = tmp_path / "wts" / "r1"
    stale.mkdir(parents=True)
    (stale / "left-over").write_text("crash")
    with Worktrees(tmp_path / "wts").checkout(repo, "HEAD", "r1") as wt:
        assert not (wt / "left-over").exists()
        assert (wt / "a.txt").exists()
    assert not stale.exists()


def test_stale_registered_worktree_is_replaced(repo: Path, tmp_path: Path) -> None:
    stale = tmp_path / "wts" / "r1"
    git(["worktree", "add", "--detach", str(stale), "HEAD~1"], repo)
    (stale / "a.txt").write_text("dirty\n")  # a crashed run left changes behind
    head = rev_parse(repo, "HEAD")
    with Worktrees(tmp_path / "wts").checkout(repo, head, "r1") as wt:
        assert rev_parse(wt, "HEAD") == head
        assert changed_paths(wt) == []
    assert registered(repo) == [str(repo.resolve())]


def test_stale_registered_but_deleted_worktree_is_pruned(repo: Path, tmp_path: Path) -> None:
    stale = tmp_path / "wts" / "r1"
    git(["worktree", "add", "--detach", str(stale), "HEAD"], repo)
    subprocess.run(["rm", "-rf", str(stale)], check=True)
    with Worktrees(tmp_path / "wts").checkout(repo, "HEAD", "r1") as wt:
        assert (wt / "a.txt").exists()
        assert registered(repo) == [
            str(repo.resolve()),
            str(wt),
        ]  # git's record of it taken over, not doubled
    assert registered(repo) == [str(repo.resolve())]


def test_a_worktree_jury_makes_is_one_git_knows_as_its_own(repo: Path, tmp_path: Path) -> None:
    """Jury writes a worktree's records itself (one git process instead of three): git must read them as
    a worktree it made, list it, work in it, and remove and prune it with its own commands."""
    first = rev_parse(repo, "HEAD~1")
    wts = Worktrees(tmp_path / "wts")
    with wts.checkout(repo, first, "r1") as wt:
        listing = git(["worktree", "list", "--porcelain"], repo)
        assert f"worktree {wt}\nHEAD {first}\ndetached\n" in listing
        assert "locked" not in listing  # the lock it held while it wrote them is gone
        plain = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        inside = subprocess.run(  # a program in the checkout finds its repository through its .git
            ["git", "status", "--porcelain", "--untracked-files=all"], cwd=wt, env=plain, capture_output=True
        )
        assert inside.returncode == 0 and inside.stdout == b"", inside.stderr
        assert (wt / "bin.dat").read_bytes() == bytes(range(256))
        assert git(["diff", "--stat", "HEAD", "main"], wt).strip().startswith("a.txt")
    # And git's own removal of one Jury made leaves nothing behind.
    admin = add_worktree(repo, tmp_path / "wts" / "r2", "HEAD")
    git(["worktree", "remove", str(tmp_path / "wts" / "r2")], repo)
    assert not admin.exists() and registered(repo) == [str(repo.resolve())]
    add_worktree(repo, tmp_path / "wts" / "r3", "HEAD")
    shutil.rmtree(tmp_path / "wts" / "r3")
    git(["worktree", "prune"], repo)
    assert registered(repo) == [str(repo.resolve())]


def test_a_worktree_of_another_path_with_the_same_name_keeps_its_record(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "r1"
    git(["worktree", "add", "--detach", str(other), "HEAD"], repo)
    with Worktrees(tmp_path / "wts").checkout(repo, "HEAD", "r1") as wt:
        assert pinned_git_dir(wt) == (repo / ".git" / "worktrees" / "r11").resolve()  # numbered, as git does
        assert registered(repo) == [str(repo.resolve()), str(other.resolve()), str(wt)]
    assert registered(repo) == [str(repo.resolve()), str(other.resolve())]
    assert (other / "a.txt").exists()


def test_a_worktree_is_not_made_over_a_path_that_exists(repo: Path, tmp_path: Path) -> None:
    live = tmp_path / "wts" / "r1"
    live.parent.mkdir()
    admin = add_worktree(repo, live, "HEAD")
    with pytest.raises(FileExistsError):
        add_worktree(repo, live, "HEAD~1")
    assert admin.is_dir() and (live / "a.txt").exists()  # the live one's record and files untouched
    assert registered(repo) == [str(repo.resolve()), str(live.resolve())]


def test_a_worktree_that_cannot_be_checked_out_leaves_nothing(repo: Path, tmp_path: Path) -> None:
    missing = "0" * 40
    with pytest.raises(GitError), Worktrees(tmp_path / "wts").checkout(repo, missing, "r1"):
        pass
    assert registered(repo) == [str(repo.resolve())]
    assert not (tmp_path / "wts" / "r1").exists()
    assert not (repo / ".git" / "worktrees" / "r1").exists()


def test_a_checkout_and_its_removal_start_one_git_process(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local target's checkout is the one ``git read-tree`` (``git worktree add`` was three processes and
    ``git worktree remove`` a fourth): every git the worker starts goes through a logging stand-in."""
    bin_dir, calls = logging_git(tmp_path)
    head = rev_parse(repo, "HEAD")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with Worktrees(tmp_path / "wts").checkout(repo, head, "r1") as wt:
        assert (wt / "a.txt").read_text() == "alpha\nmore\n"
    lines = calls.read_text().splitlines() if calls.exists() else []
    assert len(lines) == 1 and " read-tree " in lines[0], lines
    assert not wt.exists() and registered(repo) == [str(repo.resolve())]


def test_bad_name_is_refused(repo: Path, tmp_path: Path) -> None:
    with (
        pytest.raises(ValueError, match="bad worktree name"),
        Worktrees(tmp_path / "wts").checkout(repo, "HEAD", "../x"),
    ):
        pass


def _edit(wt: Path) -> None:
    (wt / "a.txt").write_text("alpha changed\n")
    (wt / "b.txt").unlink()
    (wt / "new dir").mkdir()
    (wt / "new dir" / "new.txt").write_text("untracked\n")
    (wt / "blob.bin").write_bytes(bytes(range(255, -1, -1)) * 4)


def test_changed_paths_diff_patch_and_discard(repo: Path, tmp_path: Path) -> None:
    with Worktrees(tmp_path / "wts").checkout(repo, "HEAD", "r1") as wt:
        assert changed_paths(wt) == []
        assert diff_patch(wt) == b""
        _edit(wt)
        expected = ["a.txt", "b.txt", "blob.bin", "new dir/new.txt"]
        assert changed_paths(wt) == expected
        patch = diff_patch(wt)
        assert b"GIT binary patch" in patch
        assert b"new dir/new.txt" in patch
        assert b"deleted file mode" in patch
        assert changed_paths(wt) == expected  # still seen once staged
        discard_changes(wt)
        assert changed_paths(wt) == []
        assert (wt / "b.txt").exists()
        assert not (wt / "new dir").exists()


def test_changed_paths_sees_a_staged_rename(repo: Path, tmp_path: Path) -> None:
    with Worktrees(tmp_path / "wts").checkout(repo, "HEAD", "r1") as wt:
        git(["mv", "b.txt", "c.txt"], wt)
        assert changed_paths(wt) == ["b.txt", "c.txt"]


def _patch_of(repo: Path, tmp_path: Path) -> bytes:
    with Worktrees(tmp_path / "wts").checkout(repo, "HEAD", "edit") as wt:
        _edit(wt)
        return diff_patch(wt)


def test_commit_deterministic_same_sha_in_two_clones(repo: Path, tmp_path: Path) -> None:
    patch = _patch_of(repo, tmp_path)
    head = rev_parse(repo, "HEAD")
    shas = []
    for n in (1, 2):
        clone = tmp_path / f"clone{n}"
        sh_git(tmp_path, "clone", "-q", str(repo), str(clone))
        before = git(["status", "--porcelain"], clone)
        sha = commit_deterministic(clone, head, patch, "jury: fix F1", tmp_path / f"work{n}")
        assert git(["status", "--porcelain"], clone) == before  # no checkout or index touched
        assert rev_parse(clone, "HEAD") == head
        shas.append(sha)
    assert shas[0] == shas[1]
    clone = tmp_path / "clone1"
    assert rev_parse(clone, f"{shas[0]}^") == head
    assert (
        git(["show", "-s", "--format=%an <%ae> %s", shas[0]], clone).strip()
        == "Jury <jury@localhost> jury: fix F1"
    )
    files = git(["ls-tree", "-r", "--name-only", shas[0]], clone).splitlines()
    assert files == ["a.txt", "bin.dat", "blob.bin", "new dir/new.txt"]
    assert git(["show", f"{shas[0]}:a.txt"], clone) == "alpha changed\n"
    blob = subprocess.run(["git", "show", f"{shas[0]}:blob.bin"], cwd=clone, capture_output=True, check=True)
    assert blob.stdout == bytes(range(255, -1, -1)) * 4
    assert commit_deterministic(clone, head, patch, "another message", tmp_path / "w3") != shas[0]
    assert list((tmp_path / "work1").iterdir()) == []  # the temporary index is cleaned up


def test_commit_deterministic_rejects_a_patch_that_does_not_apply(repo: Path, tmp_path: Path) -> None:
    patch = _patch_of(repo, tmp_path)
    first = rev_parse(repo, "HEAD~1")  # a.txt differs there, so the hunk does not apply
    with pytest.raises(GitError):
        commit_deterministic(repo, first, patch, "m", tmp_path / "work")
    with pytest.raises(GitError):
        commit_deterministic(repo, "HEAD", b"not a patch\n", "m", tmp_path / "work")


def test_parallel_checkouts_on_one_repo(repo: Path, tmp_path: Path) -> None:
    wts = Worktrees(tmp_path / "wts")
    head = rev_parse(repo, "HEAD")

    def job(n: int) -> tuple[str, list[str]]:
        out: tuple[str, list[str]] = ("", [])
        for i in range(3):
            with wts.checkout(repo, head, f"t{n}-{i}") as wt:
                (wt / f"f{n}.txt").write_text(str(n))
                out = (rev_parse(wt, "HEAD"), changed_paths(wt))
        return out

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(job, range(4)))
    assert results == [(head, [f"f{n}.txt"]) for n in range(4)]
    assert registered(repo) == [str(repo.resolve())]
    assert sorted(os.listdir(tmp_path / "wts")) == [".locks"]
