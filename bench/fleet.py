"""Fleet: makespan efficiency and scaling, with real ``jury worker`` processes; the workers, runs and
Redis database the dispatch figures (``bench/dispatch.py``) use as well.

Every figure here runs whole reviews through Redis: ``jury review --detach``'s own path (``new_run``,
``run_review``) starts each run, W ``jury worker --concurrency 1`` subprocesses work them, the bench's
fake agent (``bench/fakes/agent.sh``) sleeps durations drawn from a fixed seed and answers, in Jury's
sandbox. The Redis database is one of the test databases, held with the tests' own lock file so no test
session flushes it meanwhile; it is flushed before and after.

The codejury schedule (one PR at a time, reviewers in parallel, triage one finding at a time) is computed
from the same drawn durations, not run: it is the sum over PRs of each PR's critical path.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import redis

from bench.stats import Figure, figure
from orchestrator.config import Settings
from orchestrator.demo import make_sample_repo
from orchestrator.domain import Event
from orchestrator.fold import fold
from orchestrator.spec import SandboxSettings
from workers.isolation.sandbox import sandbox_problem

if TYPE_CHECKING:
    from jury_cli.backend import Backend

ROOT = Path(__file__).resolve().parents[1]  # this checkout of Jury
FAKES = Path(__file__).resolve().parent / "fakes"
AGENT = FAKES / "agent.sh"
DBS = range(15, 0, -1)  # the tests take theirs from 1 up; the bench from 15 down
REVIEWERS = ("r1", "r2", "r3")


@contextmanager
def private_db(base_url: str) -> Iterator[str]:
    """A URL to a database of the machine's Redis nobody else uses meanwhile, empty before and after."""
    lock_dir = Path(tempfile.gettempdir()) / "jury-test-dbs"
    lock_dir.mkdir(exist_ok=True)
    root = base_url.rsplit("/", 1)[0] if base_url.count("/") > 2 else base_url
    for db in DBS:
        fh = (lock_dir / f"db{db}.lock").open("w")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue
        url = f"{root}/{db}"
        client = redis.Redis.from_url(url)
        client.flushdb()
        try:
            yield url
        finally:
            client.flushdb()
            client.close()
            fh.close()
        return
    raise RuntimeError("every Redis database 1..15 is held by a test session")


def wait_until(what: str, check, timeout: float, poll: float = 0.05):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"bench: timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(poll)


class Processes:
    """Worker subprocesses, each in its own process group, stopped (SIGTERM, then SIGKILL) on exit."""

    def __init__(self, env: dict[str, str], logs: Path, code: Path = ROOT) -> None:
        """``code``: the checkout of Jury they run (``python -m`` imports from its working directory)."""
        self.env, self.logs, self.procs = env, logs, []  # type: ignore[var-annotated]
        self.code = code
        self.signalled: set[int] = set()
        logs.mkdir(parents=True, exist_ok=True)

    def spawn(self, argv: list[str]) -> Path:
        log_path = self.logs / f"p{len(self.procs)}.log"
        with log_path.open("wb") as log:
            self.procs.append(
                subprocess.Popen(
                    argv,
                    env=self.env,
                    stdout=log,
                    stderr=log,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    cwd=self.code,
                )
            )
        return log_path

    def ready(self, logs: list[Path], timeout: float = 90) -> None:
        wait_until(
            "the workers to be ready", lambda: all(b" ready." in p.read_bytes() for p in logs), timeout, 0.1
        )

    def terminate(self) -> None:
        """Ask every process to stop (SIGTERM: a warm shutdown) without waiting: an idle worker takes a
        second or so to exit, which the next fleet's start-up can overlap (``jury_workers``)."""
        for p in self.procs:
            if p.poll() is None and p.pid not in self.signalled:
                os.killpg(p.pid, signal.SIGTERM)
                self.signalled.add(p.pid)

    def stop(self) -> None:
        self.terminate()
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs, self.signalled = [], set()


def fleet_env(url: str, state_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    ro = [str(FAKES), *filter(None, [env.get("JURY_SANDBOX_RO_PATHS")])]
    env.update(
        {
            "JURY_REDIS_URL": url,
            "BENCH_REDIS_URL": url,
            "JURY_DIR": str(state_dir),
            "JURY_SANDBOX_RO_PATHS": os.pathsep.join(ro),
            "JURY_LOG_LEVEL": "WARNING",
            "NO_COLOR": "1",
        }
    )
    return env


@dataclass
class Durations:
    """One PR's drawn agent seconds: each reviewer's rounds 1 and 2, the judge's triage of r1's finding,
    r1's reply to the verdict."""

    review1: tuple[float, float, float]
    review2: tuple[float, float, float]
    triage: float
    reply: float

    @property
    def critical_path(self) -> float:
        # The reply to the judge's verdict runs beside round 2's reviews (both dispatched at once).
        return max(self.review1) + self.triage + max(max(self.review2), self.reply)

    @property
    def total(self) -> float:
        return sum(self.review1) + sum(self.review2) + self.triage + self.reply


def draw(n: int, scale: float, seed: int = 12) -> list[Durations]:
    rng = random.Random(seed)

    def r(lo: float, hi: float) -> float:
        return round(rng.uniform(lo, hi) * scale, 3)

    return [
        Durations(
            review1=(r(2, 6), r(2, 6), r(2, 6)),
            review2=(r(1, 3), r(1, 3), r(1, 3)),
            triage=r(2, 5),
            reply=r(0.5, 1),
        )
        for _ in range(n)
    ]


def config_for(d: Durations | None, path: Path) -> Path:
    """The operator's file for one PR: three reviewers (r1 finds one thing) and a judge, as fake agents."""
    lines = []
    for i, name in enumerate(REVIEWERS):
        if d is None:  # an agent that exits at once: a clean review, no interpreter to start
            argv = ["sh", "-c", "echo NO NEW FINDINGS", "agent", "{prompt_file}"]
        else:
            find = "1" if i == 0 else "0"
            argv = [
                str(AGENT),
                str(d.review1[i]),
                str(d.review2[i]),
                str(d.reply),
                "0",
                find,
                "{prompt_file}",
            ]
        lines.append(f"[agents.{name}]\nargv = {json.dumps(argv)}\nexpect_seconds = 60\n")
    judge = [str(AGENT), "0", "0", "0", str(d.triage if d else 0), "0", "{prompt_file}"]
    lines.append(
        f"[agents.j]\nargv = {json.dumps(judge)}\njudge_argv = {json.dumps(judge)}\nexpect_seconds = 60\n"
    )
    path.write_text("\n".join(lines))
    return path


def prepare(
    settings: Settings, base: Path, plans: list[Durations | None], reviewers: str
) -> list[list[Event]]:
    """Each PR's repository, operator file and first events (what ``jury review`` resolves first)."""
    from jury_cli.review import RunOptions, new_run

    firsts = []
    for i, d in enumerate(plans):
        repo = make_sample_repo(base / f"pr{i}")
        cfg = config_for(d, base / f"pr{i}" / "jury-bench.toml")
        opts = RunOptions(
            branch="feature", trunk="main", reviewers=reviewers, judge="j", config=cfg, refute=False
        )
        firsts.append(new_run(settings, str(repo), opts).events)
    return firsts


def submit_and_wait(settings: Settings, firsts: list[list[Event]], timeout: float) -> tuple[float, list[str]]:
    """Start every run as ``jury review --detach`` does (append its first events, activate, kick); the
    seconds until every run ended (the coordinator deactivates a run as it ends), and their end states."""
    from jury_cli.backend import backend

    with backend(settings, 1) as b:
        t0 = time.perf_counter()
        slugs = [start_run(b, f"bench-pr-{i}", events) for i, events in enumerate(firsts)]
        wanted = set(slugs)
        wait_until("every run to end", lambda: not wanted & set(b.store.active_runs()), timeout, 0.05)
        seconds = time.perf_counter() - t0
        return seconds, [fold(b.store.read(s), s).state for s in slugs]


def ended_otherwise(states: list[str]) -> str:
    """A figure's note when some runs did not converge: their rate is not a review's, and says so."""
    bad = sorted({s for s in states if s != "converged"})
    return f"; {sum(s != 'converged' for s in states)} runs ended {bad}" if bad else ""


def start_run(b: Backend, name: str, events: list[Event]) -> str:
    """Start a run as ``jury review --detach`` does (``orchestrator.start.start_run``: registered, its first
    events appended, activated, its coordinator woken). Its slug: ``name`` and a clock reading, so each
    start is a run of its own."""
    from orchestrator.start import StartRequest
    from orchestrator.start import start_run as start

    wanted = f"{name}-{time.time_ns() % 10**12}"
    started = start(b.store, StartRequest(wanted, events), b.waker(), state_dir=b.settings.dir)
    assert started.slug is not None, started.refusal
    return started.slug


def jury_workers(procs: Processes, w: int, retiring: Processes | None = None) -> None:
    """Start ``w`` workers and wait until they are ready. ``retiring``, the previous fleet (already asked
    to stop), shuts down while these start, and is gone before they take any task."""
    logs = [
        procs.spawn([sys.executable, "-m", "jury_cli", "worker", "--concurrency", "1", "--loglevel", "INFO"])
        for _ in range(w)
    ]
    if retiring is not None:
        retiring.stop()
    procs.ready(logs, timeout=60 + 10 * w)  # many interpreters starting at once on two cores


def makespan(url: str, n: int, scale: float, workers: tuple[int, ...], repeat: int) -> list[Figure]:
    """Wall time of ``n`` PRs on W workers against the ideal, and against the codejury schedule."""
    plans = draw(n, scale)
    critical = max(d.critical_path for d in plans)
    total = sum(d.total for d in plans)
    codejury = sum(d.critical_path for d in plans)
    out: list[Figure] = []
    rates: dict[int, Figure] = {}
    by_w: dict[int, tuple[list[float], list[str]]] = {}
    with tempfile.TemporaryDirectory() as d:
        base = Path(d)
        # The PRs' repositories and first events once; each W gets a state directory and slugs of its own.
        firsts = prepare(Settings(dir=base / "prep", redis_url=url), base, list(plans), ",".join(REVIEWERS))
        fleets: list[Processes] = []  # one per measured run; each asked to stop once its run ends
        try:
            for w in workers:
                walls: list[float] = []
                ends: list[str] = []
                for _ in range(repeat):
                    settings = Settings(dir=base / f"state{len(fleets)}", redis_url=url)
                    procs = Processes(fleet_env(url, settings.dir), base / f"logs{len(fleets)}")
                    fleets.append(procs)
                    jury_workers(procs, w, retiring=fleets[-2] if len(fleets) > 1 else None)
                    wall, states = submit_and_wait(settings, firsts, timeout=max(600.0, 4 * total / w))
                    procs.terminate()
                    walls.append(wall)
                    ends += states
                by_w[w] = (walls, ends)
        finally:
            for procs in fleets:
                procs.stop()
    for w in workers:
        walls, ends = by_w[w]
        ideal = max(critical, total / w)
        note = f"ideal {ideal:.1f} s" + ended_otherwise(ends)
        out.append(figure("makespan", f"{n} PRs, W={w}: wall", "s", walls, note=note))
        out.append(
            figure("makespan", f"{n} PRs, W={w}: efficiency", "ideal/wall", [ideal / x for x in walls])
        )
        out.append(
            figure(
                "makespan",
                f"{n} PRs, W={w}: speed-up over codejury",
                "x",
                [codejury / x for x in walls],
                # Every slot busy with agents, the wall is total / W: no schedule does better than this.
                note=f"codejury schedule {codejury:.0f} s (simulated); at most {w * codejury / total:.2g}x",
            )
        )
        rates[w] = figure("scaling", f"throughput W={w}", "PRs/min", [n * 60 / x for x in walls])
    base_rate = rates[workers[0]]
    for w in workers:
        out.append(rates[w])
    for w in workers[1:]:
        r = rates[w]
        out.append(
            Figure(
                "scaling",
                f"W={w} / W={workers[0]}",
                "x",
                r.median / base_rate.median,
                r.low / base_rate.high,
                r.high / base_rate.low,
                r.runs,
                note="target >= 3.6x at W=8",
            )
        )
    return out


def need_sandbox() -> None:
    """Exit naming what is missing when Jury's sandbox cannot run here: every review would end at once in
    ``human``, and figures of that would be no review's."""
    problem = sandbox_problem(SandboxSettings())
    if problem is not None:
        raise SystemExit(f"bench: the fleet figures run agents in Jury's sandbox, not here: {problem}")


def measure(base_url: str, *, quick: bool, repeat: int = 1) -> list[Figure]:
    """The fleet section: makespan against the ideal and the codejury schedule, and scaling; ``repeat``
    runs of the workload per W (one by default: 200 PRs on W = 2 take about 40 minutes a run)."""
    need_sandbox()
    with private_db(base_url) as url:
        if quick:
            return makespan(url, n=20, scale=0.04, workers=(2, 4, 8), repeat=repeat)
        # W = 24 beyond the 2, 4, 8: the codejury comparison's target (8x) lies past what 8 slots
        # can give on this workload (W x codejury / total agent time, about 3.9x at W = 8).
        return makespan(url, n=200, scale=1.0, workers=(2, 4, 8, 24), repeat=repeat)
