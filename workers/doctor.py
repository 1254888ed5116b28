"""``jury doctor``: whether this machine can run Jury, and why not.

Each check is a ``Check`` (what, ok / failed / not tried, what was seen); ``problems`` are the failures
that stop a run: no git, a Redis that does not answer, a sandbox that cannot run with the operator's
``[sandbox]`` settings (no sandbox, no run). The sandbox is probed the way a worker probes it
(``workers.isolation.sandbox.sandbox_problem``): what doctor answers is what a worker on this machine would
meet.

In a container (``/.dockerenv``, ``/run/.containerenv``, or a container's cgroup of pid 1), a sandbox that
cannot start usually means the container was started without what bubblewrap needs; doctor reads what it
can see (a seccomp filter, an AppArmor profile, a masked ``/proc``, the kernel's user-namespace switches)
and says which option to change (``sandbox_hints``; docs/deployment.md).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import redis

from orchestrator.config import Settings
from orchestrator.errors import JuryError
from orchestrator.spec import SandboxSettings
from workers.isolation import jailuid
from workers.isolation.sandbox import bwrap_binary, sandbox_problem
from workers.runtime.embedded import redis_binary

ROOT_NOTE = (
    'the worker runs as root and [sandbox] uids = "": jails run as root, so files root owns outside '
    "HOME stay readable in them and max_procs does not hold (set [sandbox] uids to a range of free uids)"
)
USER_NOTE = (
    "the worker is not root (uid {uid}): jails run as its own user in a user namespace, no uid of their "
    "own; max_procs counts all of that user's processes ([sandbox] uids applies to a root worker only)"
)


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool | None  # None: not tried, or nothing to try
    text: str


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, what: str, ok: bool | None, text: str, problem: str | None = None) -> None:
        self.checks.append(Check(what, ok, text))
        if not ok and problem:
            self.problems.append(problem)


def _version(argv: list[str]) -> str | None:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (p.stdout or p.stderr).strip().splitlines()
    return lines[0] if p.returncode == 0 and lines else None


NO_PASSWORD_NOTE = (
    "JURY_REDIS_URL has no password: whoever reaches that Redis chooses what every worker runs; set "
    "requirepass on the server and put it in the URL (redis://:PASSWORD@host:6379/0)"
)
EXAMPLE_PASSWORD_NOTE = (
    "JURY_REDIS_URL's password is the example's (change-me...): set a long random one "
    '(python -c "import secrets; print(secrets.token_urlsafe(32))")'
)


def redis_password_note(url: str) -> str | None:
    """What is wrong with the password of a network Redis URL (none, or the example file's), or None.
    Never the password itself: the note names the problem only. A unix socket is guarded by its file
    mode, not a password, so it gets no note."""
    split = urlsplit(url)
    if split.scheme not in ("redis", "rediss"):
        return None
    password = unquote(split.password or "") or "".join(parse_qs(split.query).get("password", []))
    if not password:
        return NO_PASSWORD_NOTE
    return EXAMPLE_PASSWORD_NOTE if password.lower().startswith("change-me") else None


def _redis(settings: Settings, report: Report) -> None:
    if settings.redis_url:
        note = redis_password_note(settings.redis_url)
        if note is not None:
            report.notes.append(note)
        try:
            redis.Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=5).ping()
            report.add("redis", True, "JURY_REDIS_URL answers")
        except (redis.RedisError, OSError) as exc:
            why = f"the Redis of JURY_REDIS_URL does not answer: {exc}"
            report.add("redis", False, why, why)
        return
    try:
        report.add("redis", True, f"embedded: {redis_binary()}")
    except JuryError as exc:
        report.add("redis", False, str(exc), str(exc))


def _userns(bwrap: str) -> tuple[bool, str]:
    try:
        p = subprocess.run(
            [bwrap, "--unshare-user", "--ro-bind", "/", "/", "--", "true"],
            capture_output=True,
            text=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return p.returncode == 0, p.stderr.strip()[-300:]


CGROUP_RUNTIMES = re.compile(r"docker|kubepods|containerd|libpod|podman|lxc|crio")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def container(root: Path = Path("/")) -> str | None:
    """How this process shows it runs in a container (the evidence, named), or None on a host."""
    for marker, what in ((".dockerenv", "docker"), ("run/.containerenv", "podman")):
        if (root / marker).exists():
            return f"{what} (/{marker})"
    found = CGROUP_RUNTIMES.search(_read(root / "proc/1/cgroup"))
    if found:
        return f"{found.group(0)} (/proc/1/cgroup)"
    return None


def sandbox_hints(error: str = "", root: Path = Path("/"), in_container: bool = True) -> list[str]:
    """What to change so bubblewrap can start here: from its ``error`` and what this process can see of
    its own confinement. Every obstacle seen is named (fixing one only shows the next otherwise)."""
    hints: list[str] = []
    if "ENOSPC" in error or "max_*_namespaces" in error:
        hints.append(
            "the limit of user namespaces is reached here (user.max_user_namespaces, or namespaces nested "
            "too deep: a container run inside another sandbox): raise the limit on the host, run one level up"
        )
    if _read(root / "proc/sys/user/max_user_namespaces").strip() == "0":
        hints.append(
            "user namespaces are off on this kernel: on the host, sysctl -w user.max_user_namespaces=15000"
        )
    if _read(root / "proc/sys/kernel/unprivileged_userns_clone").strip() == "0":
        hints.append(
            "unprivileged user namespaces are off: on the host, sysctl -w kernel.unprivileged_userns_clone=1"
        )
    if _read(root / "proc/sys/kernel/apparmor_restrict_unprivileged_userns").strip() == "1":
        hints.append(
            "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+): on the host, sysctl -w "
            "kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap with userns"
        )
    if not in_container:
        return hints
    status = _read(root / "proc/self/status")
    if re.search(r"^Seccomp:\s*2\b", status, re.M):
        hints.append(
            "a seccomp filter is on (Docker's default lets only CAP_SYS_ADMIN create namespaces): start the "
            "container with --security-opt seccomp=unconfined, or a profile that allows clone and unshare "
            "with CLONE_NEWUSER, mount, umount2, pivot_root and setns"
        )
    profile = _read(root / "proc/self/attr/apparmor/current") or _read(root / "proc/self/attr/current")
    if profile.strip() and "unconfined" not in profile:
        hints.append(
            f"AppArmor profile {profile.strip()!r} confines this process (docker-default denies mount): "
            "start the container with --security-opt apparmor=unconfined, or a profile that allows mount"
        )
    masked = [
        line.split()[4]
        for line in _read(root / "proc/self/mountinfo").splitlines()
        if len(line.split()) > 4 and line.split()[4].startswith("/proc/")
    ]
    if masked:
        hints.append(
            f"parts of /proc are masked ({', '.join(sorted(masked)[:3])}...): bwrap mounts a fresh /proc, "
            "which the kernel refuses then; start the container with --security-opt systempaths=unconfined"
        )
    return hints


def diagnose(settings: Settings, sandbox: SandboxSettings) -> Report:
    """Every check, in order: git, Redis, bwrap, user namespaces, the sandbox as ``sandbox`` asks; in a
    container, what to change when the sandbox cannot start."""
    report = Report()
    where = container()
    report.add("container", None, f"in a container: {where}" if where else "not in a container")
    _diagnose(settings, sandbox, report)
    if where is not None and any(c.what in ("userns", "sandbox") and c.ok is False for c in report.checks):
        hints = sandbox_hints(_failure(report), in_container=True)
        report.notes += [f"in a container, to run the sandbox: {h}" for h in hints]
        if not hints:
            report.notes.append(
                "in a container, the sandbox needs user namespaces, mount and a fresh /proc: see"
                " docs/deployment.md (--security-opt seccomp=..., apparmor=unconfined,"
                " systempaths=unconfined)"
            )
    elif any(c.what == "userns" and c.ok is False for c in report.checks):
        report.notes += sandbox_hints(_failure(report), in_container=False)
    return report


def _failure(report: Report) -> str:
    return " ".join(c.text for c in report.checks if c.what in ("userns", "sandbox") and c.ok is False)


def _diagnose(settings: Settings, sandbox: SandboxSettings, report: Report) -> None:
    git = _version(["git", "--version"])
    report.add("git", git is not None, git or "not found: install git", "git is not installed")
    _redis(settings, report)
    bwrap = bwrap_binary()
    report.add(
        "bwrap",
        bwrap is not None,
        f"{bwrap} ({_version([bwrap, '--version'])})" if bwrap else "not installed",
    )
    if bwrap is None:
        report.add("userns", None, "not tried (no bwrap)")
    else:
        works, why = _userns(bwrap)
        report.add("userns", works, "user namespaces work" if works else f"unavailable: {why}")
    if sandbox.mode == "none":
        report.add("sandbox", None, 'off ([sandbox] mode = "none"): the reviewed code runs unconfined')
        return
    problem = sandbox_problem(sandbox)
    shown = (
        f"works (network {'on' if sandbox.network else 'off'}, {sandbox.memory_mb} MiB, "
        f"{sandbox.max_procs} processes, files up to {sandbox.max_file_mb} MiB)"
    )
    report.add("sandbox", problem is None, problem or shown, f"sandbox unavailable: {problem}")
    _jail_uid(sandbox, report)


def _jail_uid(sandbox: SandboxSettings, report: Report) -> None:
    """Who a jail is on the host: a uid of its own (a root worker), root, or the worker's user."""
    if os.geteuid() != 0:
        report.add("jail uid", None, f"the worker's own (uid {os.geteuid()}): not root, no uid switch")
        report.notes.append(USER_NOTE.format(uid=os.geteuid()))
        return
    if not jailuid.switches_uid(sandbox):
        report.add("jail uid", None, 'root ([sandbox] uids = "")')
        report.notes.append(ROOT_NOTE)
        return
    uids = jailuid.uid_range(sandbox)
    setpriv = jailuid.setpriv_binary()
    bwrap = bwrap_binary()
    sized = bwrap is not None and jailuid.sizes_tmpfs(bwrap)
    text = (
        f"one of {len(uids)} uids {sandbox.uids} per jail (not root), via {setpriv}; processes capped at "
        f"{sandbox.max_procs} per jail, "
        + (f"/tmp and HOME at {sandbox.tmp_mb} MiB each" if sized else "/tmp and HOME not capped")
    )
    if not sized:
        report.notes.append(
            "this bwrap has no --size: a jail's /tmp and HOME are not capped (bubblewrap 0.8+)"
        )
    report.add(
        "jail uid", setpriv is not None, text if setpriv else jailuid.SETPRIV_HINT, jailuid.SETPRIV_HINT
    )
