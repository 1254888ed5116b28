"""The sandbox: what a process that runs the reviewed code (or an agent reading it) may see and do.

The code under review is hostile: its tests, its ``conftest.py``, whatever an agent runs while reading it.
Every such process runs under bubblewrap (``bwrap``), built here from a ``Jail``:

- a root worker's jail runs as a uid of its own (``workers.isolation.jailuid``), any other in a new user
namespace;
  new pid, ipc, uts, cgroup namespaces, and network unless the jail has it (agents; code runs: an option);
- the root filesystem read-only; a private ``/tmp`` and ``/run`` (no host sockets), an empty private HOME
  (over the real HOME's path) holding only the jail's ``state_dirs``; each a tmpfs of ``tmp_mb``;
- the worktree read-write (or read-only: a reviewer's, enforced by the kernel), bound after the HOME
  tmpfs since worktrees may live under HOME; the worktree's git directories read-only after it, so a
  ``conftest.py`` cannot plant a ``filter`` in the repository's ``config`` that Jury's own git would run,
  and its ``.git`` link read-only too, so it cannot point Jury's git at a repository of its own making;
- ``--die-with-parent`` and a pid namespace: when Jury kills bwrap (timeout, cancel) the whole namespace
  dies, ``setsid`` grandchildren included; ``--new-session`` keeps the terminal out of reach;
- all capabilities dropped; resource limits (address space, processes, file size) set before bwrap
  starts, by util-linux's ``prlimit`` exec'ing it (``through_prlimit``; a ``preexec_fn`` where it is missing);
- an allow-listed environment: PATH, LANG, LC_*, TZ, TERM, the private HOME, the jail's ``env``, then
  the values of ``env_pass`` from the worker's environment; never the worker's own environment. It is
  handed to bwrap through exec, not as ``--setenv`` arguments, so a secret in ``env_pass`` never shows
  in a process listing.

``sandbox_problem(settings)`` is None when the sandbox works on this machine (it runs ``true`` under a
probe jail once per process and settings), else the reason; ``require_sandbox`` raises
``SandboxUnavailable`` with it, and the job that needed the sandbox ends the run ``human``. With
``[sandbox] mode = "none"`` nothing is confined, but the environment is still the allow-list.
"""

from __future__ import annotations

import os
import pwd
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import structlog

from orchestrator import domain as domain_module
from orchestrator.errors import JuryError
from orchestrator.spec import SandboxSettings
from workers.isolation import jailuid
from workers.isolation.jail_egress import EgressMounts, egress_args
from workers.isolation.rlimits import MIB, set_limits, through_prlimit
from workers.isolation.worktree import git_dirs

log = structlog.get_logger()

BWRAP_ENV = "JURY_BWRAP"  # overrides the bwrap binary (tests: a missing one)
INSTALL_HINT = "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
ALLOWED_ENV: tuple[str, ...] = ("PATH", "LANG", "TZ", "TERM")  # plus every LC_*
PROBE_SECONDS = 20.0
# Kept only when the worker runs as root: a process that maps uid 0 of its parent namespace into a new
# user namespace needs CAP_SETFCAP there (Linux 5.12+), so without it an agent that sandboxes itself with
# bubblewrap (codex) cannot start its own sandbox inside Jury's. See ``Jail.nested``.
NESTED_CAP = "CAP_SETFCAP"
RO_PATHS_ENV = "JURY_SANDBOX_RO_PATHS"  # more read-only paths, from the worker's environment
# Jury's own code, always visible read-only: the demo's scripted agents are files of the package.
JURY_PACKAGES: tuple[Path, ...] = (
    Path(__file__).resolve().parent,
    Path(domain_module.__file__).resolve().parent,
)


class SandboxUnavailable(JuryError):
    """The sandbox is required (``[sandbox] mode = "bwrap"``) and cannot run here; the reason says why."""


@dataclass(frozen=True)
class Jail:
    """One confined run. ``worktree`` is the only tree it may write (unless ``writable`` is False)."""

    worktree: Path
    settings: SandboxSettings = field(default_factory=SandboxSettings)
    writable: bool = True
    network: bool | None = None  # None: the settings' ``network`` (code runs); agents pass True
    git_dirs: tuple[Path, ...] = ()  # mounted read-only: the worktree's git admin and common dirs
    state_dirs: tuple[str, ...] = ()  # bound read-write: "~/.codex", "/abs", "$CODEX_HOME" (env's dir)
    ro_paths: tuple[Path, ...] = ()  # extra host paths visible read-only (beyond the read-only root)
    rw_paths: tuple[Path, ...] = ()  # extra host directories writable inside (a verification's reports)
    env: Mapping[str, str] = field(default_factory=dict)  # set inside, after the allow-list
    env_pass: tuple[str, ...] = ()  # names whose values pass from the worker's environment
    limits: bool = True  # memory / processes / file size from ``settings`` (code runs; agents: False)
    # The process may start its own user namespaces (an agent with its own bubblewrap, e.g. codex). Only
    # matters when the worker is root; it keeps CAP_SETFCAP inside the sandbox's own user namespace.
    nested: bool = False
    egress: EgressMounts | None = None  # set: no network but the egress proxy (``egress_args``)

    @property
    def confined(self) -> bool:
        return self.settings.mode == "bwrap"

    @property
    def has_network(self) -> bool:
        if self.egress is not None:
            return False
        return self.settings.network if self.network is None else self.network

    @property
    def tree_read_only(self) -> bool:
        """Whether nothing run in the jail can write its worktree: confined, the worktree bound read-only
        (the kernel refuses every write; a mount namespace the process makes inside cannot lift that flag)
        and no writable path bound inside it."""
        worktree = self.worktree.resolve()
        inside = any(p.resolve().is_relative_to(worktree) for p in self.rw_paths)  # the tree itself too
        return self.confined and not self.writable and not inside


@dataclass(frozen=True)
class Confined:
    """What ``run_supervised`` executes for a jailed command: the argv, its environment, its limits."""

    argv: list[str]
    env: dict[str, str]
    limits: tuple[tuple[int, int], ...]  # (resource.RLIMIT_*, value) left to set in the child before exec
    # bwrap's --die-with-parent is in the argv: it kills the sandbox when the worker dies, so the worker
    # need not arm PR_SET_PDEATHSIG itself (which takes a preexec_fn, see run_supervised)
    dies_with_parent: bool = False
    uid: int | None = (
        None  # the jail's own uid on the host (``workers.isolation.jailuid``); None: the worker's
    )
    # To call once the command and all it started are dead: gives the jail's trees back, frees its uid.
    release: Callable[[], None] | None = None


# --- the pieces -----------------------------------------------------------------------------------


def bwrap_binary(environ: Mapping[str, str] | None = None) -> str | None:
    """The bwrap to run: ``$JURY_BWRAP`` when set (a path or a name on PATH), else ``bwrap`` on PATH."""
    env = os.environ if environ is None else environ
    wanted = env.get(BWRAP_ENV) or "bwrap"
    if os.sep in wanted:
        return wanted if os.path.isfile(wanted) and os.access(wanted, os.X_OK) else None
    key = (wanted, os.environ.get("PATH", ""))  # what shutil.which searches
    found = _FOUND_ON_PATH.get(key) or shutil.which(wanted)
    if found is not None:  # asked before every sandboxed command: a program found stays found
        _FOUND_ON_PATH[key] = found
    return found


_FOUND_ON_PATH: dict[tuple[str, str], str] = {}


def real_home(base_env: Mapping[str, str]) -> Path:
    """The worker's HOME: ``$HOME`` in ``base_env`` when absolute, else the passwd entry's."""
    home = base_env.get("HOME", "")
    if not os.path.isabs(home):
        home = pwd.getpwuid(os.getuid()).pw_dir
    return Path(os.path.normpath(home))


def private_home(base_env: Mapping[str, str]) -> Path:
    """Where HOME is inside: the real HOME's path (tools that wrote it into configs still find it), or
    ``/tmp/home`` when the real one is ``/`` (a tmpfs over the root would hide the system) or is no
    directory here (bwrap could not make its mount point on the read-only root)."""
    home = real_home(base_env)
    return Path("/tmp/home") if home == Path("/") or not home.is_dir() else home


def state_dir_path(entry: str, home: Path) -> Path:
    """``~/x`` expanded against ``home``, or an absolute path; ValueError for anything else, or for a path
    that is HOME itself, the root, or climbs with ``..`` (it would hand the whole HOME back)."""
    if entry.startswith("~/"):
        path = home / entry[2:]
    elif entry.startswith("/"):
        path = Path(entry)
    else:
        raise ValueError(f"state dir {entry!r} must start with '~/' or '/'")
    if ".." in path.parts or "\0" in entry:
        raise ValueError(f"state dir {entry!r} must not contain '..'")
    path = Path(os.path.normpath(path))
    if path == Path("/") or path == home or home.is_relative_to(path):
        raise ValueError(f"state dir {entry!r} would expose all of HOME")
    return path


def state_dir_paths(jail: Jail, env: Mapping[str, str], home: Path) -> list[Path]:
    """The jail's ``state_dirs`` as paths: ``$NAME`` is the directory the worker's environment names
    (``$CODEX_HOME``), left out when unset; every other entry as ``state_dir_path`` reads it."""
    jury_dir = Path(os.path.normpath(env.get("JURY_DIR") or home / ".jury"))
    paths = []
    for entry in jail.state_dirs:
        if entry.startswith("$"):
            entry = env.get(entry[1:], "")
            if not entry:
                continue
        path = state_dir_path(entry, home)
        # bound read-write, it would hand the jail other runs' worktrees and records (or a part of them)
        if path.is_relative_to(jury_dir) or jury_dir.is_relative_to(path):
            raise ValueError(f"state dir {entry!r} overlaps Jury's state directory {str(jury_dir)!r}")
        paths.append(path)
    return paths


def git_dirs_of(worktree: Path) -> tuple[Path, ...]:
    """The git directories a worktree uses: its admin dir and the repository's common dir (which holds
    ``config`` and the objects). For a checkout Jury made, the ones pinned when it was made
    (``workers.isolation.worktree``: what ran in it since cannot move them); else read from ``.git`` and
    ``commondir`` without running git in it."""
    pinned = git_dirs(worktree)
    if pinned is not None:
        return pinned
    dot_git = worktree / ".git"
    if dot_git.is_dir():
        return (dot_git.resolve(),)
    try:
        text = dot_git.read_text(encoding="utf-8").strip()
    except OSError:
        return ()
    if not text.startswith("gitdir:"):
        return ()
    admin = Path(text.removeprefix("gitdir:").strip())
    if not admin.is_absolute():
        admin = worktree / admin
    admin = admin.resolve()
    dirs = [admin]
    try:
        common = Path((admin / "commondir").read_text(encoding="utf-8").strip())
        dirs.append((common if common.is_absolute() else admin / common).resolve())
    except OSError:
        pass
    return tuple(dict.fromkeys(dirs))


def jail_env(jail: Jail, base_env: Mapping[str, str]) -> dict[str, str]:
    """The environment inside: the allow-list from ``base_env``, HOME, ``jail.env``, then ``env_pass``."""
    env = {k: v for k, v in base_env.items() if k in ALLOWED_ENV or k.startswith("LC_")}
    env["HOME"] = str(private_home(base_env) if jail.confined else real_home(base_env))
    env.update(jail.env)
    for name in jail.env_pass:
        if name in base_env:
            env[name] = base_env[name]
    return env


def _under(path: Path, root: Path) -> bool:
    return path != root and path.is_relative_to(root)


def _visible(jail: Jail, home: Path, env: Mapping[str, str]) -> list[Path]:
    """Host paths shown read-only over the private HOME, /tmp and Jury's state directory: the jail's
    ``ro_paths``, the operator's ``[sandbox] ro_paths`` and ``$JURY_SANDBOX_RO_PATHS`` (the same, for a
    worker's environment: paths separated by ``:``), Jury's own packages (the demo's scripted agents live
    there, and a checkout may sit under /tmp or HOME), and the worker's own Python installation when it
    lives there (a pyenv or a venv under HOME: verification runs the worker's interpreter). A program
    elsewhere under HOME, even on PATH, stays hidden unless listed: a half-visible toolchain (pyenv's
    shims without pyenv) fails where a hidden one lets PATH fall through to the system's."""
    operators = [state_dir_path(p, home) for p in jail.settings.ro_paths]
    operators += [Path(p) for p in env.get(RO_PATHS_ENV, "").split(os.pathsep) if os.path.isabs(p)]
    jury_dir = Path(os.path.normpath(env.get("JURY_DIR") or home / ".jury"))
    for path in operators:  # Jury's own ro_paths (a task's prompt file) may lie inside; an operator's never
        found = Path(os.path.normpath(path))
        if found.is_relative_to(jury_dir) or jury_dir.is_relative_to(found):
            raise ValueError(
                f"read-only path {str(path)!r} overlaps Jury's state directory {str(jury_dir)!r}: it would "
                "show the jail other runs' records; list paths outside it ([sandbox] ro_paths, "
                f"{RO_PATHS_ENV})"
            )
    wanted = [*jail.ro_paths, *operators, *JURY_PACKAGES]
    wanted += _hidden_interpreter(home)
    return list(dict.fromkeys(wanted))


@cache
def _hidden_interpreter(home: Path) -> tuple[Path, ...]:
    """The worker's Python installation where the sandbox would hide it (under ``home`` or /tmp), or where
    a jail's own uid could not reach it (root's pyenv under a 0700 /root: see ``jailuid.closed_ancestors``):
    fixed for the process, so resolved once."""
    prefixes = (
        Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    )
    return tuple(
        sorted(p for p in prefixes if _under(p, home) or _under(p, Path("/tmp")) or not jailuid.passable(p))
    )


@dataclass
class _Layout:
    """The sandbox's filesystem: tmpfs mounts that hide host trees, then binds (flag, source, target)."""

    hidden: list[Path]
    binds: list[tuple[str, Path, Path]]
    home: Path  # the private HOME inside (one of ``hidden``)

    def visible(self, path: str | Path) -> bool:
        """Whether the host ``path`` shows inside at the same place. (On strings: a sandboxed command asks
        it of each PATH entry, and pathlib's parsing was most of a command's start-up in Python.)"""
        where = os.path.normpath(path)
        if any(_within(where, str(dst)) for _flag, src, dst in self.binds if src == dst):
            return True
        return not any(_within(where, str(h)) for h in self.hidden)


def _within(path: str, root: str) -> bool:
    """Whether the normalized absolute ``path`` is ``root`` or lies under it."""
    return path == root or path.startswith(root if root.endswith("/") else root + "/")


def _layout(jail: Jail, env: Mapping[str, str], *, create: bool) -> _Layout:
    home, inside_home = real_home(env), private_home(env)
    binds: list[tuple[str, Path, Path]] = []
    # DNS may be a stub resolver's file under /run (systemd-resolved): agents with network need it.
    if jail.has_network:
        binds.append(("--ro-bind-try", Path("/run/systemd/resolve"), Path("/run/systemd/resolve")))
    for path in state_dir_paths(jail, env, home):
        if create:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        target = inside_home / path.relative_to(home) if _under(path, home) else path.resolve()
        binds.append(("--bind", path.resolve(), target))
    binds += [("--ro-bind-try", p, p) for p in _visible(jail, home, env)]
    worktree = jail.worktree.resolve()
    binds.append(("--bind" if jail.writable else "--ro-bind", worktree, worktree))
    # The worktree's link to its repository, read-only even where the worktree is writable: code that
    # replaced it (``rm .git; git init``, a config naming a filter) would choose the repository, and the
    # config, that Jury's own git reads in this checkout afterwards.
    dot_git = worktree / ".git"
    if jail.writable and not dot_git.is_symlink() and (dot_git.is_file() or dot_git.is_dir()):
        binds.append(("--ro-bind", dot_git, dot_git))
    binds += [("--bind", p.resolve(), p.resolve()) for p in jail.rw_paths]
    binds += [("--ro-bind", d, d) for d in jail.git_dirs]
    hidden = [Path("/tmp"), Path("/run"), inside_home, *_jury_dirs(env)]
    return _Layout(hidden=hidden, binds=binds, home=inside_home)


def _jury_dirs(env: Mapping[str, str]) -> list[Path]:
    """Jury's own state directory (``$JURY_DIR``) when it lies outside HOME: it holds other runs'
    worktrees and records and the embedded Redis's socket, which code in one run must never reach. The
    run's own worktree, bound after it, shows through."""
    value = env.get("JURY_DIR", "")
    if not os.path.isabs(value):
        return []
    path = Path(os.path.normpath(value))
    return [path] if path.is_dir() and path != Path("/") else []


def bwrap_argv(
    jail: Jail,
    argv: list[str],
    cwd: Path,
    *,
    base_env: Mapping[str, str] | None = None,
    bwrap: str = "bwrap",
    layout: _Layout | None = None,
    drop_to: list[str] | None = None,
) -> list[str]:
    """The bwrap command line that runs ``argv`` in ``cwd`` inside ``jail`` (the environment is separate:
    ``jail_env``). Creates missing state directories on the host (unless ``layout``, the jail's, was made
    already). ValueError for a bad state dir.

    With ``drop_to`` (``jailuid.setpriv_argv``: a root worker's jail under a uid of its own) bwrap runs
    as root in no user namespace, keeps only what setpriv needs to change uid, and runs the command
    through that prefix; its private tmpfs mounts are then open to that uid (/tmp and HOME sticky and
    world-writable: nobody but it and root is inside)."""
    if layout is None:
        layout = _layout(jail, os.environ if base_env is None else base_env, create=True)
    out = [bwrap]
    if drop_to is None:
        out.append("--unshare-user")  # as root (on the host) the jail's uid is what confines it instead
    out += [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    if not jail.has_network:
        out.append("--unshare-net")
    out += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if drop_to is not None:
        for cap in jailuid.SETPRIV_CAPS:  # setpriv's, for changing uid; it drops them with it
            out += ["--cap-add", cap]
    elif jail.nested and os.geteuid() == 0:
        out += ["--cap-add", NESTED_CAP]
    out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    size = ["--size", str(jail.settings.tmp_mb * MIB)] if jailuid.sizes_tmpfs(bwrap) else []
    targets = [dst for _flag, _src, dst in layout.binds]
    closed = jailuid.closed_ancestors(targets, layout.hidden) if drop_to is not None else []
    for hidden in [*closed, *layout.hidden]:  # closed dirs, /tmp, /run (no host sockets), HOME; sized
        if drop_to is not None and hidden in (Path("/tmp"), layout.home):
            out += ["--perms", "1777"]
        out += [*size, "--tmpfs", str(hidden)]
    for way in jailuid.ways_in_tmpfs(targets, [*closed, *layout.hidden]) if drop_to is not None else []:
        out += ["--perms", "0755", "--dir", str(way)]  # bwrap would make them 0700: root's only
    for flag, src, dst in layout.binds:  # the worktree after HOME (it may live there), git dirs after it
        out += [flag, str(src), str(dst)]
    out += egress_args(jail.egress)
    out += ["--chdir", str(cwd.resolve()), "--", *(drop_to or []), *argv]
    return out


def program_visible(
    jail: Jail, argv0: str, cwd: Path, base_env: Mapping[str, str], layout: _Layout | None = None
) -> bool:
    """Whether ``argv0`` names an executable the jailed process can run: on the PATH it will have (the
    parts of it the sandbox shows) or, with a ``/``, relative to ``cwd``. Lets a missing program be a
    start error, as it is outside, instead of bwrap's own exit 1."""
    if layout is None:
        layout = _layout(jail, base_env, create=False)

    def runnable(p: str) -> bool:
        return (
            os.path.isfile(p)
            and os.access(p, os.X_OK)
            and layout.visible(os.path.abspath(p))
            and layout.visible(os.path.realpath(p))
        )

    if "/" in argv0:
        return runnable(os.path.join(cwd, argv0))
    path = jail_env(jail, base_env).get("PATH", os.defpath)
    return any(runnable(os.path.join(d, argv0)) for d in path.split(os.pathsep) if d)


def limits_of(jail: Jail, own_uid: bool = False) -> tuple[tuple[int, int], ...]:
    """The rlimits of a code run: address space, processes and the size of one file, from the settings;
    of an agent's jail under a uid of its own (``own_uid``), the processes only.

    RLIMIT_NPROC counts the processes (threads) of the real uid and is not enforced for root (or any
    process with CAP_SYS_RESOURCE / CAP_SYS_ADMIN in the initial namespace): a root worker's jail runs
    under a uid of its own (``workers.isolation.jailuid``), which no other process has, so it counts exactly
    the jail's. Without one (a worker that is not root: its own uid) it counts all of that user's processes.
    """
    s = jail.settings
    if not jail.limits:
        return ((resource.RLIMIT_NPROC, s.max_procs),) if own_uid else ()
    return (
        (resource.RLIMIT_AS, s.memory_mb * MIB),
        (resource.RLIMIT_NPROC, s.max_procs),
        (resource.RLIMIT_FSIZE, s.max_file_mb * MIB),
    )


def confine(jail: Jail, argv: list[str], cwd: Path, base_env: Mapping[str, str]) -> Confined:
    """``argv`` as it runs in ``jail``: under bwrap (mode bwrap) or as is (mode none), always with the
    allow-listed environment and the jail's limits. ``SandboxUnavailable`` when bwrap cannot run here.

    A root worker's jail runs under a uid of its own (``workers.isolation.jailuid``): claimed here, its
    writable trees handed to it; the caller calls ``Confined.release`` once the command is dead."""
    env = jail_env(jail, base_env)
    if not jail.confined:
        return Confined(argv=list(argv), env=env, limits=limits_of(jail))
    require_sandbox(jail.settings)
    binary = bwrap_binary()
    assert binary is not None  # require_sandbox found it
    layout = _layout(jail, base_env, create=True)
    if argv and not program_visible(jail, argv[0], cwd, base_env, layout):
        raise FileNotFoundError(2, "no such program in the sandbox", argv[0])
    if not jailuid.switches_uid(jail.settings):
        command = bwrap_argv(jail, argv, cwd, base_env=base_env, bwrap=binary, layout=layout)
        confined, left = through_prlimit(command, limits_of(jail))
        return Confined(argv=confined, env=env, limits=left, dies_with_parent=True)
    return _confine_as_own_uid(jail, argv, cwd, base_env, env, binary, layout)


def _confine_as_own_uid(
    jail: Jail,
    argv: list[str],
    cwd: Path,
    base_env: Mapping[str, str],
    env: dict[str, str],
    binary: str,
    layout: _Layout,
) -> Confined:
    """``confine`` for a root worker: claim a uid, hand it the writable trees, drop to it in bwrap."""
    setpriv = jailuid.setpriv_binary()
    if setpriv is None:
        raise SandboxUnavailable(jailuid.SETPRIV_HINT)
    home = real_home(base_env)
    states = state_dir_paths(jail, base_env, home)
    owned = [p.resolve() for p in jail.rw_paths]
    if jail.writable:
        owned.insert(0, jail.worktree.resolve())
    owned += [p for p in jail.ro_paths if jailuid.private_file(p)]  # the jail's own inputs (a prompt file)
    gid = jail.settings.state_gid
    try:
        claim = jailuid.claim(jail.settings)
    except jailuid.NoJailUid as exc:
        raise SandboxUnavailable(str(exc)) from exc

    def release() -> None:
        left = jailuid.reap(claim.uid)
        if left:  # never reached in practice: keep the uid held (and its trees its) rather than share it
            log.error("sandbox.jail_survived", uid=claim.uid, pids=left[:20])
            return
        try:
            jailuid.take_back(owned, claim.uid)
            jailuid.take_back_state(states, claim.uid, gid)
        finally:
            claim.release()

    try:
        jailuid.share_state(states, claim.uid, gid, jailuid.uid_range(jail.settings))
        jailuid.hand_over(owned, claim.uid)
        low_ports = jail.egress is not None and jail.egress.low_ports
        drop = jailuid.setpriv_argv(setpriv, claim.uid, [gid] if states else [], bind_low_ports=low_ports)
        command = bwrap_argv(jail, argv, cwd, base_env=base_env, bwrap=binary, layout=layout, drop_to=drop)
    except BaseException:
        release()
        raise
    confined, left = through_prlimit(command, limits_of(jail, own_uid=True))
    # Jury's checkouts are root's: git in the jail, as another uid, would refuse them as "dubious".
    env = {**env, **jailuid.SAFE_DIRECTORY_ENV} if "GIT_CONFIG_COUNT" not in env else env
    return Confined(
        argv=confined, env=env, limits=left, dies_with_parent=True, uid=claim.uid, release=release
    )


# --- is it there? ---------------------------------------------------------------------------------


def sandbox_problem(settings: SandboxSettings) -> str | None:
    """None when runs can be confined as ``settings`` ask (or ``mode`` is none); else why not."""
    if settings.mode == "none":
        return None
    binary = bwrap_binary()
    if binary is None:
        wanted = os.environ.get(BWRAP_ENV)
        return INSTALL_HINT + (f" ({BWRAP_ENV}={wanted} is not an executable)" if wanted else "")
    return _probe(binary, settings.model_dump_json())


@cache
def _probe(binary: str, settings_json: str) -> str | None:
    """Run ``true`` in a jail like a code run's (network per the settings, limits on); once per process."""
    settings = SandboxSettings.model_validate_json(settings_json)
    own_uid = jailuid.switches_uid(settings)
    setpriv = jailuid.setpriv_binary()
    if own_uid and setpriv is None:
        return jailuid.SETPRIV_HINT
    with tempfile.TemporaryDirectory(prefix="jury-probe-") as tmp:
        wt = Path(tmp)
        jail = Jail(worktree=wt, settings=settings)
        claim = None
        if own_uid and setpriv is not None:
            try:
                claim = jailuid.claim(settings)
            except jailuid.NoJailUid:
                pass  # all in use right now, by jails that run: the uid switch works here
        drop = jailuid.setpriv_argv(setpriv, claim.uid) if claim is not None and setpriv else None
        command = bwrap_argv(jail, ["true"], wt, bwrap=binary, drop_to=drop)
        argv, left = through_prlimit(command, limits_of(jail, own_uid=claim is not None))
        apply = set_limits(left)
        try:
            p = subprocess.run(
                argv,
                env=jail_env(jail, os.environ),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_SECONDS,
                preexec_fn=apply,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap ({binary}) cannot run: {exc}"
        finally:
            if claim is not None:
                jailuid.reap(claim.uid)
                claim.release()
    if p.returncode == 0:
        log.info("sandbox.ok", bwrap=binary)
        return None
    err = p.stderr.decode("utf-8", errors="replace").strip()[-500:] or f"exit {p.returncode}"
    why = f"bubblewrap ({binary}) cannot create its sandbox here: {err}"
    if "namespace" in err.lower() or "permitted" in err.lower():
        why += " (are unprivileged user namespaces disabled? see kernel.unprivileged_userns_clone)"
    log.warning("sandbox.unavailable", bwrap=binary, reason=why)
    return why


def require_sandbox(settings: SandboxSettings) -> None:
    """Raise ``SandboxUnavailable`` when ``sandbox_problem`` names a problem."""
    problem = sandbox_problem(settings)
    if problem is not None:
        raise SandboxUnavailable(problem)
