"""Dispatch: Jury's whole path for runs whose one agent exits at once, against Celery's no-op task.

Three sides, each on W worker processes of concurrency 1, one after another on the same Redis database
(``bench.fleet.private_db``), each measured after a warm-up:

- **jury**: runs of one reviewer that exits at once, through the whole path (coordinate, review: its
  checkout, the agent in its sandbox, its events; coordinate again), three tasks a run, on ``jury worker``
  processes;
- **celery**: Celery's own no-op task (``bench/noop.py``), Celery's defaults: the yardstick of the
  target (docs/benchmarks.md);
- **celery in Jury's app**: the same no-op in Jury's own Celery app (``bench/jury_noop.py``): what a worker
  spends handling one of Jury's tasks before Jury's code runs and after it returns, which no change to
  that code can shed.

Each side's figures also say whose CPU it spent a task (``bench/cpu.py``): on two busy cores, that is the
rate.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import redis
from celery import Celery

from bench import jury_noop, noop
from bench.cpu import CpuMeter, Spent
from bench.fleet import (
    ROOT,
    Processes,
    ended_otherwise,
    fleet_env,
    jury_workers,
    need_sandbox,
    prepare,
    private_db,
    submit_and_wait,
    wait_until,
)
from bench.stats import Figure, figure, ratio
from orchestrator.config import Settings

# The no-op sides: (the app's module, its task, its queue, extra worker options). Jury's app gets the
# options ``jury worker`` gives its workers.
NOOPS = {
    "celery": ("bench.noop", "bench.noop", "bench-noop", []),
    "jury app": (
        "bench.jury_noop",
        "bench.jury_noop",
        jury_noop.QUEUE,
        ["--without-gossip", "--without-mingle"],
    ),
}


def warm_up_runs(runs: int) -> int:
    """Runs each side gets before it is measured: a worker's first tasks pay for what it does once (lazy
    imports, its sandbox probe, its connections), which a fleet's long-lived workers do not pay a task."""
    return max(5, runs // 5)


def dispatch(url: str, runs: int, repeat: int, w: int = 2) -> list[Figure]:
    """``repeat`` times: ``runs`` Jury runs (after ``warm_up_runs``), then as many no-op tasks as they
    made (at least 200) on each no-op side. Jury's side is measured once the repositories it reviews are
    written to disk (their writeback would otherwise land in its measured stretch and in no other)."""
    client = redis.Redis.from_url(url)
    rates: dict[str, list[float]] = {"jury": [], **{side: [] for side in NOOPS}}
    spent: dict[str, list[tuple[Spent | None, int]]] = {side: [] for side in rates}
    ends: list[str] = []
    warm = warm_up_runs(runs)
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as d:
            base = Path(d)
            rate, used, states = jury_side(client, url, base, runs, warm, w)
            rates["jury"].append(rate)
            spent["jury"].append((used, 3 * runs))
            ends += states
            k = max(200, 3 * runs)
            env = fleet_env(url, base / "state")
            for side in NOOPS:
                side_procs = Processes(env, base / f"{side}-logs")
                rate, used = noop_side(client, url, side, side_procs, w, 3 * warm, k)
                rates[side].append(rate)
                spent[side].append((used, k))
    return figures(runs, w, rates, spent, ended_otherwise(ends))


def jury_side(
    client: redis.Redis, url: str, base: Path, runs: int, warm: int, w: int = 2, code: Path | None = None
) -> tuple[float, Spent | None, list[str]]:
    """``runs`` Jury runs (after ``warm`` more) on ``w`` fresh ``jury worker`` processes, their
    repositories and state under ``base``: tasks a second (three a run), the CPU they took and how each
    measured run ended. ``code``: another checkout of Jury for the workers to run (its directory then
    shown in the sandbox, where its sandboxed code runs from); None, this one. The workers are gone when
    it returns."""
    settings = Settings(dir=base / "state", redis_url=url)
    env = fleet_env(url, settings.dir)
    if code is not None:
        env["JURY_SANDBOX_RO_PATHS"] += f"{os.pathsep}{code}"
    procs = Processes(env, base / "logs", code=code or ROOT)
    try:
        firsts = prepare(settings, base, [None] * (warm + runs), "r2")
        warming, firsts = firsts[:warm], firsts[warm:]
        os.sync()
        jury_workers(procs, w)
        if warming:
            submit_and_wait(settings, warming, timeout=600)
        meter = CpuMeter([p.pid for p in procs.procs], client)
        meter.start()
        wall, states = submit_and_wait(settings, firsts, timeout=600)
        return 3 * runs / wall, meter.stop(), states
    finally:
        procs.stop()  # gone before anything else is measured


def noop_side(
    client: redis.Redis, url: str, side: str, procs: Processes, w: int, warm: int, k: int
) -> tuple[float, Spent | None]:
    """One no-op side on ``w`` fresh workers: ``warm`` tasks, then ``k`` measured; tasks a second and the
    CPU they took."""
    module, task, queue, options = NOOPS[side]
    argv = [sys.executable, "-m", "celery", "-A", module, "worker", "-P", "threads", "-c", "1"]
    argv += ["-l", "INFO", "-Q", queue, *options]
    try:
        logs = [procs.spawn(argv) for _ in range(w)]
        procs.ready(logs)
        sender = Celery("bench_sender", broker=url)
        noop_tasks(client, sender, task, queue, warm)
        meter = CpuMeter([p.pid for p in procs.procs], client)
        meter.start()
        rate = k / noop_tasks(client, sender, task, queue, k)
        return rate, meter.stop()
    finally:
        procs.stop()


def noop_tasks(client: redis.Redis, sender: Celery, task: str, queue: str, k: int) -> float:
    """Send ``k`` no-op tasks and wait until the workers ran them all; the seconds that took."""
    client.delete(noop.COUNTER)
    t0 = time.perf_counter()
    for _ in range(k):
        sender.send_task(task, queue=queue)
    wait_until("the no-op tasks", lambda: int(client.get(noop.COUNTER) or 0) >= k, 300, 0.01)
    return time.perf_counter() - t0


def figures(
    runs: int,
    w: int,
    rates: dict[str, list[float]],
    spent: dict[str, list[tuple[Spent | None, int]]],
    ended: str,
) -> list[Figure]:
    """The rates, the two ratios and each side's CPU figures."""
    j = figure(
        "dispatch",
        f"jury: agents that exit at once (W={w})",
        "tasks/s",
        rates["jury"],
        note=f"{runs} runs x 3 tasks (coordinate, review, coordinate)" + ended,
    )
    c = figure("dispatch", f"celery no-op tasks (W={w})", "tasks/s", rates["celery"])
    a = figure(
        "dispatch",
        f"celery no-op tasks in Jury's app (W={w})",
        "tasks/s",
        rates["jury app"],
        note="its configuration, signals and logging: bench/jury_noop.py",
    )
    out = [
        j,
        c,
        a,
        ratio("dispatch", "jury / celery", j, c, note="target >= 0.3"),
        ratio(
            "dispatch",
            "jury / celery in Jury's app",
            j,
            a,
            note="what Jury's own code leaves of its app's rate",
        ),
    ]
    for side, name in (("jury", "jury"), ("celery", "celery"), ("jury app", "celery in Jury's app")):
        out += cpu_figures(name, spent[side], children=side == "jury")
    return out


def cpu_figures(side: str, spent: list[tuple[Spent | None, int]], *, children: bool) -> list[Figure]:
    """Whose CPU a side's tasks took, in ms a task (``CpuMeter``), and the cores busy meanwhile: on a
    machine whose cores are all busy, the rate is what this CPU allows. No figure when not measurable here."""
    if not spent or any(s is None for s, _ in spent):
        return []
    rows = [(s, n) for s, n in spent if s is not None]

    def per_task(what: str, samples: list[float], note: str = "") -> Figure:
        return figure("dispatch", f"{side}: CPU in {what}", "ms/task", samples, note=note)

    out = [per_task("the workers", [1e3 * s.workers / n for s, n in rows])]
    if children:  # a no-op task starts no process
        samples = [1e3 * s.children / n for s, n in rows]
        out.append(per_task("their child processes", samples, note="git, bwrap, the agents"))
    out.append(per_task("Redis", [1e3 * s.redis / n for s, n in rows]))
    busy = [s.busy_cores for s, _ in rows]
    note = f"of {os.cpu_count()}, everything on the machine"
    return [*out, figure("dispatch", f"{side}: cores busy", "cores", busy, note=note)]


def measure_dispatch(base_url: str, *, quick: bool) -> list[Figure]:
    """The dispatch section: Jury's whole path against Celery's no-op task, and whose CPU each took."""
    need_sandbox()
    with private_db(base_url) as url:
        return dispatch(url, runs=10, repeat=1) if quick else dispatch(url, runs=50, repeat=3)
