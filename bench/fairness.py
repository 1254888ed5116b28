"""Fair sharing: how long one PR of another repository waits behind a sweep of one busy repository.

N runs of one repository (a sweep of its PRs) are started at once on W ``jury worker`` processes of
concurrency 1; once they hold every slot, one run of another repository is started. Each run is one
review of ``TASK`` seconds (the bench's fake agent, in Jury's sandbox) that finds nothing. The figure is
the other run's wait, from its start to its agent's launch, against one task's length: with ``[limits]
per_repo`` under W the busy repository cannot take the last slot, so the wait is at most about one task
(the issue's bound); without a limit the other run queues behind the whole sweep, which the second row
shows for contrast. Both settings run on the same workers, one after the other (the limit is read from
each run's operator file), so the fleet starts once.

Beside it, how soon the sweep drains: from its start until every run has ended, against its ideal, one
task after another on each slot it may take (``ceil(N / slots)`` tasks, slots being ``per_repo`` or W).
A task that found the repository's slots full waits in line and is sent again the moment a slot frees
(``workers.isolation.limits``); were it to wait out its put-back countdown instead (about
``JURY_LIMIT_WAIT``), the freed slot would stand idle meanwhile and the limited sweep would drain far slower
than its ideal.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from bench import fleet
from bench.stats import Figure, figure
from orchestrator.config import Settings
from orchestrator.demo import make_sample_repo
from orchestrator.domain import AgentLaunch, Event

if TYPE_CHECKING:
    from jury_cli.backend import Backend


def config(path: Path, task: float, per_repo: int | None) -> Path:
    """One reviewer that sleeps ``task`` seconds and finds nothing, a judge that is never asked."""
    agent = [str(fleet.AGENT), str(task), "0", "0", "0", "0", "{prompt_file}"]
    text = f"[agents.r1]\nargv = {json.dumps(agent)}\nexpect_seconds = 60\n"
    text += f"[agents.j]\nargv = {json.dumps(agent)}\njudge_argv = {json.dumps(agent)}\nexpect_seconds = 60\n"
    if per_repo is not None:
        text += f"\n[limits]\nper_repo = {per_repo}\n"
    path.write_text(text)
    return path


def first_events(settings: Settings, repo: Path, cfg: Path) -> list[Event]:
    from jury_cli.review import RunOptions, new_run

    opts = RunOptions(branch="feature", trunk="main", reviewers="r1", judge="j", config=cfg, refute=False)
    return new_run(settings, str(repo), opts).events


def launched_at(events: list[Event]) -> float | None:
    for e in events:
        if isinstance(e, AgentLaunch):
            return datetime.fromisoformat(e.ts.replace("Z", "+00:00")).timestamp()
    return None


class Sample(NamedTuple):
    """One sweep: the other run's wait, the sweep's drain (its start to its last run's end), end states."""

    wait: float
    drain: float
    states: list[str]


def one_wait(b: Backend, sweep: list[list[Event]], lone: list[Event], held: int) -> Sample:
    """Start the sweep's runs, then, once ``held`` of them have launched their agents (every slot the
    sweep can take), the other repository's run. Its wait (seconds from its start to its agent's launch),
    how long the sweep took to drain, and every run's end state: the call returns once all have ended, so
    the fleet is idle again."""
    began = time.time()
    slugs = [fleet.start_run(b, f"busy-{i}", events) for i, events in enumerate(sweep)]

    def launched() -> int:
        return sum(1 for s in slugs if launched_at(b.store.read(s)) is not None)

    fleet.wait_until("the sweep to hold its slots", lambda: launched() >= held, 120, 0.05)
    started = time.time()
    lone_slug = fleet.start_run(b, "other", lone)
    fleet.wait_until(
        "the other repository's agent to launch", lambda: launched_at(b.store.read(lone_slug)), 600, 0.05
    )
    wait = (launched_at(b.store.read(lone_slug)) or started) - started
    busy = set(slugs)
    fleet.wait_until("the sweep to end", lambda: not busy & set(b.store.active_runs()), 600, 0.05)
    drain = time.time() - began
    everyone = {*slugs, lone_slug}
    fleet.wait_until("every run to end", lambda: not everyone & set(b.store.active_runs()), 600, 0.1)
    states = [s or "gone" for s in b.store.run_states(sorted(everyone)).values()]
    return Sample(wait, drain, states)


def waits(
    url: str, n: int, w: int, task: float, limits: tuple[int | None, ...], repeat: int
) -> dict[int | None, list[Sample]]:
    """Each ``[limits] per_repo`` setting's samples (``repeat`` of them), on one fleet of ``w`` workers:
    the limit is the operator file's, read for each run, so every setting runs on the same workers, one
    after the other, each starting once the fleet is idle."""
    from jury_cli.backend import backend

    out: dict[int | None, list[Sample]] = {limit: [] for limit in limits}
    with tempfile.TemporaryDirectory() as d:
        base = Path(d)
        settings = Settings(dir=base / "state", redis_url=url)
        busy, other = make_sample_repo(base / "busy"), make_sample_repo(base / "other")
        procs = fleet.Processes(fleet.fleet_env(url, settings.dir), base / "logs")
        try:
            fleet.jury_workers(procs, w)
            with backend(settings, 1) as b:
                for _ in range(repeat):
                    for per_repo in limits:
                        cfg = config(base / f"jury-bench-{per_repo or 'none'}.toml", task, per_repo)
                        sweep = [first_events(settings, busy, cfg) for _ in range(n)]
                        lone = first_events(settings, other, cfg)
                        out[per_repo].append(one_wait(b, sweep, lone, held=min(w, per_repo or w)))
        finally:
            procs.stop()
    return out


def measure(base_url: str, *, quick: bool, repeat: int) -> list[Figure]:
    fleet.need_sandbox()
    n, w, task = (9, 4, 0.5) if quick else (50, 4, 2.0)
    out = []
    with fleet.private_db(base_url) as url:
        for per_repo, samples in waits(url, n, w, task, (w - 1, None), repeat).items():
            limit = f"per_repo = {per_repo}" if per_repo else "no [limits]"
            ends = [state for sample in samples for state in sample.states]
            out.append(
                figure(
                    "fair share",
                    f"one PR of another repo behind {n} of one, W={w}, {limit}: wait",
                    "s",
                    [sample.wait for sample in samples],
                    note=f"one task is {task:g} s" + fleet.ended_otherwise(ends),
                )
            )
            out.append(
                figure(
                    "fair share",
                    f"{limit}: wait / one task",
                    "x",
                    [sample.wait / task for sample in samples],
                    note="target <= 1 with per_repo under W" if per_repo else "for contrast",
                )
            )
            each = math.ceil(n / (per_repo or w))  # tasks one after another on each slot the sweep may take
            out.append(
                figure(
                    "fair share",
                    f"{limit}: the sweep drains in",
                    "s",
                    [sample.drain for sample in samples],
                    note=f"ideal {each * task:g} s: {each} tasks on each of its slots",
                )
            )
    return out


if __name__ == "__main__":  # a quick look: python -m bench.fairness
    for f in measure(sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/0", quick=True, repeat=1):
        print(f.name, round(f.median, 2), f.unit, f.note)
