"""A host's own mirror of a remote target (workers/isolation/mirror.py) with real git and a ``file://``
remote: another host's fix rebuilt from its patch with the very sha recorded, a head the PR moved away from
fetched by id, a patch that does not give the recorded sha refused, threads of one host sharing one
clone, and a local target's path left as it is."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from orchestrator.domain import CommitPushed, Event
from orchestrator.spec import Target
from orchestrator.target import mirror_path, parse_pr_url
from workers.isolation.mirror import MirrorError, has_commit, run_repo
from workers.isolation.worktree import commit_deterministic

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
URL = "https://github.com/acme/lib/pull/7"
PATCH = b"""diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-alpha
+fixed
"""


def sh(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *IDENTITY, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def remote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``acme/lib.git`` with PR 7 one commit on main; github.com URLs lead to it (url.insteadOf)."""
    work = tmp_path / "work"
    work.mkdir()
    sh(work, "init", "-q", "-b", "main")
    (work / "a.txt").write_text("alpha\n")
    sh(work, "add", "-A")
    sh(work, "commit", "-q", "-m", "first")
    sh(work, "checkout", "-q", "-b", "pr")
    (work / "b.txt").write_text("beta\n")
    sh(work, "add", "-A")
    sh(work, "commit", "-q", "-m", "the change")
    bare = tmp_path / "remotes" / "acme" / "lib.git"
    bare.parent.mkdir(parents=True)
    sh(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    sh(bare, "update-ref", "refs/pull/7/head", "refs/heads/pr")
    config = tmp_path / "gitconfig"
    config.write_text(f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://github.com/\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    return bare


def fix_on(repo: Path, head: str, tmp: Path) -> CommitPushed:
    """Host A's integration: the fix committed on ``head`` and recorded as the coordinator records it."""
    message = "jury: fix r1-x-1: alpha\n\nWHERE: a.txt:1\n"
    sha = commit_deterministic(repo, head, PATCH, message, tmp / "commit")
    return CommitPushed(
        eid="integrate:r1-x-1:1",
        sha=sha,
        subject="jury: fix",
        parent=head,
        patch="patches/x.patch",
        message=message,
    )


def test_another_hosts_fix_is_rebuilt_with_the_recorded_sha(remote: Path, tmp_path: Path) -> None:
    head = sh(remote, "rev-parse", "refs/pull/7/head")
    target = Target(url=URL, head=head, path="/nowhere/on/this/host")
    artifacts = {"patches/x.patch": PATCH}
    events: list[Event] = []

    def repo_on(host: str, shas: list[str]) -> Path:
        return run_repo(tmp_path / host, target, shas, lambda: events, artifacts.get)

    a = repo_on("a", [head])
    assert a == mirror_path(tmp_path / "a", parse_pr_url(URL))
    events.append(fix := fix_on(a, head, tmp_path))
    b = repo_on("b", [fix.sha, head])  # host B never saw host A's disk
    assert b == mirror_path(tmp_path / "b", parse_pr_url(URL)) and has_commit(b, fix.sha)
    assert sh(b, "show", f"{fix.sha}:a.txt") == "fixed"
    assert not has_commit(remote, fix.sha)  # it came from the patch, not from the remote

    # The PR moves on: the old head is still fetched, by id, on a host that has neither.
    sh(remote, "update-ref", "refs/pull/7/head", "refs/heads/main")
    c = repo_on("c", [fix.sha])
    assert has_commit(c, head) and has_commit(c, fix.sha)

    # A patch that does not give the recorded commit is refused, naming it.
    artifacts["patches/x.patch"] = PATCH.replace(b"+fixed", b"+other")
    with pytest.raises(MirrorError, match=f"rebuilding commit {fix.sha[:12]}"):
        repo_on("d", [fix.sha])
    del artifacts["patches/x.patch"]
    with pytest.raises(MirrorError, match="no longer in the store"):
        repo_on("e", [fix.sha])


def test_threads_of_one_host_share_one_clone(remote: Path, tmp_path: Path) -> None:
    head = sh(remote, "rev-parse", "refs/pull/7/head")
    target = Target(url=URL, head=head)
    with ThreadPoolExecutor(6) as pool:
        repos = list(pool.map(lambda _: run_repo(tmp_path / "h", target, [head], list, dict().get), range(6)))
    assert len(set(repos)) == 1 and has_commit(repos[0], head)
    assert [p.name for p in repos[0].parent.iterdir()] == ["lib.git"]  # no clone left half-made beside it


def test_a_local_target_is_its_path(tmp_path: Path) -> None:
    local = Target(path=str(tmp_path / "repo"), branch="feature")
    assert run_repo(tmp_path / "h", local, ["0" * 40], list, dict().get) == tmp_path / "repo"
    assert not (tmp_path / "h").exists()
