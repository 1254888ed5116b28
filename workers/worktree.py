"""Git plumbing for workers: detached worktrees under a per-repo lock, change capture, deterministic commits.

Every command goes through ``orchestrator.git`` (argv, never a shell, hooks disabled), so a repository
under review cannot run code in the worker through git.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import structlog

from orchestrator.git import git, git_bytes, repo_lock, rev_parse
from orchestrator.store.files import private_dir

log = structlog.get_logger()

IDENTITY_NAME = "Jury"
IDENTITY_EMAIL = "jury@localhost"
FIXED_DATE = "2000-01-01T00:00:00+00:00"


def update_ref(repo: Path, ref: str, sha: str) -> None:
    """Point ``ref`` at ``sha`` (creating it if needed)."""
    git(["update-ref", ref, sha], repo)


class Worktrees:
    """Detached worktrees under ``root``, one directory per name; add/remove/prune serialized per repo."""

    def __init__(self, root: Path, lock_dir: Path | None = None) -> None:
        self.root = root
        self.lock_dir = lock_dir if lock_dir is not None else root / ".locks"

    def clear(self, repo: Path, path: Path) -> None:
        """Remove the checkout at ``path`` whatever state it is in: git's worktree, a directory git no
        longer knows, and git's record of either. Idempotent. The caller holds ``repo_lock(repo,
        self.lock_dir)``: git's worktree list is per repository, and another add or prune must not run
        between the removal and the prune."""
        if path.exists():
            git(["worktree", "remove", "--force", "--force", str(path)], repo, check=False)
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        git(["worktree", "prune"], repo, check=False)

    @contextmanager
    def checkout(self, repo: Path, sha: str, name: str) -> Iterator[Path]:
        """Yield ``root/<name>``, a detached checkout of ``sha``; it is removed on exit, whatever happens.

        A leftover directory of the same name (a crashed run) is removed first.
        """
        if not name or "/" in name or name in {".", ".."} or name.startswith("."):
            raise ValueError(f"bad worktree name: {name!r}")
        private_dir(self.root)  # 0700: checkouts of code under review, and the judge's work on it
        path = (self.root / name).resolve()
        with repo_lock(repo, self.lock_dir):
            if path.exists():
                log.warning("worktree.stale", repo=str(repo), path=str(path))
            self.clear(repo, path)
            git(["worktree", "add", "--detach", str(path), sha], repo)
        log.info("worktree.added", repo=str(repo), path=str(path), sha=sha)
        try:
            yield path
        finally:
            with repo_lock(repo, self.lock_dir):
                self.clear(repo, path)
            log.info("worktree.removed", repo=str(repo), path=str(path))


def changed_paths(wt: Path) -> list[str]:
    """Sorted paths changed in ``wt`` against HEAD: modified, added, deleted, renamed (both), untracked."""
    raw = git_bytes(["status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules"], wt)
    fields = raw.decode("utf-8", errors="surrogateescape").split("\0")
    paths: set[str] = set()
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        status, path = entry[:2], entry[3:]
        paths.add(path)
        if status[0] in "RC":  # the next field is the original path
            if i < len(fields) and fields[i]:
                paths.add(fields[i])
            i += 1
    return sorted(paths)


def diff_patch(wt: Path) -> bytes:
    """The whole change of ``wt`` against HEAD, untracked files included, as a binary patch (b'' if none).

    Stages everything in the worktree's index as a side effect.
    """
    git(["add", "-A"], wt)
    return git_bytes(
        [
            "diff",
            "--cached",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            "HEAD",
        ],
        wt,
    )


def discard_changes(wt: Path) -> None:
    """Return ``wt`` to exactly its HEAD: tracked changes reset, untracked and ignored files removed."""
    git(["reset", "--hard", "--quiet"], wt)
    git(["clean", "-fdxq"], wt)


def commit_deterministic(repo: Path, parent: str, patch: bytes, message: str, work: Path) -> str:
    """Commit ``patch`` on top of ``parent`` without touching any checkout; return the new commit's sha.

    Identity and dates are fixed, so the same parent, patch and message give the same sha on any host.
    An empty patch gives a commit with the parent's tree. GitError when the patch does not apply.
    """
    work.mkdir(parents=True, exist_ok=True)
    index = (work / f"index-{uuid.uuid4().hex}").resolve()
    env = {
        "GIT_INDEX_FILE": str(index),
        "GIT_AUTHOR_NAME": IDENTITY_NAME,
        "GIT_AUTHOR_EMAIL": IDENTITY_EMAIL,
        "GIT_AUTHOR_DATE": FIXED_DATE,
        "GIT_COMMITTER_NAME": IDENTITY_NAME,
        "GIT_COMMITTER_EMAIL": IDENTITY_EMAIL,
        "GIT_COMMITTER_DATE": FIXED_DATE,
    }
    try:
        parent_sha = rev_parse(repo, f"{parent}^{{commit}}")
        git(["read-tree", parent_sha], repo, env=env)
        if patch:
            git(["apply", "--cached", "--binary", "--whitespace=nowarn", "-"], repo, input=patch, env=env)
        tree = git(["write-tree"], repo, env=env).strip()
        sha = git(
            [
                "-c",
                "i18n.commitEncoding=UTF-8",
                "commit-tree",
                "--no-gpg-sign",
                tree,
                "-p",
                parent_sha,
                "-m",
                message,
            ],
            repo,
            env=env,
        ).strip()
    finally:
        index.unlink(missing_ok=True)
        Path(f"{index}.lock").unlink(missing_ok=True)
    log.info("git.commit_deterministic", repo=str(repo), parent=parent_sha, tree=tree, sha=sha)
    return sha
