"""Fleet-grade execution, end to end: real Redis, real git, real ``jury worker`` processes.

Each test has a redis-server of its own (a free port, its own directory: no other test's flush or
spending reaches it) and drives the CLI in subprocesses (``jury review --detach``, ``jury cancel``,
``jury show``) against workers started as ``jury worker`` subprocesses (each takes its turn at reaping),
with short lease, reaper and grace settings, and the fake agent ``tests/fakes/fleet_agent.py``, which
writes the pid of every invocation to ``$state/<tag>.pids``. (The reaper's own failures — the worker that
reaps killed, SIGTERM's hand-back — are tests/e2e/test_fleet_ops.py.)

What each test proves:

- a worker SIGKILLed in the middle of a review: its agent dies with it, another worker finishes the run,
  and the log holds no duplicate event, report or finding;
- a worker frozen (SIGSTOP) past its lease: another worker takes the action over, and the woken one stops
  its agent and records nothing;
- Redis restarted (SIGTERM, then started again on its AOF) while an agent runs, down for less or for more
  than a lease lives: the run converges and the worker survives the outage;
- every action delivered three times at once runs its agent once;
- two runs under one fleet day ceiling, worked by several workers at once, stay within the ceiling plus
  one call's projection; a run with ``--budget 0`` launches no agent and says why;
- three findings triaged in parallel by three workers give the same tree (and commits) as one at a time;
- ``jury cancel`` kills a running agent's whole process group and ends the run ``cancelled``.

(An agent that ignores SIGTERM is gone within timeout + grace: tests/integration/test_supervise.py,
``test_timeout_kills_stubborn_group``; end to end: test_review.py,
``test_timeout_kills_the_group_ends_human_and_resume_converges``.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest
import redis

from orchestrator.config import Settings
from orchestrator.domain import Event
from orchestrator.fold import RunState, fold
from orchestrator.spec import TERMINAL_STATES
from orchestrator.store import keys
from orchestrator.store.redis import RedisStore, from_url
from tests.conftest import FAKE_SANDBOX_KEYS, outside_env
from workers.fleet.ledger import Ledger, LedgerTotals

T = TypeVar("T")
AGENT = Path(__file__).resolve().parents[1] / "fakes" / "fleet_agent.py"
IDENTITY = ["-c", "user.name=Test", "-c", "user.email=test@jury.invalid", "-c", "commit.gpgsign=false"]
FAST = {
    "JURY_LEASE_TTL": "2",
    "JURY_REAP_EVERY": "1",
    "JURY_REAP_AFTER": "2",
    "JURY_KILL_GRACE": "1",
    "JURY_SHUTDOWN_GRACE": "2",  # a worker stopped at the end of a test hands its actions back soon
    "JURY_ALIVE_EVERY": "1",
    # Far above any agent run here: recovery from a lost worker is the reaper's job, not a redelivery.
    "JURY_VISIBILITY_TIMEOUT": "3600",
    "JURY_LOG_LEVEL": "INFO",
    "JURY_LOG_JSON": "true",
}


# --- helpers ----------------------------------------------------------------------------------------


def agent(
    name: str,
    mode: str,
    state: Path,
    *,
    judge_mode: str | None = None,
    sleep: float = 0.0,
    slow_runs: int | None = None,
    gate: Path | None = None,
    child: bool = False,
    ignore_term: bool = False,
    usd_per_minute: float | None = None,
    expect_seconds: float = 5,
) -> str:
    """A jury.toml entry running fleet_agent.py as ``name`` (its pids go to ``state/<name>.pids``)."""

    def argv(m: str) -> str:
        opts = ["--state", str(state), "--tag", name, "--sleep", str(sleep)]
        opts += ["--slow-runs", str(slow_runs)] if slow_runs is not None else []
        opts += ["--gate", str(gate)] if gate is not None else []
        opts += ["--child"] if child else []
        opts += ["--ignore-term"] if ignore_term else []
        return json.dumps([sys.executable, str(AGENT), *opts, m, "{prompt_file}"])

    entry = f"[agents.{name}]\nargv = {argv(mode)}\nexpect_seconds = {expect_seconds}\n"
    entry += FAKE_SANDBOX_KEYS  # the fakes keep their state in the test's tmp dir, inside the sandbox
    if judge_mode:
        entry += f"judge_argv = {argv(judge_mode)}\n"
    if usd_per_minute is not None:
        entry += f"usd_per_minute = {usd_per_minute}\n"
    return entry


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


GONE = 2**22 + 1  # above any pid_max: a recorded process that no longer exists anywhere


def host_pids() -> dict[tuple[str, int], int]:
    """(pid namespace inode, pid inside it) -> host pid, for every process in a nested pid namespace."""
    found: dict[tuple[str, int], int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ns = os.readlink(entry / "ns" / "pid")
            nspid = next(ln for ln in (entry / "status").read_text().splitlines() if ln.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        found[(ns[ns.index("[") + 1 : -1], int(nspid.split()[-1]))] = int(entry.name)
    return found


def pids_of(state: Path, tag: str) -> list[list[int]]:
    """One list of host pids per invocation of the agent ``tag`` (the agent's, then its child's).

    The agent runs in Jury's sandbox and records ``<pid namespace>:<pid>``; a process that is gone maps
    to ``GONE``, which no process has."""
    path = state / f"{tag}.pids"
    if not path.exists():
        return []
    lines = [line.split() for line in path.read_text().splitlines() if line.strip()]
    table = host_pids() if any(":" in t for line in lines for t in line) else {}

    def host(token: str) -> int:
        if ":" not in token:
            return int(token)
        ns, pid = token.split(":")
        return table.get((ns, int(pid)), GONE)

    return [[host(t) for t in line] for line in lines]


def all_pids(state: Path) -> list[int]:
    """Every pid any fake agent recorded (agents and their children)."""
    return [p for f in state.glob("*.pids") for line in pids_of(state, f.stem) for p in line]


def invocations(state: Path) -> int:
    """How many times the fake agents ran, all of them together."""
    return sum(len(pids_of(state, f.stem)) for f in state.glob("*.pids"))


def wait_for(what: str, check: Callable[[], T], timeout: float, why: Callable[[], str] = str) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}\n{why()}")
        time.sleep(0.1)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_group(p: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM the process group ``p`` leads, then SIGKILL it if it has not exited within ``timeout``."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(p.pid, signal.SIGKILL)  # whatever is left of its group (a stray child)
    except (ProcessLookupError, PermissionError):
        pass
    p.wait()


class Fleet:
    """``jury worker`` subprocesses and the CLI, on one Redis and one state directory."""

    def __init__(self, url: str, state_dir: Path, fake_state: Path, logs: Path) -> None:
        self.url, self.state_dir, self.fake_state, self.logs = url, state_dir, fake_state, logs
        self.extra: dict[str, str] = {}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.store: RedisStore = from_url(url)
        logs.mkdir(parents=True, exist_ok=True)

    @property
    def client(self) -> redis.Redis:
        return self.store.client

    def env(self) -> dict[str, str]:
        env = outside_env()
        env.update(FAST)
        env.update(
            {
                "JURY_REDIS_URL": self.url,
                "JURY_DIR": str(self.state_dir),
                "FAKE_STATE": str(self.fake_state),
                "NO_COLOR": "1",
            }
        )
        env.update(self.extra)
        return env

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}-{len(self.procs)}.log", "wb")
        p = subprocess.Popen(
            argv,
            env=self.env(),
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.procs.append(p)
        return p

    def worker(self, concurrency: int = 1, *extra: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "jury_cli", "worker", "--concurrency", str(concurrency)]
        argv += ["--loglevel", "INFO", *extra]
        return self._spawn("worker", argv)

    @contextmanager
    def reapers_paused(self, hold: float = 15.0) -> Iterator[None]:
        """No worker reaps (nor kicks a run) inside: the test holds the reaper's lock every worker tries
        (for ``hold`` seconds at most: it outlives a Redis stopped inside, and lapses once it is back)."""
        key = keys.reaper(self.store.prefix)
        token = f"test-{os.getpid()}"
        wait_for(
            "the reaper's lock to be free",
            lambda: self.client.set(key, token, nx=True, px=int(hold * 1000)),
            30,
        )
        try:
            yield
        finally:
            try:
                if self.client.get(key) == token.encode():
                    self.client.delete(key)
            except redis.RedisError:
                pass  # Redis is down (the test stopped it): the lock lapses on its own

    def stop(self) -> None:
        for p in self.procs:
            stop_group(p)
        self.procs = []

    def jury(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "jury_cli", *args],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def start(self, repo: Path, config: Path, *extra: str, branch: str = "feature") -> str:
        """``jury review --detach`` (without second opinions): the new run's slug."""
        r = self.jury(
            "review",
            str(repo),
            "--branch",
            branch,
            "--trunk",
            "main",
            "--judge",
            "judge",
            "--config",
            str(config),
            "--no-refute",  # second opinions are not what these tests are about; keep the action counts exact
            "--detach",
            *extra,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout.strip().splitlines()[-1]

    def events(self, slug: str) -> list[Event]:
        return self.store.read(slug)

    def state(self, slug: str) -> RunState:
        return fold(self.events(slug), slug)

    def why(self, slug: str | None = None) -> Callable[[], str]:
        """What to print when a wait fails: the run's state and the end of every process log."""

        def text() -> str:
            parts = []
            if slug is not None:
                try:
                    s = self.state(slug)
                    parts.append(f"run {slug}: {s.state} ({s.target.state_note}); {s.events} events")
                    parts.append("inflight: " + ", ".join(a.key for a in s.inflight()))
                except Exception as exc:  # the store itself may be what failed
                    parts.append(f"cannot read {slug}: {exc}")
            for f in sorted(self.logs.glob("*.log")):
                tail = f.read_bytes()[-2500:].decode("utf-8", errors="replace")
                parts.append(f"--- {f.name} (tail)\n{tail}")
            return "\n".join(parts)

        return text

    def wait_ended(self, slug: str, timeout: float = 90) -> RunState:
        def ended() -> RunState | None:
            s = self.state(slug)
            return s if s.state in TERMINAL_STATES else None

        state = wait_for(f"run {slug} to end", ended, timeout, self.why(slug))
        assert state is not None
        return state

    def wait_settled(self, slug: str, timeout: float = 30) -> RunState:
        """Wait until no action of the run is in flight (agent calls may settle after the run ended)."""

        def settled() -> RunState | None:
            s = self.state(slug)
            return None if s.inflight() else s

        state = wait_for(f"run {slug} to settle", settled, timeout, self.why(slug))
        assert state is not None
        return state

    @contextmanager
    def quiet_moment(self, slug: str, key: str, agent_pid: int) -> Iterator[None]:
        """Hold the reapers still and wait until the agent ``agent_pid`` of action ``key`` is all the run
        has in flight and no coordinator holds the run's lock; the body then strikes.

        A coordinator caught by a crash or an outage leaves the run's lock held until its TTL (a stall,
        not a failure), and the reaper kicks a coordinator every second: the body of this context is where
        such a hit would land, so the tests that are not about it keep it away.
        """
        lock = keys.lock(self.store.prefix, slug)

        def only_the_agent() -> bool:
            assert alive(agent_pid), f"the agent of {key} ended before the test could strike"
            inflight = [a.key for a in self.state(slug).inflight()]
            return inflight == [key] and not self.client.exists(lock)

        wait_for(f"{key} to be all that runs", only_the_agent, 30, self.why(slug))
        with self.reapers_paused():
            # a kick the reaper sent just before its pause runs its course: none queued, none taken
            def quiet() -> bool:
                return only_the_agent() and not self.coordinate_pending()

            wait_for("no coordinator to hold or wait for the run", quiet, 10, self.why(slug))
            yield

    def coordinate_pending(self) -> bool:
        """Whether a ``jury.coordinate`` task waits in a queue or is taken by a worker and not yet done
        (kombu's Redis transport keeps a taken message in its ``unacked`` hash until the task ends)."""
        queued = [q for q in self.client.scan_iter(match="control*") if self.client.type(q) == b"list"]
        if any(self.client.llen(q) for q in queued):
            return True
        for raw in self.client.hvals("unacked"):
            message = json.loads(raw)[0]
            if message.get("headers", {}).get("task") == "jury.coordinate":
                return True
        return False

    def wait_launched(self, slug: str, key: str, tag: str, nth: int = 1, timeout: float = 60) -> list[int]:
        """Wait for the agent.launch of action ``key`` and the ``nth`` process of agent ``tag`` (counted
        from the start of the test, so a late look never mistakes a later run for it); its pids."""

        def launched() -> list[int] | None:
            runs = pids_of(self.fake_state, tag)
            if len(runs) >= nth and any(e.t == "agent.launch" and e.key == key for e in self.events(slug)):
                return runs[nth - 1]
            return None

        return wait_for(f"{key}: {tag} run #{nth}", launched, timeout, self.why(slug)) or []


def assert_log_is_clean(events: list[Event]) -> None:
    """No duplicate event, no second report for one action, no finding raised twice, all actions done."""
    eids = Counter(e.eid for e in events)
    assert [eid for eid, n in eids.items() if n > 1] == []
    reports = Counter((e.agent, e.round, e.role, e.key) for e in events if e.t == "agent.report")
    assert [k for k, n in reports.items() if n > 1] == [], "an action reported twice"
    raised = Counter(e.id for e in events if e.t == "finding.raised")
    assert [k for k, n in raised.items() if n > 1] == [], "a finding raised twice"
    dispatched = Counter(e.key for e in events if e.t == "action.dispatched")
    assert [k for k, n in dispatched.items() if n > 1] == [], "an action dispatched twice"
    state = fold(events)
    assert [a.key for a in state.inflight()] == [], "actions left in flight"
    # each finding is one bug: no two findings share their claim and place
    places = Counter((f.claim, f.loc) for f in state.findings.values())
    assert [k for k, n in places.items() if n > 1] == []


def assert_no_agent_left(state: Path, timeout: float = 30) -> None:
    pids = all_pids(state)
    assert pids, "the fake agent never recorded a pid"
    wait_for(
        "every agent process to be gone",
        lambda: not [p for p in pids if alive(p)],
        timeout,
        lambda: f"still running: {[p for p in pids if alive(p)]}",
    )


# --- fixtures ---------------------------------------------------------------------------------------


class PrivateRedis:
    """A redis-server of the test's own on a free port: nobody else's test flushes it or spends from its day
    ledger. ``durable``: every write persisted (AOF, fsync always), so it can be restarted mid-run."""

    def __init__(self, where: Path, durable: bool = False) -> None:
        self.dir = where
        self.dir.mkdir(parents=True, exist_ok=True)
        self.durable = durable
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [shutil.which("redis-server") or "redis-server", "--port", str(self.port)]
        argv += ["--bind", "127.0.0.1", "--dir", str(self.dir), "--save", ""]
        argv += ["--appendonly", "yes", "--appendfsync", "always"] if self.durable else ["--appendonly", "no"]
        argv += ["--daemonize", "no"]
        log = open(self.dir / "redis.log", "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        client = redis.Redis(port=self.port)
        try:
            wait_for(f"redis-server on port {self.port}", lambda: _pings(client), 15)
        finally:
            client.close()

    def stop(self) -> None:
        """SIGTERM: Redis shuts down cleanly (a durable one has fsynced every write already)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    r = PrivateRedis(tmp_path / "redis")
    r.start()
    yield r
    r.stop()


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    r = PrivateRedis(tmp_path / "redis", durable=True)
    r.start()
    yield r
    r.stop()


@pytest.fixture
def fleet(private_redis: PrivateRedis, state_dir: Path, fake_state: Path, tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(private_redis.url, state_dir, fake_state, tmp_path / "logs")
    yield f
    f.stop()  # before the Redis goes (fixtures are torn down in reverse)
    f.store.close()


# --- repositories -----------------------------------------------------------------------------------

THREE_BUGS = {
    "clamp.py": "def clamp(value, lo, hi):\n    return max(lo, min(value, lo))\n",
    "seq.py": "def last(items):\n    return items[len(items)]\n",
    "money.py": "def cents(dollars):\n    return int(dollars * 10)\n",
}


def make_three_bug_repo(where: Path) -> Path:
    """``main`` with a README; ``feature`` adds three modules, each with one independent bug."""
    repo = where / "three"
    (repo / "tests").mkdir(parents=True)
    subprocess.run(["git", "init", "--quiet", "--initial-branch=main", str(repo)], check=True)
    (repo / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    (repo / "README.md").write_text("three helpers\n")
    (repo / "tests" / "__init__.py").write_text("")
    git(repo, *IDENTITY, "add", "-A")
    git(repo, *IDENTITY, "commit", "--quiet", "-m", "start")
    git(repo, "checkout", "--quiet", "-b", "feature")
    for name, text in THREE_BUGS.items():
        (repo / name).write_text(text)
    git(repo, *IDENTITY, "add", "-A")
    git(repo, *IDENTITY, "commit", "--quiet", "-m", "three helpers")
    git(repo, "checkout", "--quiet", "main")
    return repo


def standard_config(write_config, state: Path, *, finder_sleep: float = 0.0, **finder: object) -> Path:
    return write_config(
        agent("finder", "find", state, sleep=finder_sleep, **finder),  # type: ignore[arg-type]
        agent("quiet", "clean", state),
        agent("judge", "clean", state, judge_mode="fix"),
    )


def assert_converged_with_the_fix(state: RunState) -> None:
    assert state.state == "converged", state.target.state_note
    assert [(f.status, f.loc) for f in state.findings.values()] == [("accepted", "stats.py:13")]


# --- 1. a worker killed in the middle of a review ---------------------------------------------------


def test_sigkilled_worker_mid_review_another_worker_finishes_the_run(
    fleet: Fleet, sample_repo: Path, write_config, fake_state: Path
) -> None:
    """Worker A is SIGKILLed while its reviewer agent runs (and with it the only reaper); worker B, started
    afterwards, reaps at once and on, gets the review once A's lease lapses, and finishes the run."""
    a = fleet.worker(concurrency=2)
    slug = fleet.start(
        sample_repo,
        standard_config(write_config, fake_state, finder_sleep=30, slow_runs=1),
        "--reviewer",
        "finder,quiet",
    )
    (finder_pid,) = fleet.wait_launched(slug, "review:r1:finder", "finder")
    with fleet.quiet_moment(slug, "review:r1:finder", finder_pid):
        os.kill(a.pid, signal.SIGKILL)  # no shutdown, no finally: the worker is simply gone
        a.wait()
    # its agent dies with it (PR_SET_PDEATHSIG), though it runs in a session of its own
    wait_for("the dead worker's agent to die with it", lambda: not alive(finder_pid), 5)
    fleet.worker(concurrency=2)

    state = fleet.wait_ended(slug, timeout=90)
    assert_converged_with_the_fix(state)
    events = fleet.events(slug)
    assert_log_is_clean(events)
    # the killed review ran again on the second worker (round 1 twice, round 2 once, and its reply)
    finder_runs = pids_of(fake_state, "finder")
    assert finder_runs[0] in ([finder_pid], [GONE]) and len(finder_runs) == 4  # GONE: dead, sandboxed
    # a launch event per start of the killed review (ids of their own: the dead worker's stays, abandoned)
    launches = [e.eid for e in events if e.t == "agent.launch" and e.key == "review:r1:finder"]
    assert launches == ["review:r1:finder:launch", "review:r1:finder:launch:2"]
    assert_no_agent_left(fake_state)
    # the killed call's reservation was settled by the run that replaced it; no worktree is left over
    assert Ledger(fleet.client).spent(slug).reserved == 0
    assert len(git(sample_repo, "worktree", "list").splitlines()) == 1
    # every key the workers wrote (leases, marks, calls, artifacts, a dead worker's too) is named in the
    # run's key set, which is all that the run's end expires
    assert fleet.store.run_keys(slug) == fleet.store.scan_run_keys(slug)


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def ancestors_of(pid: int) -> list[int]:
    """``pid``'s parent, its parent's ... (an agent's: the sandbox's bwrap processes, then its worker)."""
    found = []
    while pid > 1:
        pid = parent_of(pid)
        found.append(pid)
    return found


def test_worker_frozen_past_its_lease_another_worker_takes_over(
    fleet: Fleet, sample_repo: Path, write_config, fake_state: Path
) -> None:
    """A worker stalled longer than its lease (SIGSTOP: a paused VM, a long GC) loses the action to another
    worker; when it wakes it must give the action up without recording anything."""
    workers = [fleet.worker(concurrency=2), fleet.worker(concurrency=2)]
    slug = fleet.start(
        sample_repo,
        standard_config(write_config, fake_state, finder_sleep=30, slow_runs=1),
        "--reviewer",
        "finder,quiet",
    )
    (first,) = fleet.wait_launched(slug, "review:r1:finder", "finder")
    frozen = next(w for w in workers if w.pid in ancestors_of(first))
    # freeze it only once its agent is all it does: frozen inside `git worktree add`, it would hold the
    # repository's file lock, which every worker on this host waits for
    only_finder = lambda: [a.key for a in fleet.state(slug).inflight()] == ["review:r1:finder"]  # noqa: E731
    wait_for("the other reviewer to be done", only_finder, 30, fleet.why(slug))
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        # the lease lapses, the reaper hands the review out again, the other worker runs it (the frozen
        # one cannot start anything)
        fleet.wait_launched(slug, "review:r1:finder", "finder", nth=2, timeout=20)
        assert alive(first)  # the frozen worker's agent still runs: it lives in a session of its own
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    # the woken worker finds its lease taken and stops its own agent at once
    wait_for("the frozen worker's agent to be stopped", lambda: not alive(first), 5)
    state = fleet.wait_ended(slug, timeout=90)
    assert_converged_with_the_fix(state)
    assert_log_is_clean(fleet.events(slug))
    assert len(pids_of(fake_state, "finder")) == 4  # round 1 twice, round 2, the reply
    assert_no_agent_left(fake_state)
    assert frozen.poll() is None, "the frozen worker died"


# --- 2. Redis restarted in the middle of a run ------------------------------------------------------


@pytest.mark.parametrize("down", [0.5, 3.0], ids=["quick-restart", "down-past-the-lease"])
def test_redis_restarted_mid_run_the_run_completes(
    durable_redis: PrivateRedis,
    state_dir: Path,
    fake_state: Path,
    tmp_path: Path,
    sample_repo: Path,
    write_config,
    down: float,
) -> None:
    """Redis stops (SIGTERM: a clean shutdown, AOF fsynced at every write) while an agent runs, and comes
    back on the same port and directory. Down for less than a lease lives, the agent's work survives; down
    for longer, the worker gives the action up and the reaper hands it out again. Either way the run
    converges and the worker lives on."""
    fleet = Fleet(durable_redis.url, state_dir, fake_state, tmp_path / "logs")
    try:
        worker = fleet.worker(concurrency=2)
        # the first finder run outlives the outage: waited out after a quick restart, stopped otherwise
        sleep = 12 if down < float(FAST["JURY_LEASE_TTL"]) else 30
        config = standard_config(write_config, fake_state, finder_sleep=sleep, slow_runs=1)
        slug = fleet.start(sample_repo, config, "--reviewer", "finder,quiet")
        (finder,) = fleet.wait_launched(slug, "review:r1:finder", "finder")
        with fleet.quiet_moment(slug, "review:r1:finder", finder):
            durable_redis.stop()
        assert alive(finder)  # the outage begins while the agent runs
        time.sleep(down)
        durable_redis.start()

        state = fleet.wait_ended(slug, timeout=120)
        assert_converged_with_the_fix(state)
        events = fleet.events(slug)
        assert_log_is_clean(events)
        finder_runs = len(pids_of(fake_state, "finder"))
        if down < float(FAST["JURY_LEASE_TTL"]):
            assert finder_runs == 3  # round 1, round 2, the reply: the agent's work outlived the outage
        else:
            assert finder_runs == 4  # round 1 was given up and run again
        assert_no_agent_left(fake_state)
        assert not alive(finder)
        assert Ledger(fleet.client).spent(slug).reserved == 0
        assert worker.poll() is None, "the worker died with Redis:\n" + fleet.why()()
    finally:
        fleet.stop()
        fleet.store.close()


def test_a_channel_closed_after_its_connection_is_a_connection_error(private_redis: PrivateRedis) -> None:
    """The kombu 5.7 path that killed a worker when Redis went away (see
    workers.runtime.app.survive_broker_loss): a channel holding an unacknowledged message, closed, and its
    message acked, after the connection dropped its transport. Both must be connection errors Celery can
    ignore, never an AttributeError."""
    from kombu import Connection, Exchange, Queue

    from workers.runtime.app import survive_broker_loss

    survive_broker_loss()
    conn = Connection(private_redis.url, transport_options={"visibility_timeout": 3600})
    queue = Queue("jury-fleet-test", Exchange("jury-fleet-test"), "jury-fleet-test")
    client = redis.Redis.from_url(private_redis.url)
    try:
        with conn.Producer() as producer:
            producer.publish(
                {"n": 1}, exchange=queue.exchange, routing_key=queue.routing_key, declare=[queue]
            )
        channel = conn.default_channel
        message = queue(channel).get(no_ack=False)
        assert message is not None and client.hlen("unacked") == 1
        conn._do_close_transport()  # what Connection.collect() leaves behind on a lost broker
        with pytest.raises(conn.connection_errors):
            channel.close()
        with pytest.raises(conn.connection_errors):
            message.ack()
        assert client.hlen("unacked") == 1  # kept in Redis: restored after the visibility timeout
    finally:
        client.close()


# --- 3. the same action delivered several times at once ---------------------------------------------


def test_an_action_delivered_three_times_at_once_runs_its_agent_once(
    fleet: Fleet, sample_repo: Path, write_config, fake_state: Path, state_dir: Path
) -> None:
    """Every action of a run, the moment it is dispatched, is sent twice more by two threads at once: three
    deliveries, taken by several worker threads in two processes. Each agent runs once per action."""
    from workers.runtime.app import make_app

    fleet.worker(concurrency=2)
    fleet.worker(concurrency=2)
    config = write_config(
        agent("finder", "find", fake_state, sleep=2),
        agent("quiet", "clean", fake_state, sleep=2),
        agent("judge", "clean", fake_state, judge_mode="fix", sleep=2),
    )
    celery = make_app(Settings(redis_url=fleet.url, dir=state_dir))
    slug = fleet.start(sample_repo, config, "--reviewer", "finder,quiet")

    def send_twice_at_once(kind: str, key: str) -> None:
        barrier = threading.Barrier(2)

        def send() -> None:
            barrier.wait()
            celery.send_task(f"jury.{kind}", args=[slug, key])

        threads = [threading.Thread(target=send) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    sent: set[str] = set()
    deadline = time.monotonic() + 90
    while True:
        events = fleet.events(slug)
        for e in events:
            if e.t == "action.dispatched" and e.key not in sent:
                sent.add(e.key)
                send_twice_at_once(e.kind, e.key)
        state = fold(events, slug)
        if state.state in TERMINAL_STATES and not state.inflight():
            break
        if time.monotonic() > deadline:
            pytest.fail(f"run did not end\n{fleet.why(slug)()}")
        time.sleep(0.05)

    assert_converged_with_the_fix(state)
    assert_log_is_clean(events)
    ran = Counter(a.agent for a in state.actions.values())
    assert sent == set(state.actions) and ran == {"finder": 3, "quiet": 2, "judge": 1}
    for name in ("finder", "quiet", "judge"):
        assert len(pids_of(fake_state, name)) == ran[name], f"{name} ran more often than it was asked"
    assert Counter(e.key for e in events if e.t == "agent.launch") == Counter(set(state.actions))
    # the duplicates really overlapped the first delivery: some found its lease held while the agent ran
    logs = "".join(f.read_text(errors="replace") for f in fleet.logs.glob("worker-*.log"))
    assert '"event": "task.busy"' in logs
    assert_no_agent_left(fake_state)


# --- 4. money: a fleet ceiling shared by two runs; a run with no budget -----------------------------

RATE, EXPECT, CEILING = 6.0, 2.0, 0.7  # USD per minute, expected seconds per call, the fleet's day ceiling
PROJECTION = RATE * EXPECT / 60  # 0.20 USD reserved per call


def test_two_runs_sharing_a_fleet_ceiling_never_pass_it(
    fleet: Fleet, sample_repo: Path, write_config, fake_state: Path
) -> None:
    """Both runs are queued before the workers start, so their four reviewers reserve at once (0.80 USD of
    projections against a 0.70 ceiling); every call costs a little less than its projection."""
    fleet.extra["JURY_FLEET_DAY_CEILING"] = str(CEILING)
    config = write_config(
        *(
            agent(n, mode, fake_state, judge_mode=j, sleep=1.5, usd_per_minute=RATE, expect_seconds=EXPECT)
            for n, mode, j in (("finder", "find", None), ("quiet", "clean", None), ("judge", "clean", "fix"))
        )
    )
    git(sample_repo, "branch", "feature2", "feature")
    slugs = [
        fleet.start(sample_repo, config, "--reviewer", "finder,quiet"),
        fleet.start(sample_repo, config, "--reviewer", "finder,quiet", branch="feature2"),
    ]
    fleet.worker(concurrency=2)
    fleet.worker(concurrency=2)
    states = [fleet.wait_ended(slug, timeout=90) for slug in slugs]
    for slug in slugs:  # the last agent calls settle after their run ended
        fleet.wait_settled(slug)

    ledger = Ledger(fleet.client)
    day = ledger.day_totals()
    assert day.spent <= CEILING + PROJECTION, day
    assert day.reserved == 0 and day.unknown_calls == invocations(fake_state)
    events = {slug: fleet.events(slug) for slug in slugs}
    reviews = [
        e
        for evs in events.values()
        for e in evs
        if e.t == "budget.reserved" and e.key.startswith("review:r1:")
    ]
    assert len(reviews) < 4, "all four round-1 reviewers reserved at once: the ceiling did not hold"
    refused = [e for evs in events.values() for e in evs if e.t == "budget.refused"]
    assert refused and all(e.reason.startswith("day ceiling") for e in refused)
    assert any(s.state == "human" and "budget exhausted" in (s.target.state_note or "") for s in states)
    for slug, evs in events.items():
        # no agent ran without a reservation, and every reservation was settled
        launched = {e.key for e in evs if e.t == "agent.launch"}
        reserved = {e.key for e in evs if e.t == "budget.reserved"}
        spent = [e for e in evs if e.t == "budget.spent"]
        assert launched == reserved == {e.key for e in spent}
        # the run's ledger, its log and its fold agree on what it cost
        charged = sum(e.charged or 0.0 for e in spent)
        assert all(e.amount is None for e in spent)  # the fake reports no cost: charged by the minute
        assert ledger.spent(slug).spent == pytest.approx(charged, abs=1e-5)
        assert fleet.state(slug).total_spent == pytest.approx(charged, abs=1e-5)
    assert day.spent == pytest.approx(sum(ledger.spent(s).spent for s in slugs), abs=1e-5)
    assert invocations(fake_state) == sum(
        len({e.key for e in evs if e.t == "agent.launch"}) for evs in events.values()
    )


def test_a_run_with_no_budget_starts_no_agent_and_says_why(
    fleet: Fleet, sample_repo: Path, write_config, fake_state: Path
) -> None:
    fleet.worker(concurrency=2)
    slug = fleet.start(
        sample_repo, standard_config(write_config, fake_state), "--reviewer", "finder,quiet", "--budget", "0"
    )
    state = fleet.wait_ended(slug, timeout=60)
    fleet.wait_settled(slug)  # the refused reviews end after the run did
    assert state.state == "human"
    assert (state.target.state_note or "").startswith("budget exhausted: run ceiling")
    events = fleet.events(slug)
    assert [e for e in events if e.t in ("agent.launch", "budget.reserved")] == []
    assert all_pids(fake_state) == []
    assert Ledger(fleet.client).spent(slug) == LedgerTotals(spent=0, reserved=0, unknown_calls=0)
    shown = fleet.jury("show", slug)
    assert shown.returncode == 0, shown.stderr
    assert "human" in shown.stdout and "budget exhausted" in shown.stdout


# --- 5. parallel triage gives the same tree as serial triage ----------------------------------------


def test_parallel_triage_gives_the_same_tree_as_one_at_a_time(
    fleet: Fleet, tmp_path: Path, write_config, fake_state: Path
) -> None:
    repo = make_three_bug_repo(tmp_path / "src")
    config = write_config(
        agent("finder", "find3", fake_state),
        agent("quiet", "clean", fake_state),
        agent("judge", "clean", fake_state, judge_mode="fix3", sleep=2),
    )

    def run(workers: int) -> tuple[str, RunState, list[Event]]:
        for _ in range(workers):
            fleet.worker(concurrency=1)
        slug = fleet.start(repo, config, "--reviewer", "finder,quiet")
        state = fleet.wait_ended(slug, timeout=90)
        fleet.stop()
        return slug, state, fleet.events(slug)

    parallel, p_state, p_events = run(3)
    serial, s_state, s_events = run(1)

    for state in (p_state, s_state):
        assert state.state == "converged", state.target.state_note
        assert {f.id: f.status for f in state.findings.values()} == {
            "r1-finder-1": "accepted",
            "r1-finder-2": "accepted",
            "r1-finder-3": "accepted",
        }

    # the three judges worked at once in the first run, one after the other in the second
    def triage_order(events: list[Event]) -> str:
        return "".join(
            "L" if e.t == "agent.launch" else "R"
            for e in events
            if e.t in ("agent.launch", "agent.report") and (e.key or "").startswith("triage:")
        )

    assert triage_order(p_events) == "LLLRRR"
    assert triage_order(s_events) == "LRLRLR"
    # the same fixes, integrated in the order the findings were raised, with deterministic commits
    tree = {slug: git(repo, "rev-parse", f"jury/{slug}^{{tree}}").strip() for slug in (parallel, serial)}
    assert tree[parallel] == tree[serial]
    head = {slug: git(repo, "rev-parse", f"jury/{slug}").strip() for slug in (parallel, serial)}
    assert head[parallel] == head[serial]
    subjects = git(repo, "log", "--format=%s", f"feature..jury/{serial}").splitlines()
    assert [s.split(":")[1].strip() for s in reversed(subjects)] == [
        "fix r1-finder-1",
        "fix r1-finder-2",
        "fix r1-finder-3",
    ]
    for path, fixed in (
        ("clamp.py", "min(value, hi)"),
        ("seq.py", "items[-1]"),
        ("money.py", "dollars * 100"),
    ):
        assert fixed in git(repo, "show", f"jury/{serial}:{path}")
    listed = git(repo, "ls-tree", "--name-only", f"jury/{serial}", "tests/").split()
    assert sorted(listed) == [
        "tests/__init__.py",
        "tests/test_cents.py",
        "tests/test_clamp.py",
        "tests/test_last.py",
    ]


# --- 6. cancel ----------------------------------------------------------------------------------------


def test_cancel_kills_the_running_agents_group_and_ends_the_run_cancelled(
    fleet: Fleet, sample_repo: Path, write_config, fake_state: Path
) -> None:
    worker = fleet.worker(concurrency=2)
    config = write_config(
        agent("finder", "find", fake_state, sleep=900, slow_runs=2, child=True, ignore_term=True),
        agent("quiet", "clean", fake_state),
        agent("judge", "clean", fake_state, judge_mode="fix"),
    )
    slug = fleet.start(sample_repo, config, "--reviewer", "finder,quiet")
    pids = fleet.wait_launched(slug, "review:r1:finder", "finder")
    assert len(pids) == 2 and all(alive(p) for p in pids)  # the agent (deaf to SIGTERM) and its child

    r = fleet.jury("cancel", slug)
    assert r.returncode == 0 and f"cancelling {slug}" in r.stdout, r.stdout + r.stderr
    # killed, not left to its 900 s: the deadline is far below the agent's own time and far above a stall
    wait_for("the agent's group to be killed", lambda: not any(alive(p) for p in pids), 120, fleet.why(slug))

    state = fleet.wait_ended(slug, timeout=30)
    assert state.state == "cancelled" and state.target.state_note == "cancelled by the user"
    final = fleet.wait_settled(slug)  # the cancelled review ends after the run did
    assert final.state == "cancelled"
    first = final.round(1)
    assert first is not None and first.agents["finder"].state == "error"  # its report: cancelled
    assert final.findings == {}
    assert Ledger(fleet.client).spent(slug).reserved == 0
    shown = fleet.jury("show", slug)
    assert "cancelled" in shown.stdout, shown.stdout + shown.stderr
    assert worker.poll() is None

    # Resumed, it runs again: its cancel is spent, in the log and in the flag the workers read (both used
    # to stay, and the resumed run ended "cancelled" again at once). Its finder is slow once more, and a
    # cancel now is a new one, logged as such (one eid for every cancel made the second a duplicate).
    r = fleet.jury("review", "--resume", slug, "--detach")
    assert r.returncode == 0, r.stdout + r.stderr
    pids = fleet.wait_launched(slug, "review:r1:finder:e1", "finder", nth=2)
    assert fleet.jury("cancel", slug).returncode == 0
    wait_for("the resumed agent to be killed", lambda: not any(alive(p) for p in pids), 120, fleet.why(slug))
    again = fleet.wait_ended(slug, timeout=60)
    assert again.state == "cancelled" and again.epoch == 1, fleet.why(slug)()
    # Resumed once more, with a quick finder: the review runs to its end.
    r = fleet.jury("review", "--resume", slug, "--detach")
    assert r.returncode == 0, r.stdout + r.stderr
    resumed = fleet.wait_ended(slug, timeout=120)
    assert resumed.state == "converged", fleet.why(slug)()
    assert any(f.status == "accepted" for f in resumed.findings.values()), fleet.why(slug)()
