"""Running one agent process under supervision: own process group, hard limits, a jail's environment.

The contract (README, "Reviewing"): stdin is closed, stdout/stderr go to files (readable while the agent
runs), the agent leads its own process group, and when it ends — normally, by timeout or by
cancellation — the whole group is SIGKILLed so no child outlives it. On Linux the agent also gets
PR_SET_PDEATHSIG=SIGKILL, so it dies with the worker even if the worker is killed outright.

With ``max_output`` each stream goes through a pipe to a reader thread (``CappedOutput``) that keeps the
head and the tail of what the agent printed and drops the middle, so a runaway agent cannot fill the disk.

With a ``Jail`` (``workers.isolation.sandbox``) the command runs under bubblewrap with the jail's allow-listed
environment and resource limits; killing the group then kills bwrap, and with it the sandbox's whole pid
namespace, so even a process that left the group with ``setsid`` dies.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import structlog

from orchestrator.private_files import JAIL_UMASK
from workers.isolation.capped_output import CappedOutput
from workers.isolation.rlimits import set_limits
from workers.isolation.sandbox import Jail, SandboxUnavailable, confine

# "Must the work end now?": true once a task's lease is lost or its run cancelled (``workers.runtime.context.
# TaskInterrupt``). Passed from the coordinator to the job, its seat and every process it supervises.
Interrupted = Callable[[], bool]

log = structlog.get_logger()

POLL_SECONDS = 0.1
PR_SET_PDEATHSIG = 1


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
    stdout_dropped: int = 0
    stderr_dropped: int = 0


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


class _ExitWatch:
    """Waits for the group's leader to exit, waking the moment it does: a pidfd polled with a timeout
    (Linux 5.3+), else a plain sleep. Either way the leader stays unreaped (``_leader_exited``), and an
    agent that exits at once costs no poll period."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self.fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None

    def wait(self, seconds: float) -> None:
        """Return after ``seconds``, or as soon as the leader has exited."""
        if self.fd is None:
            time.sleep(seconds)
            return
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        poller.poll(max(0, int(seconds * 1000)))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _wait_leader(pid: int, seconds: float, watch: _ExitWatch | None = None) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if _leader_exited(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        pause = min(POLL_SECONDS, max(0.0, deadline - time.monotonic()))
        if watch is None:
            time.sleep(pause)
        else:
            watch.wait(pause)


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl  # type: ignore[no-any-return]


# Resolved once in the parent, so the forked child does as little as possible before exec.
_PRCTL = _load_prctl()


def parent_death_preexec(signum: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get ``signum`` when its parent dies (Linux), or None elsewhere.

    PDEATHSIG fires when the *thread* that forked the child exits, not the process. That is fine here:
    ``run_supervised`` forks from the calling thread and does not return until the child's whole group is
    dead, and the embedded Redis and workers are started and stopped by one ``with`` in one thread, so the
    forking thread outlives the child unless the parent process itself dies — the very case this is for.
    Only the child itself gets the signal: grandchildren do not inherit it (they stay in the child's
    process group, which is what the normal path kills). preexec_fn forks without vfork and runs Python
    in the child; the function below only calls the pre-resolved prctl and getppid, which take no locks
    another thread could hold at fork time.
    """
    prctl = _PRCTL
    if prctl is None:
        return None
    parent = os.getpid()
    sig = int(signum)

    def set_pdeathsig() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect: nobody will signal us
            os.kill(os.getpid(), sig)

    return set_pdeathsig


def _preexec(*parts: Callable[[], None] | None) -> Callable[[], None] | None:
    """One ``preexec_fn`` running each given part in order (None when there is none)."""
    steps = [p for p in parts if p is not None]
    if not steps:
        return None

    def run() -> None:
        for step in steps:
            step()

    return run


def _start_error(exc: OSError, argv: list[str], cwd: Path) -> str:
    if isinstance(exc, FileNotFoundError | NotADirectoryError) and exc.filename == str(cwd):
        return f"working directory not found: {cwd}"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {argv[0]}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {argv[0]}"
    return f"cannot start {argv[0]}: {exc}"


@dataclass(frozen=True)
class _Launch:
    """What ``Popen`` is given once a jail, if any, has wrapped the command: a jail's launcher argv and
    allow-listed environment, and ``release`` to free the jail once every process of it is dead."""

    argv: list[str]
    env: dict[str, str]
    preexec: Callable[[], None] | None
    umask: int  # -1 keeps the worker's own (private); a jail's: JAIL_UMASK
    release: Callable[[], None] | None


def _launch(argv: list[str], cwd: Path, env: dict[str, str], jail: Jail | None) -> _Launch | str:
    """How to start ``argv``, or why it cannot start: a sandbox that cannot run is an error, never an
    unconfined run."""
    parent_death = parent_death_preexec()
    if jail is None:
        return _Launch(argv, env, _preexec(parent_death), -1, None)
    try:
        confined = confine(jail, argv, cwd, env)
    except (SandboxUnavailable, ValueError, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            return _start_error(exc, argv, cwd)
        return f"sandbox unavailable: {exc}"
    if confined.dies_with_parent:
        parent_death = None  # bwrap's --die-with-parent: a sandboxed command needs no preexec_fn
    # No preexec_fn at all lets Popen vfork instead of forking the whole worker (rlimits.through_prlimit)
    preexec = _preexec(parent_death, set_limits(confined.limits))
    return _Launch(confined.argv, confined.env, preexec, JAIL_UMASK, confined.release)


def _not_started(error: str, started: float, stdout_path: Path, stderr_path: Path) -> ProcResult:
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


def _popen(
    launch: _Launch, cwd: Path, out: IO[bytes], err: IO[bytes], piped: bool
) -> subprocess.Popen[bytes]:
    """The command started in its own session, stdin closed, its output to the files or (``piped``) to
    pipes for the capped readers."""
    return subprocess.Popen(
        launch.argv,
        cwd=cwd,
        env=launch.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if piped else out,
        stderr=subprocess.PIPE if piped else err,
        start_new_session=True,
        close_fds=True,
        preexec_fn=launch.preexec,  # PDEATHSIG and rlimits, where bwrap and prlimit do not set them
        umask=launch.umask,
    )


def _capped_outputs(
    proc: subprocess.Popen[bytes], stdout_path: Path, stderr_path: Path, max_output: int | None
) -> list[CappedOutput]:
    """The started readers of the two pipes, or none when the output goes straight to the files."""
    if max_output is None:
        return []
    assert proc.stdout is not None and proc.stderr is not None  # PIPE was asked for
    outputs = [
        CappedOutput(proc.stdout, stdout_path, max_output),
        CappedOutput(proc.stderr, stderr_path, max_output),
    ]
    for output in outputs:
        output.start()
    return outputs


@dataclass(frozen=True)
class _Watch:
    """How ``run_supervised`` watches a running leader: its limits and its caller's callbacks."""

    started: float
    timeout: float
    grace: float
    tick_every: float
    on_tick: Callable[[float, float], None] | None
    interrupted: Interrupted | None
    stdout_path: Path
    stderr_path: Path


def _until_exit(pid: int, rules: _Watch, outputs: list[CappedOutput], watch: _ExitWatch) -> tuple[bool, bool]:
    """Wait for the leader to exit, ticking and polling for cancellation; on timeout or cancel, SIGTERM the
    group and wait ``grace`` for the leader. Returns (timed_out, cancelled)."""
    sizes = (0, 0)
    last_growth = rules.started
    next_tick = rules.started + rules.tick_every
    while not _leader_exited(pid):
        now = time.monotonic()
        if outputs:
            current = (outputs[0].total, outputs[1].total)
        else:
            current = (_size(rules.stdout_path), _size(rules.stderr_path))
        if current != sizes:
            sizes, last_growth = current, now
        if rules.on_tick is not None and now >= next_tick:
            next_tick = now + rules.tick_every
            try:
                rules.on_tick(now - rules.started, now - last_growth)
            except Exception:
                log.exception("proc.tick_failed", pid=pid)
        cancel = False
        if rules.interrupted is not None:
            try:
                cancel = bool(rules.interrupted())
            except Exception:
                log.exception("proc.interrupted_failed", pid=pid)
        if cancel or now - rules.started >= rules.timeout:
            log.warning("proc.stopping", pid=pid, reason="cancel" if cancel else "timeout", grace=rules.grace)
            _killpg(pid, signal.SIGTERM)
            if not _wait_leader(pid, rules.grace, watch):
                log.warning("proc.sigkill", pid=pid)
            return not cancel, cancel
        watch.wait(POLL_SECONDS)
    return False, False


def _ended(
    proc: subprocess.Popen[bytes],
    rules: _Watch,
    outputs: list[CappedOutput],
    timed_out: bool,
    cancelled: bool,
) -> ProcResult:
    """The result of a reaped command, logged."""
    seconds = time.monotonic() - rules.started
    result = ProcResult(
        exit_code=proc.returncode,
        timed_out=timed_out,
        cancelled=cancelled,
        seconds=seconds,
        stdout_path=rules.stdout_path,
        stderr_path=rules.stderr_path,
        stdout_bytes=_size(rules.stdout_path),
        stderr_bytes=_size(rules.stderr_path),
        stdout_dropped=outputs[0].dropped if outputs else 0,
        stderr_dropped=outputs[1].dropped if outputs else 0,
    )
    log.info(
        "proc.ended",
        pid=proc.pid,
        exit_code=result.exit_code,
        timed_out=timed_out,
        cancelled=cancelled,
        seconds=round(seconds, 3),
        stdout_bytes=result.stdout_bytes,
        stderr_bytes=result.stderr_bytes,
        stdout_dropped=result.stdout_dropped,
        stderr_dropped=result.stderr_dropped,
    )
    return result


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
    interrupted: Interrupted | None = None,
    max_output: int | None = None,
    jail: Jail | None = None,
) -> ProcResult:
    """Run ``argv`` to completion, timeout or cancellation; never raises for a missing executable.

    ``on_tick(seconds, quiet_seconds)`` is called every ``tick_every`` seconds (quiet: since either output
    stream last grew). ``interrupted()`` returning True cancels. Timeout and cancel both send SIGTERM to the
    group, wait up to ``grace`` for the leader, then SIGKILL; the group is always SIGKILLed at the end.
    ``max_output`` caps each output file at its first and last ``max_output / 2`` bytes around a marker
    line (``ProcResult.stdout_dropped`` / ``stderr_dropped`` count what went); None keeps everything.

    With ``jail``, ``argv`` runs confined (``workers.isolation.sandbox.confine``): ``env`` is then only the
    worker environment the jail's allow-list and ``env_pass`` draw from, never the child's environment itself.
    A sandbox that cannot run is a start error (``ProcResult.error``), never an unconfined run.
    """
    if not argv:
        raise ValueError("empty argv")
    if max_output is not None and max_output < 2:
        raise ValueError(f"max_output must be at least 2 bytes, got {max_output}")
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    stderr_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    launch = _launch(argv, cwd, env, jail)
    if isinstance(launch, str):
        log.warning("proc.start_failed", argv0=argv[0], cwd=str(cwd), error=launch, sandbox=True)
        stdout_path.write_bytes(b"")
        stderr_path.write_bytes(b"")
        return _not_started(launch, started, stdout_path, stderr_path)
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        try:
            proc = _popen(launch, cwd, out, err, piped=max_output is not None)
        except OSError as exc:
            if launch.release is not None:
                launch.release()
            error = _start_error(exc, launch.argv, cwd)
            log.warning("proc.start_failed", argv0=launch.argv[0], cwd=str(cwd), error=error)
            return _not_started(error, started, stdout_path, stderr_path)
    pid = proc.pid
    outputs = _capped_outputs(proc, stdout_path, stderr_path, max_output)
    log.info(
        "proc.started",
        pid=pid,
        argv0=argv[0],  # the command's own, not the sandbox's launcher
        cwd=str(cwd),
        timeout=timeout,
        max_output=max_output,
        sandbox=None if jail is None else jail.settings.mode,
    )
    rules = _Watch(started, timeout, grace, tick_every, on_tick, interrupted, stdout_path, stderr_path)
    watch = _ExitWatch(pid)
    try:
        timed_out, cancelled = _until_exit(pid, rules, outputs, watch)
    finally:
        # The leader is exited but unreaped (or being killed): its pgid still names our group.
        _killpg(pid, signal.SIGKILL)
        watch.close()
        proc.wait()
        for output in outputs:
            output.finish()
        if launch.release is not None:  # bwrap is reaped: its pid namespace, the whole jail, died with it
            launch.release()
    return _ended(proc, rules, outputs, timed_out, cancelled)
