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
from collections.abc import Iterable, Iterator, Mapping
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


def merge_bases(repo: Path, trunk: str, heads: Iterable[str]) -> dict[str, str | None]:
    """What ``merge_base(repo, head, trunk)`` gives for each of many ``heads`` (object ids), None where
    they share no history, with one ``git rev-list`` (and one ``git merge-base`` for each head that
    reaches the trunk's history at more than one commit, which only merges of it into a branch make).

    ``git rev-list --boundary --parents HEADS ^TRUNK`` lists every commit of a head that the trunk
    lacks, with its parents, and the trunk's commits those reach (the boundary, marked ``-``: reached from
    the trunk, so the trunk's history holds them). Every common ancestor of a head and the trunk is one of
    the boundary commits the head reaches, or an ancestor of one; so when a head reaches exactly one, that
    one is the merge-base, and ``git merge-base`` is asked only of the others. A head the listing lacks is
    in the trunk's history: its own merge-base. The heads go on stdin, so their number is unbounded."""
    wanted = list(dict.fromkeys(heads))
    if not wanted:
        return {}
    refs = "".join(f"{h}\n" for h in wanted) + f"^{trunk}\n"
    out = git(["rev-list", "--topo-order", "--boundary", "--parents", "--stdin"], repo, input=refs.encode())
    listed: dict[str, list[str]] = {}
    boundary: set[str] = set()
    for line in out.splitlines():
        if line.startswith("-"):
            boundary.add(line[1:].split(" ", 1)[0])
        elif line:
            sha, *parents = line.split()
            listed[sha] = parents
    # children come before their parents (--topo-order): read backwards, each commit's parents are known
    reach: dict[str, frozenset[str]] = {}
    for sha in reversed(listed):
        parents = listed[sha]
        if len(parents) == 1:
            p = parents[0]
            reach[sha] = reach[p] if p in listed else frozenset((p,))
        else:
            reach[sha] = frozenset().union(*(reach[p] if p in listed else {p} for p in parents))
    found: dict[str, str | None] = {}
    for head in wanted:
        bases = reach.get(head)
        if bases is None:  # not listed: the trunk's history holds the head
            found[head] = head
        elif not bases:
            found[head] = None
        elif len(bases) == 1 and bases <= boundary:  # git marked it reached from the trunk, as it must be
            found[head] = next(iter(bases))
        else:
            found[head] = merge_base_or_none(repo, head, trunk)
    return found


def merge_base_or_none(repo: Path, a: str, b: str) -> str | None:
    """``merge_base``, None when ``a`` and ``b`` share no history (git's exit 1, no output)."""
    try:
        return merge_base(repo, a, b)
    except GitError as exc:
        if exc.code == 1 and not exc.stderr.strip():
            return None
        raise


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
