"""The jail's own uid: who a sandboxed process is on the host when the worker runs as root.

A user namespace that maps root to some other id changes nothing on the host: the process is still uid 0
there, so the host's root-only files (``/etc/shadow``), other runs' worktrees and Jury's state stay
readable, and ``RLIMIT_NPROC``, which the kernel does not enforce for root, does not stop a fork bomb.
So a worker running as root gives every jail a real unprivileged uid of its own for as long as it runs:

- ``claim`` takes one uid of ``[sandbox] uids`` (default ``60000-60999``) no account has, under an
  exclusive ``flock`` on ``LOCK_DIR/<uid>.lock`` held until the jail ends: two jails on one host, in any
  worker processes, never share a uid, so ``RLIMIT_NPROC`` (counted per real uid) counts one jail only;
- ``hand_over`` gives the jail's writable trees (a judge's or a code run's worktree, a verification's
  report directory) to that uid before it starts, and ``take_back`` returns them to the worker after it
  ended (every process of the jail is dead then: its pid namespace died with bwrap), clearing any set-uid
  or set-gid bit the jail left on a file;
- an agent's HOME state directories (``~/.codex``), shared by every jail of that agent and possibly used
  by several at once, are given to the jail's uid where nobody running holds them, and to the group
  ``[sandbox] state_gid`` (``share_state``): group read-write, set-gid directories, and the jail runs with
  that group as its only supplementary group, so what a jail running beside it owns stays reachable.

bwrap still sets up the sandbox as root (its mounts reach every path it binds); the command is then
started through util-linux's ``setpriv``, which drops to the uid, its own group, no capabilities, an empty
bounding set and ``no_new_privs`` (``setpriv_argv``). A worker that is not root cannot switch uids: its
jails keep running as its own user in a user namespace, as before, and ``jury doctor`` says so.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pwd
import random
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import structlog

from orchestrator.errors import JuryError
from orchestrator.spec import SandboxSettings

log = structlog.get_logger()

REAP_SECONDS = 10.0
LOCK_DIR = Path("/run/jury/jail-uids")  # host-wide: every Jury on the host draws from the same uids
SETPRIV_HINT = 'setpriv (util-linux) is missing: apt-get install util-linux, or [sandbox] uids = ""'
# What the dropped process keeps: nothing. The bounding set emptied (needs CAP_SETPCAP, which bwrap keeps
# for setpriv and setpriv then drops), no inheritable capabilities, and no_new_privs so that no set-uid
# program can give any back.
SETPRIV_DROP = ("--inh-caps=-all", "--bounding-set=-all", "--no-new-privs")
# What bwrap keeps for setpriv, which drops them with the uid; and CAP_DAC_READ_SEARCH for bwrap's own
# chdir into a worktree that is the jail's uid's now (mode 0700, say), which root may not enter without it.
SETPRIV_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_READ_SEARCH")

# git's configuration from the environment (command-line scope, which may set safe.directory): git run in
# a jail under its own uid trusts the checkouts there, which root owns (and a judge's, the jail's uid).
SAFE_DIRECTORY_ENV = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "safe.directory",
    "GIT_CONFIG_VALUE_0": "*",
}


class NoJailUid(JuryError):
    """Every uid of ``[sandbox] uids`` is taken by a running jail (or an account)."""


def uid_range(settings: SandboxSettings) -> range:
    """The uids of ``[sandbox] uids`` (``"A-B"``, both included); empty for ``""``."""
    if not settings.uids:
        return range(0)
    first, last = (int(part) for part in settings.uids.split("-"))
    return range(first, last + 1)


def switches_uid(settings: SandboxSettings) -> bool:
    """Whether jails run under a uid of their own here: a confined sandbox, a root worker, a uid range."""
    return settings.mode == "bwrap" and os.geteuid() == 0 and bool(settings.uids)


@cache
def setpriv_binary() -> str | None:
    """util-linux's ``setpriv``, from the system's own directories only (never the worker's PATH)."""
    return shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


@dataclass
class UidClaim:
    """One uid held for one jail, until ``release`` (closing the lock file releases the flock)."""

    uid: int
    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def claim(settings: SandboxSettings, lock_dir: Path = LOCK_DIR) -> UidClaim:
    """A uid of ``[sandbox] uids`` that no running jail holds and no account has, held until released.

    The search starts at a random uid so that workers starting together rarely try the same lock first.
    ``NoJailUid`` when all are held."""
    uids = uid_range(settings)
    lock_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    start = random.randrange(len(uids)) if uids else 0
    for i in range(len(uids)):
        uid = uids[(start + i) % len(uids)]
        if _has_account(uid):
            continue
        fd = os.open(lock_dir / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                continue
            raise
        return UidClaim(uid=uid, fd=fd)
    raise NoJailUid(
        f"every jail uid of [sandbox] uids = {settings.uids!r} is in use: widen the range, or run fewer "
        "jails at once"
    )


def setpriv_argv(
    setpriv: str, uid: int, groups: Iterable[int] = (), *, bind_low_ports: bool = False
) -> list[str]:
    """The prefix that runs a command as ``uid`` (its own gid, only ``groups`` besides), with nothing
    that could make it root again.

    ``bind_low_ports`` keeps CAP_NET_BIND_SERVICE alone (ambient, and the only one in the bounding set):
    the egress shim's forwarders listen below port 1024 for a listed ``host:443``
    (``workers.isolation.egress``). It reaches only the jail's own network namespace, where nothing but those
    forwarders and the agent's own listeners live, so the uid gains no way out with it."""
    wanted = sorted(set(groups))
    group_args = ["--groups", ",".join(map(str, wanted))] if wanted else ["--clear-groups"]
    drop = list(SETPRIV_DROP)
    if bind_low_ports:
        drop = [f"{arg},+net_bind_service" if arg.endswith("=-all") else arg for arg in drop]
        drop.append("--ambient-caps=+net_bind_service")
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", *group_args, *drop, "--"]


def passable(path: Path) -> bool:
    """Whether every directory on the way to ``path`` lets any user pass (others' search bit)."""
    try:
        return all(a.stat().st_mode & stat.S_IXOTH for a in path.parents)
    except OSError:
        return False


def private_file(path: Path) -> bool:
    """Whether ``path`` is a regular file others may not read (the jail's uid could not, bound as is)."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and not st.st_mode & stat.S_IROTH


def closed_ancestors(targets: Iterable[Path], hidden: list[Path]) -> list[Path]:
    """The host directories a jail's uid could not pass on the way to the bind ``targets`` (root's 0700
    HOME holding the worker's pyenv, Jury's 0700 state directory), outermost first: each is hidden by
    an empty tmpfs, in which bwrap makes the way to the binds. Nothing is lost: the uid could not see into
    them anyway. Ways that lie in one of the ``hidden`` trees (tmpfs mounts already) need none."""
    closed: set[Path] = set()
    for target in targets:
        for ancestor in reversed(target.parents):
            if any(ancestor.is_relative_to(h) for h in [*hidden, *closed]):
                break
            try:
                mode = ancestor.stat().st_mode
            except OSError:
                break  # missing: bwrap makes it, in whatever holds it
            if not mode & stat.S_IXOTH:
                closed.add(ancestor)
                break
    return sorted(closed, key=lambda p: len(p.parts))


def ways_in_tmpfs(targets: Iterable[Path], tops: list[Path]) -> list[Path]:
    """The directories on the way to each of ``targets`` that lie in one of the tmpfs mounts ``tops``
    (below its top), outermost first: made explicitly, 0755, so that the jail's uid may pass them (bwrap
    makes them 0700 when it runs as root)."""
    ways: set[Path] = set()
    for target in targets:
        for ancestor in target.parents:
            if any(ancestor != top and ancestor.is_relative_to(top) for top in tops):
                ways.add(ancestor)
    return sorted(ways, key=lambda p: (len(p.parts), str(p)))


@cache
def sizes_tmpfs(bwrap: str) -> bool:
    """Whether this bwrap takes ``--size`` (0.8 and later do): older ones make unsized tmpfs mounts, and
    ``jury doctor`` says that /tmp and HOME are not capped then."""
    try:
        p = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in p.stdout + p.stderr


def _walk(root: Path) -> Iterable[tuple[str, os.stat_result]]:
    """Every path under ``root`` (itself included), never following a symbolic link, with its lstat."""
    stack = [str(root)]
    while stack:
        path = stack.pop()
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        yield path, st
        if stat.S_ISDIR(st.st_mode):
            try:
                with os.scandir(path) as entries:
                    stack.extend(e.path for e in entries)
            except OSError as exc:
                log.warning("jail.walk_failed", path=path, error=str(exc))


def processes_of(uid: int, proc: Path = Path("/proc")) -> list[int]:
    """The pids of the processes that run as ``uid`` (by the owner of their ``/proc`` entry)."""
    found = []
    for entry in os.scandir(proc):
        if entry.name.isdigit():
            try:
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    found.append(int(entry.name))
            except OSError:
                continue  # gone meanwhile
    return found


def reap(uid: int, within: float = REAP_SECONDS) -> list[int]:
    """SIGKILL every process of the jail's ``uid`` until none is left (or ``within`` seconds passed); the
    ones still there then. bwrap's own exit leaves its pid namespace dying, not dead: its init gets
    SIGKILL from ``--die-with-parent`` an instant later, so a jail's trees are taken back, and its uid
    freed, only once this finds none (the uid is the jail's alone: nothing else is killed)."""
    deadline = time.monotonic() + within
    while True:
        left = processes_of(uid)
        if not left or time.monotonic() >= deadline:
            return left
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def hand_over(paths: Iterable[Path], uid: int) -> None:
    """Make ``uid`` (and its own gid) the owner of everything under each of ``paths``."""
    for root in paths:
        for path, st in _walk(root):
            if st.st_uid != uid or st.st_gid != uid:
                os.lchown(path, uid, uid)


def take_back(paths: Iterable[Path], uid: int) -> None:
    """Give everything under ``paths`` back to the worker (its euid and egid), and clear every set-uid or
    set-gid bit on a file there: a jail must not leave a program that runs as someone else. Only called
    once every process of the jail is dead."""
    owner, group = os.geteuid(), os.getegid()
    for root in paths:
        for path, st in _walk(root):
            if st.st_uid != owner or st.st_gid != group:
                os.lchown(path, owner, group)
            if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
    log.debug("jail.taken_back", uid=uid, paths=[str(p) for p in paths])


def share_state(paths: Iterable[Path], uid: int, gid: int, uids: range) -> None:
    """Give the jail's uid the state directories ``paths`` (an agent's ``~/.codex``): what the worker owns
    there, or a jail that no longer runs, becomes ``uid``'s, group ``gid``, read-write for the group, its
    directories set-gid. Agents chmod and rename their own files there, which takes owning them; what a
    jail that runs now owns stays its own, and this one reaches it through the group.
    ``take_back_state`` returns what ``uid`` holds to the worker afterwards."""
    held: dict[int, bool] = {}
    for root in paths:
        for path, st in _walk(root):
            owner = st.st_uid
            if owner == os.geteuid() or (owner in uids and owner != uid and not _in_use(owner, held)):
                owner = uid
            if (owner, gid) != (st.st_uid, st.st_gid):
                os.lchown(path, owner, gid)
            if not stat.S_ISLNK(st.st_mode):
                _group_rw(path, st)


def take_back_state(paths: Iterable[Path], uid: int, gid: int) -> None:
    """What ``uid`` owns in the state directories ``paths`` goes back to the worker, group ``gid``."""
    for root in paths:
        for path, st in _walk(root):
            if st.st_uid == uid:
                os.lchown(path, os.geteuid(), gid)
            if not stat.S_ISLNK(st.st_mode):
                _group_rw(path, st)


def _group_rw(path: str, st: os.stat_result) -> None:
    """Group read-write (and search, set-gid for a directory), no set-uid or set-gid program."""
    mode = stat.S_IMODE(st.st_mode)
    wanted = mode | stat.S_IRGRP | stat.S_IWGRP
    if stat.S_ISDIR(st.st_mode):
        wanted |= stat.S_IXGRP | stat.S_ISGID
    else:
        wanted |= stat.S_IXGRP if mode & stat.S_IXUSR else 0
        wanted &= ~stat.S_ISGID
    wanted &= ~stat.S_ISUID
    if wanted != mode or st.st_mode & stat.S_ISUID:
        os.chmod(path, wanted)


def _in_use(uid: int, seen: dict[int, bool], lock_dir: Path = LOCK_DIR) -> bool:
    """Whether a running jail holds ``uid`` (its lock is taken); asked once per uid and walk."""
    if uid not in seen:
        fd = os.open(lock_dir / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen[uid] = False
        except OSError:
            seen[uid] = True
        finally:
            os.close(fd)
    return seen[uid]
