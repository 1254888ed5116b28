"""Running one agent process under supervision: scrubbed environment, own process group, hard limits.

The contract (REFERENCE §1, §4): stdin is closed, stdout/stderr go straight to files (readable while the
agent runs), the agent leads its own process group, and when it ends — normally, by timeout or by
cancellation — the whole group is SIGKILLed so no child outlives it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger()

SECRET_NAME_RE = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH|SESSION|COOKIE|PRIVATE", re.IGNORECASE
)

# Variables that inject code into the agent's interpreter or loader (dynamic linker, Python, Node, shells,
# Perl, Ruby): an agent must run the program it was configured with, nothing slipped in ahead of it.
PRELOAD_VARS: frozenset[str] = frozenset(
    {
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "NODE_OPTIONS",
        "BASH_ENV",
        "ENV",
        "PERL5OPT",
        "RUBYOPT",
    }
)

POLL_SECONDS = 0.1


def scrub_env(
    base: Mapping[str, str],
    *,
    env_pass: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A copy of ``base`` fit for an agent.

    Drops secret-looking names (``SECRET_NAME_RE``) and ``PRELOAD_VARS`` unless listed in ``env_pass``,
    drops every ``JURY_*`` variable (Jury's own settings, e.g. the broker URL) unconditionally, then adds
    ``extra`` (which wins over everything).
    """
    keep = set(env_pass)
    out: dict[str, str] = {}
    for name, value in base.items():
        if name.upper().startswith("JURY_"):
            continue
        if name not in keep and (SECRET_NAME_RE.search(name) or name in PRELOAD_VARS):
            continue
        out[name] = value
    if extra:
        out.update(extra)
    return out


@dataclass
class ProcResult:
    """How a supervised process ended. ``error`` is set when it could not be started at all."""

    exit_code: int | None
    timed_out: bool
    cancelled: bool
    seconds: float
    stdout_path: Path
    stderr_path: Path
    stdout_bytes: int
    stderr_bytes: int
    error: str | None = None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _killpg(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _leader_exited(pid: int) -> bool:
    """True once the leader has exited; it is left unreaped so its pgid cannot be reused yet."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and info.si_pid == pid


def _wait_leader(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if _leader_exited(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))


def _start_error(exc: OSError, argv: list[str], cwd: Path) -> str:
    if isinstance(exc, FileNotFoundError | NotADirectoryError) and exc.filename == str(cwd):
        return f"working directory not found: {cwd}"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {argv[0]}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {argv[0]}"
    return f"cannot start {argv[0]}: {exc}"


def run_supervised(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    stdout_path: Path,
    stderr_path: Path,
    timeout: float,
    grace: float = 5.0,
    tick_every: float = 30.0,
    on_tick: Callable[[float, float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> ProcResult:
    """Run ``argv`` to completion, timeout or cancellation; never raises for a missing executable.

    ``on_tick(seconds, quiet_seconds)`` is called every ``tick_every`` seconds (quiet: since either output
    file last grew). ``should_stop()`` returning True cancels. Timeout and cancel both send SIGTERM to the
    group, wait up to ``grace`` for the leader, then SIGKILL; the group is always SIGKILLed at the end.
    """
    if not argv:
        raise ValueError("empty argv")
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    stderr_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            error = _start_error(exc, argv, cwd)
            log.warning("proc.start_failed", argv0=argv[0], cwd=str(cwd), error=error)
            return ProcResult(
                exit_code=None,
                timed_out=False,
                cancelled=False,
                seconds=time.monotonic() - started,
                stdout_path=stdout_path,
                stderr_path=stderr_path,
                stdout_bytes=0,
                stderr_bytes=0,
                error=error,
            )
    pid = proc.pid
    log.info("proc.started", pid=pid, argv0=argv[0], cwd=str(cwd), timeout=timeout)
    timed_out = cancelled = False
    sizes = (0, 0)
    last_growth = started
    next_tick = started + tick_every
    try:
        while not _leader_exited(pid):
            now = time.monotonic()
            current = (_size(stdout_path), _size(stderr_path))
            if current != sizes:
                sizes, last_growth = current, now
            if on_tick is not None and now >= next_tick:
                next_tick = now + tick_every
                try:
                    on_tick(now - started, now - last_growth)
                except Exception:
                    log.exception("proc.tick_failed", pid=pid)
            stop = False
            if should_stop is not None:
                try:
                    stop = bool(should_stop())
                except Exception:
                    log.exception("proc.should_stop_failed", pid=pid)
            if stop or now - started >= timeout:
                cancelled, timed_out = stop, not stop
                log.warning("proc.stopping", pid=pid, reason="cancel" if stop else "timeout", grace=grace)
                _killpg(pid, signal.SIGTERM)
                if not _wait_leader(pid, grace):
                    log.warning("proc.sigkill", pid=pid)
                break
            time.sleep(POLL_SECONDS)
    finally:
        # The leader is exited but unreaped (or being killed): its pgid still names our group.
        _killpg(pid, signal.SIGKILL)
        proc.wait()
    seconds = time.monotonic() - started
    result = ProcResult(
        exit_code=proc.returncode,
        timed_out=timed_out,
        cancelled=cancelled,
        seconds=seconds,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        stdout_bytes=_size(stdout_path),
        stderr_bytes=_size(stderr_path),
    )
    log.info(
        "proc.ended",
        pid=pid,
        exit_code=result.exit_code,
        timed_out=timed_out,
        cancelled=cancelled,
        seconds=round(seconds, 3),
        stdout_bytes=result.stdout_bytes,
        stderr_bytes=result.stderr_bytes,
    )
    return result
