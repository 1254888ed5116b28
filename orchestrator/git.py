"""Running git: the one program the deciding side runs, to read what is reviewed (``orchestrator.target``).

Every command runs ``git`` directly (argv, never a shell) with hooks and fsmonitor disabled, so a
repository under review cannot run code through git; inherited variables that would point git at another
repository, index or object store are dropped. The worker side's plumbing (worktrees, deterministic
commits, a host's mirrors of remote targets) is built on these in ``workers/isolation/worktree.py`` and
``workers/isolation/mirror.py``; ``repo_lock`` serializes what changes one repository's shape (a mirror's
clone and fetches, git's worktree list) between the threads and processes of one host.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import structlog

from orchestrator.errors import GitError

log = structlog.get_logger()

# Inherited variables that would point git at another repository, index or object store.
_GIT_LOCATION_VARS = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_NAMESPACE",
        "GIT_PREFIX",
    }
)
_GIT_CONFIG = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"]
# What git writes — checkouts, their git directories' objects — is readable by others: a root worker's jail
# runs as a uid of its own (workers.isolation.jailuid) that must read the checkout and its objects. Jury's own
# files are private (umask 077, orchestrator.private_files.write_privately), and so is every checkout's place:
# under Jury's 0700 state directory, which a jail sees only its own way through.
CHECKOUT_UMASK = 0o022


def _git_env(env: Mapping[str, str] | None) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARS}
    base["GIT_TERMINAL_PROMPT"] = "0"
    base["LC_ALL"] = "C"
    if env:
        base.update(env)
    return base


def git_bytes(
    args: list[str],
    cwd: Path,
    *,
    check: bool = True,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    safe_directory: Path | None = None,
) -> bytes:
    """Run ``git args`` in ``cwd`` and return raw stdout; GitError on a non-zero exit when ``check``.

    ``env`` is added to the inherited environment (minus inherited GIT_DIR-like variables).
    ``safe_directory``: a checkout of Jury's own that another uid owns now (a root worker's jail runs
    as one, ``workers.isolation.jailuid``), which git would otherwise refuse as "dubious ownership".
    """
    trust = ["-c", f"safe.directory={safe_directory}"] if safe_directory is not None else []
    proc = subprocess.run(
        ["git", *_GIT_CONFIG, *trust, *args],
        cwd=cwd,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        env=_git_env(env),
        check=False,
        umask=CHECKOUT_UMASK,
    )
    if check and proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", errors="replace")
        log.debug("git.failed", args=args, cwd=str(cwd), code=proc.returncode, stderr=stderr[-500:])
        raise GitError(args, proc.returncode, stderr)
    return proc.stdout


def git(
    args: list[str],
    cwd: Path,
    *,
    check: bool = True,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    safe_directory: Path | None = None,
) -> str:
    """``git_bytes`` decoded as UTF-8 (undecodable bytes replaced)."""
    out = git_bytes(args, cwd, check=check, input=input, env=env, safe_directory=safe_directory)
    return out.decode("utf-8", errors="replace")


def rev_parse(repo: Path, rev: str) -> str:
    """The full object id ``rev`` names; GitError when it names nothing."""
    return git(["rev-parse", "--verify", "--end-of-options", rev], repo).strip()


def merge_base(repo: Path, a: str, b: str) -> str:
    """The best common ancestor of ``a`` and ``b``; GitError when they share none."""
    return git(["merge-base", a, b], repo).strip()


@contextmanager
def repo_lock(repo: Path, lock_dir: Path) -> Iterator[None]:
    """Hold an exclusive flock for ``repo`` (keyed by its resolved path) — across threads and processes.

    Each holder opens the lock file anew, and flock locks belong to the open file, so two threads of one
    process exclude each other as two processes do."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha1(str(repo.resolve()).encode(), usedforsecurity=False).hexdigest()
    fd = os.open(lock_dir / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
