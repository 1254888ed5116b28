"""``jury doctor``: whether this machine can run Jury, and why not.

Each check is a ``Check`` (what, ok / failed / not tried, what was seen); ``problems`` are the failures
that stop a run: no git, a Redis that does not answer, a sandbox that cannot run with the operator's
``[sandbox]`` settings (no sandbox, no run). The sandbox is probed the way a worker probes it
(``workers.sandbox.sandbox_problem``): what doctor answers is what a worker on this machine would meet.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

import redis

from orchestrator.config import Settings
from orchestrator.domain import SandboxSettings
from orchestrator.errors import JuryError
from workers.embedded import redis_binary
from workers.sandbox import bwrap_binary, sandbox_problem

ROOT_NOTE = (
    "the worker runs as root: inside the sandbox, files root owns outside HOME stay readable "
    "(run workers as a dedicated user)"
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


def _redis(settings: Settings, report: Report) -> None:
    if settings.redis_url:
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


def diagnose(settings: Settings, sandbox: SandboxSettings) -> Report:
    """Every check, in order: git, Redis, bwrap, user namespaces, the sandbox as ``sandbox`` asks."""
    report = Report()
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
        return report
    problem = sandbox_problem(sandbox)
    shown = (
        f"works (network {'on' if sandbox.network else 'off'}, {sandbox.memory_mb} MiB, "
        f"{sandbox.max_procs} processes, files up to {sandbox.max_file_mb} MiB)"
    )
    report.add("sandbox", problem is None, problem or shown, f"sandbox unavailable: {problem}")
    if problem is None and os.geteuid() == 0:
        report.notes.append(ROOT_NOTE)
    return report
