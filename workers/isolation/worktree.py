"""Git plumbing for workers: checkouts of a repository (recycled, or detached worktrees made under a
per-repo lock), change capture, deterministic commits.

Every command goes through ``orchestrator.git`` (argv, never a shell, hooks disabled), so a repository
under review cannot run code in the worker through git. What runs in a checkout (an agent, the code under
review) may write its files, so the worker never lets the checkout tell git where its repository is: each
checkout's git directory is read from its ``.git`` link when Jury makes or takes it, before anything runs
in it, and pinned (``GIT_DIR``/``GIT_WORK_TREE``) for every later git command there. A ``.git`` planted
by the code under review (a repository of its own whose ``config`` names a filter Jury's ``git add`` would
run) is never read; the sandbox also binds the link read-only (``workers.isolation.sandbox``).

**Fresh checkouts** are git worktrees whose records Jury writes itself (``add_worktree``: one ``git
read-tree`` instead of ``git worktree add``'s three processes) and removes itself (``Worktrees._remove``),
under the repository's lock; git reads, lists, removes and prunes them as its own.

**Recycled checkouts.** A checkout of a 5,000-file repository is mostly writing 5,000 files, whether it is
a clone or ``git worktree add``. So a host keeps up to ``pool`` checkouts per repository of its own (the
mirrors under ``JURY_DIR``; a person's repository, a local target, gets a worktree per task, removed after
it, as git would list kept ones as its worktrees) in ``worktrees/.pool/<repo>/wt<i>``, each taken under a
flock its holder keeps, and hands a free one to the next task: its link checked, then ``git reset --hard
<sha>`` and ``git clean -ffdx`` make it exactly a fresh checkout of ``sha`` (only the files that differ
are written). One whose link is not what Jury made, or that git cannot reset, is removed and made afresh.
Ones idle for ``idle`` seconds are removed.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import pwd
import re
import shutil
import stat
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import structlog

from orchestrator.config import Settings
from orchestrator.errors import GitError
from orchestrator.git import git as _git
from orchestrator.git import git_bytes as _git_bytes
from orchestrator.git import repo_lock, rev_parse
from orchestrator.store.files import private_dir

log = structlog.get_logger()

IDENTITY_NAME = "Jury"
IDENTITY_EMAIL = "jury@localhost"
FIXED_DATE = "2000-01-01T00:00:00+00:00"
POOL_DIR = ".pool"  # under Worktrees.root: one directory per repository (a hash of its path)
EVICT_EVERY = 60.0  # seconds between two looks for idle recycled checkouts, per root and process


# --- the pinned link of each checkout -------------------------------------------------------------

# This process's checkouts (by real path: however a caller names one) -> the git admin directory their
# link named when Jury made or took them, before anything ran in them. Read by ``git``/``git_bytes``
# below, ``git_dirs`` and the http agents' git tools.
_PINS: dict[Path, Path] = {}


def pinned_git_dir(wt: Path) -> Path | None:
    """The git directory pinned for the checkout at ``wt`` (None: not a checkout of this process)."""
    return _PINS.get(Path(os.path.realpath(wt)))


def _pinned_env(cwd: Path, env: Mapping[str, str] | None) -> Mapping[str, str] | None:
    admin = pinned_git_dir(cwd)
    if admin is None:
        return env
    return {"GIT_DIR": str(admin), "GIT_WORK_TREE": os.path.abspath(cwd), **(env or {})}


def git_bytes(
    args: list[str],
    cwd: Path,
    *,
    check: bool = True,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> bytes:
    """``orchestrator.git.git_bytes``, with the git directory pinned when ``cwd`` is a checkout."""
    env = _pinned_env(cwd, env)
    return _git_bytes(args, cwd, check=check, input=input, env=env, safe_directory=_jails(cwd))


def git(
    args: list[str],
    cwd: Path,
    *,
    check: bool = True,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """``orchestrator.git.git``, with the git directory pinned when ``cwd`` is a checkout."""
    return _git(args, cwd, check=check, input=input, env=_pinned_env(cwd, env), safe_directory=_jails(cwd))


def _jails(cwd: Path) -> Path | None:
    """``cwd``, when a jail's uid owns it (a root worker's judge writes there: ``workers.isolation.jailuid``)
    and
    it is no checkout Jury pinned (git asks nothing of ownership then): git must trust it all the same,
    and only it. None for a tree the worker owns, or any other."""
    if os.geteuid() != 0 or pinned_git_dir(cwd) is not None:
        return None
    try:
        owner = os.stat(cwd).st_uid
    except OSError:
        return None
    return Path(os.path.abspath(cwd)) if owner != 0 and owner not in _accounts() else None


@cache
def _accounts() -> frozenset[int]:
    """The uids with an account here: a tree one of them owns is a person's, never a jail's."""
    return frozenset(p.pw_uid for p in pwd.getpwall())


@cache
def _common_dir(repo: str) -> Path:
    """The git common directory of the repository at ``repo`` (its ``.git``, or itself when bare).

    A ``.git`` directory with no ``commondir`` file in it is its own common directory (git's rule); any
    other shape (bare, a linked worktree, a ``.git`` file) is asked of git."""
    dot_git = Path(repo) / ".git"
    if dot_git.is_dir() and (dot_git / "HEAD").is_file() and not os.path.lexists(dot_git / "commondir"):
        return dot_git.resolve()
    out = _git(["rev-parse", "--path-format=absolute", "--git-common-dir"], Path(repo)).strip()
    return Path(out).resolve()


def genuine_link(wt: Path, repo: Path) -> Path | None:
    """The admin directory ``wt/.git`` names when it is the link git made for a worktree of ``repo``:
    a regular file (no symlink) ``gitdir: <common>/worktrees/<id>`` whose ``gitdir`` file points back
    at ``wt/.git``. Else None. Nothing in the checkout can forge that: the admin directory lies in the
    repository's git directory, which code in the sandbox only reads."""
    dot_git = Path(os.path.abspath(wt)) / ".git"
    try:
        if not stat.S_ISREG(os.lstat(dot_git).st_mode):
            return None
        text = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir: "):
        return None
    admin = Path(text.removeprefix("gitdir: "))
    if not admin.is_absolute() or admin.resolve().parent != _common_dir(str(repo.resolve())) / "worktrees":
        return None
    try:
        back = Path((admin / "gitdir").read_text(encoding="utf-8").strip())
    except (OSError, UnicodeDecodeError):
        return None
    return admin.resolve() if back.resolve() == dot_git.resolve() else None


@contextmanager
def _pinned(wt: Path, admin: Path) -> Iterator[None]:
    key = Path(os.path.realpath(wt))
    _PINS[key] = admin
    try:
        yield
    finally:
        _PINS.pop(key, None)


def git_dirs(wt: Path) -> tuple[Path, ...] | None:
    """The pinned checkout's git directories (its admin and the common dir), or None when unpinned."""
    admin = pinned_git_dir(wt)
    if admin is None:
        return None
    try:
        common = Path((admin / "commondir").read_text(encoding="utf-8").strip())
    except OSError:
        return (admin,)
    return tuple(dict.fromkeys([admin, (common if common.is_absolute() else admin / common).resolve()]))


# --- checkouts ------------------------------------------------------------------------------------

FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
ADMIN_NAME_BAD = re.compile(r"[^A-Za-z0-9._-]")


def add_worktree(repo: Path, path: Path, rev: str) -> Path:
    """A new detached worktree of ``rev`` at ``path`` (which must not exist), registered in ``repo`` as
    ``git worktree add --detach`` registers one; its admin directory. The caller holds the repository's
    lock (``repo_lock``).

    ``git worktree add`` is three git processes (itself, then ``update-ref`` and ``reset --hard``), most of
    a small review's cost in processes. Here the records git's layout documents (gitrepository-layout:
    ``worktrees/<id>/`` with ``gitdir``, ``commondir``, ``HEAD``; the checkout's ``.git`` naming it) are
    written by Jury, ``locked`` while they are (so a ``git worktree prune`` meanwhile leaves them), and
    the files by one ``git read-tree --reset -u``, which also writes the worktree's index. A record left
    by an earlier checkout at the same path that is gone is taken over, as ``--force`` does.
    """
    sha = rev if FULL_SHA.fullmatch(rev) else rev_parse(repo, f"{rev}^{{commit}}")
    path = path.resolve()  # git records a worktree by its real path
    if os.path.lexists(path):  # before any record is touched: one at this path may be a live checkout's
        raise FileExistsError(errno.EEXIST, "a worktree's path is taken", str(path))
    worktrees = _common_dir(str(repo.resolve())) / "worktrees"
    worktrees.mkdir(exist_ok=True)
    worktrees.chmod(SHARED_DIR)
    dot_git = path / ".git"
    admin = _new_admin(worktrees, ADMIN_NAME_BAD.sub("-", path.name).lstrip(".") or "wt", dot_git)
    made = False
    try:
        _write_shared(admin / "locked", "initializing\n")
        _write_shared(admin / "gitdir", f"{dot_git}\n")
        path.mkdir()
        made = True
        path.chmod(SHARED_DIR)
        _write_shared(dot_git, f"gitdir: {admin}\n")
        _write_shared(admin / "commondir", "../..\n")
        _write_shared(admin / "HEAD", f"{sha}\n")
        _git(
            ["read-tree", "--reset", "-u", sha], path, env={"GIT_DIR": str(admin), "GIT_WORK_TREE": str(path)}
        )
        (admin / "locked").unlink()
    except BaseException:
        if made:
            remove_tree(path)
        remove_tree(admin)
        raise
    return admin


# A checkout and its git records are the reviewed code, no secret, and a root worker's jail reads them as a
# uid of its own (workers.isolation.jailuid): they are made readable whatever the worker's umask (077, for
# Jury's own files). Their place stays private: Jury's 0700 state directory, which a jail sees only its own
# way through.
SHARED_DIR = 0o755
SHARED_FILE = 0o644


def _write_shared(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(SHARED_FILE)


def _new_admin(worktrees: Path, name: str, dot_git: Path) -> Path:
    """Make the admin directory ``worktrees/<name>`` (``<name>1``, ``<name>2`` ... when taken, as git
    numbers them), taking over one whose ``gitdir`` names ``dot_git``: the record of an earlier worktree at
    the same path, whose directory is gone."""
    for i in range(1000):
        admin = worktrees / (name if i == 0 else f"{name}{i}")
        try:
            admin.mkdir()
            admin.chmod(SHARED_DIR)
            return admin
        except FileExistsError:
            try:
                stale = (admin / "gitdir").read_text(encoding="utf-8").strip() == str(dot_git)
            except (OSError, UnicodeDecodeError):
                stale = False
            if stale:
                remove_tree(admin)
                admin.mkdir()
                admin.chmod(SHARED_DIR)
                return admin
    raise GitError(["worktree", "add", str(dot_git.parent)], 1, f"no free worktree name for {name}")


def update_ref(repo: Path, ref: str, sha: str) -> None:
    """Point ``ref`` at ``sha`` (creating it if needed)."""
    _git(["update-ref", ref, sha], repo)


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything under it, directories an agent made unreadable included."""

    def retry(func: Callable[..., Any], failed: str, *_: Any) -> None:
        parent = os.path.dirname(failed)
        try:
            os.chmod(parent, 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
                shutil.rmtree(failed, ignore_errors=True)
            else:
                func(failed)
        except OSError:
            pass

    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
        return
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)


class Worktrees:
    """Checkouts under ``root``: recycled ones (up to ``pool`` per repository, removed after ``idle``
    seconds unused), else a detached worktree per name, removed after use. Git's worktree list is
    changed (add, remove, prune) only under the repository's lock."""

    def __init__(
        self,
        root: Path,
        lock_dir: Path | None = None,
        pool: int = 0,
        idle: float = 3600.0,
        recycle_in: Path | None = None,
    ) -> None:
        self.root = root
        self.lock_dir = lock_dir if lock_dir is not None else root / ".locks"
        self.pool = pool
        self.idle = idle
        # Only repositories under this directory are recycled (None: all): a host's own mirrors, never
        # a person's repository, where git would list the kept checkouts as its worktrees.
        self.recycle_in = recycle_in

    def recycles(self, repo: Path) -> bool:
        """Whether checkouts of ``repo`` are kept for the next task."""
        if self.pool <= 0:
            return False
        return self.recycle_in is None or repo.resolve().is_relative_to(self.recycle_in.resolve())

    def clear(self, repo: Path, path: Path) -> None:
        """Remove the checkout at ``path`` whatever state it is in: git's worktree, a directory git no
        longer knows, and git's record of either. Idempotent. The caller holds ``repo_lock(repo,
        self.lock_dir)``: git's worktree list is per repository, and another add or prune must not run
        between the removal and the prune."""
        if os.path.lexists(path):
            _git(["worktree", "remove", "--force", "--force", str(path)], repo, check=False)
            if not os.path.lexists(path):
                return  # git removed the directory and its record: nothing left to prune
        remove_tree(path)
        _git(["worktree", "prune"], repo, check=False)

    def _add(self, repo: Path, path: Path, sha: str) -> Path:
        """A fresh detached worktree of ``sha`` at ``path`` (whatever was there removed); its admin dir."""
        with repo_lock(repo, self.lock_dir):
            if os.path.lexists(path):
                log.warning("worktree.stale", repo=str(repo), path=str(path))
                self.clear(repo, path)
            return add_worktree(repo, path, sha)

    def _remove(self, repo: Path, path: Path, admin: Path) -> None:
        """Remove the worktree Jury made at ``path`` and its record ``admin`` (the admin directory pinned
        when it was made or taken, never one its ``.git`` link names now): what ``git worktree remove
        --force`` does, without a git process. The caller holds the repository's lock."""
        remove_tree(path)
        if admin.parent == _common_dir(str(repo.resolve())) / "worktrees":
            remove_tree(admin)
        else:  # not a record Jury made in this repository: leave it to git
            _git(["worktree", "prune"], repo, check=False)

    @contextmanager
    def checkout(self, repo: Path, sha: str, name: str) -> Iterator[Path]:
        """Yield a checkout of ``sha``, detached, exactly as a fresh one: recycled when a pooled one of
        ``repo`` is free, else ``root/<name>`` (a leftover of that name, from a crashed run, removed
        first). Whoever holds it may change it at will; a recycled one is only reset when next taken, and
        ``root/<name>`` is removed on exit, whatever happens."""
        if not name or "/" in name or name in {".", ".."} or name.startswith("."):
            raise ValueError(f"bad worktree name: {name!r}")
        private_dir(self.root)  # 0700: checkouts of code under review, and the judge's work on it
        if self.recycles(repo):
            self._evict_now_and_then()
            taken = self._take(repo, sha)
            if taken is not None:
                path, admin, fd = taken
                log.info("worktree.taken", repo=str(repo), path=str(path), sha=sha)
                try:
                    with _pinned(path, admin):
                        yield path
                finally:
                    os.utime(fd)  # last used now: the idle clock starts again
                    os.close(fd)  # closing the descriptor releases the flock
                return
        path = (self.root / name).resolve()
        admin = self._add(repo, path, sha)
        log.info("worktree.added", repo=str(repo), path=str(path), sha=sha)
        try:
            with _pinned(path, admin):
                yield path
        finally:
            with repo_lock(repo, self.lock_dir):
                self._remove(repo, path, admin)
            log.info("worktree.removed", repo=str(repo), path=str(path))

    # --- the pool ---------------------------------------------------------------------------------

    def _pool_of(self, repo: Path) -> Path:
        real = repo.resolve()
        key = hashlib.sha1(str(real).encode(), usedforsecurity=False).hexdigest()[:16]
        where = private_dir(self.root / POOL_DIR / key)
        (where / "repo").write_text(str(real))  # for the eviction of idle checkouts
        return where

    def _take(self, repo: Path, sha: str) -> tuple[Path, Path, int] | None:
        """A free pooled checkout of ``repo`` reset to ``sha``, its admin dir and the flock's descriptor
        (held until released); None when every one is taken."""
        where = self._pool_of(repo)
        for i in range(self.pool):
            fd = os.open(where / f"wt{i}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            path = where / f"wt{i}"
            try:
                admin = self._reset(repo, path, sha)
                if admin is None:
                    admin = self._add(repo, path, sha)
                return path, admin, fd
            except BaseException:
                os.close(fd)
                raise
        return None

    def _reset(self, repo: Path, path: Path, sha: str) -> Path | None:
        """Make the pooled checkout at ``path`` a clean checkout of ``sha``; its admin dir, or None when it
        cannot be (missing, a link Jury did not make, git failed): then it is to be made afresh."""
        if not path.is_dir() or path.is_symlink():
            return None
        admin = genuine_link(path, repo)
        if admin is None:
            log.warning("worktree.link_replaced", repo=str(repo), path=str(path))
            return None
        env = {"GIT_DIR": str(admin), "GIT_WORK_TREE": str(path)}
        try:
            _git(["reset", "--hard", "--quiet", "--no-recurse-submodules", sha], path, env=env)
            _git(["clean", "-ffdxq"], path, env=env)
        except GitError as exc:
            log.warning("worktree.reset_failed", repo=str(repo), path=str(path), error=str(exc))
            return None
        return admin

    def _evict_now_and_then(self) -> None:
        """``evict_idle``, at most once a minute per root in this process."""
        now, key = time.time(), str(self.root.resolve())
        if now - _LAST_EVICTION.get(key, 0.0) >= EVICT_EVERY:
            _LAST_EVICTION[key] = now
            self.evict_idle()

    def evict_idle(self) -> None:
        """Remove the pooled checkouts (of any repository) nobody took for ``idle`` seconds."""
        now = time.time()
        for lock in sorted((self.root / POOL_DIR).glob("*/wt*.lock")):
            try:
                if now - lock.stat().st_mtime < self.idle:
                    continue
                fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                repo = Path((lock.parent / "repo").read_text().strip())
                path = lock.with_suffix("")
                if repo.is_dir():
                    with repo_lock(repo, self.lock_dir):
                        self.clear(repo, path)
                else:
                    remove_tree(path)
                lock.unlink(missing_ok=True)
                log.info("worktree.evicted", repo=str(repo), path=str(path))
            except OSError as exc:
                log.warning("worktree.evict_failed", lock=str(lock), error=str(exc))
            finally:
                os.close(fd)


_LAST_EVICTION: dict[str, float] = {}  # Worktrees.root -> when this process last looked for idle ones


def host_worktrees(settings: Settings) -> Worktrees:
    """This host's checkouts: under ``JURY_DIR/worktrees``; those of its own repositories (the mirrors of
    PRs' repositories, under ``JURY_DIR``) recycled as ``JURY_WORKTREE_POOL`` says."""
    return Worktrees(
        settings.dir / "worktrees",
        pool=settings.worktree_pool,
        idle=settings.worktree_idle,
        recycle_in=settings.dir,
    )


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
