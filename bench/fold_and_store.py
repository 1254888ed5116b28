"""How fast the event log is: folding a run, and appending to each store.

    python bench/fold_and_store.py            # needs Redis on 127.0.0.1:6379 (uses keys under bench-*)

Prints a table; numbers are per run on this machine, not assertions.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path

import redis
from rich.console import Console
from rich.table import Table

from orchestrator.domain import (
    AgentAlive,
    AgentReport,
    AgentSpec,
    Event,
    FindingRaised,
    FindingResolved,
    JuryConfig,
    JuryConfigEvent,
    RoundStart,
    Target,
    TargetEvent,
)
from orchestrator.fold import fold, run_json
from orchestrator.store.files import FileStore
from orchestrator.store.redis import RedisStore


def history(rounds: int, findings_per_round: int, alive_per_agent: int) -> list[Event]:
    """A plausible run: two reviewers, alive ticks, findings, resolutions."""
    spec = AgentSpec(name="a", argv=["a", "{prompt}"], judge_argv=["a", "{prompt}"])
    events: list[Event] = [
        TargetEvent(eid="target:0", target=Target(repo="r", id="1", state="review", head="h", base="b")),
        JuryConfigEvent(
            eid="config:0", config=JuryConfig(reviewers=["a", "b"], judge="a", agents={"a": spec, "b": spec})
        ),
    ]
    for n in range(1, rounds + 1):
        events.append(RoundStart(eid=f"round.start:{n}", n=n, sha="h", prompt="p" * 2000))
        for agent in ("a", "b"):
            events += [
                AgentAlive(
                    eid=f"alive:{n}:{agent}:{i}", agent=agent, round=n, seconds=i * 30.0, quiet_seconds=1.0
                )
                for i in range(alive_per_agent)
            ]
            events.append(
                AgentReport(
                    eid=f"report:{n}:{agent}",
                    agent=agent,
                    round=n,
                    verdict="found",
                    seconds=900,
                    report="r" * 4000,
                )
            )
        for i in range(findings_per_round):
            fid = f"r{n}-a-{i}"
            events.append(
                FindingRaised(
                    eid=f"raised:{fid}", id=fid, round=n, agent="a", claim=f"claim {i}", loc=f"f{i}.py:{i}"
                )
            )
            events.append(
                FindingResolved(eid=f"resolved:{fid}", id=fid, verdict="rejected", reason="no", who="a")
            )
    return events


def timed(fn, repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def main() -> int:
    console = Console()
    table = Table(title="event log: fold and append (median of 5)")
    for col in (
        "events",
        "fold ms",
        "run.json ms",
        "redis append ev/s",
        "redis read ms",
        "file append ev/s",
        "file read ms",
    ):
        table.add_column(col, justify="right")
    client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    for rounds, per_round, alive in ((2, 3, 10), (10, 10, 40), (10, 50, 120)):
        events = history(rounds, per_round, alive)
        fold_s = timed(partial(fold, events))
        state = fold(events)
        json_s = timed(partial(run_json, state))
        prefix = f"bench-{uuid.uuid4().hex[:8]}"
        rstore = RedisStore(client, prefix=prefix)
        slug = "bench-run"
        t = time.perf_counter()
        for i in range(0, len(events), 20):
            rstore.append(slug, events[i : i + 20])
        redis_rate = len(events) / (time.perf_counter() - t)
        redis_read = timed(partial(rstore.read, slug))
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)
        with tempfile.TemporaryDirectory() as d:
            fstore = FileStore(Path(d))
            t = time.perf_counter()
            for i in range(0, len(events), 20):
                fstore.append(slug, events[i : i + 20])
            file_rate = len(events) / (time.perf_counter() - t)
            file_read = timed(partial(fstore.read, slug))
        table.add_row(
            str(len(events)),
            f"{fold_s * 1e3:.1f}",
            f"{json_s * 1e3:.1f}",
            f"{redis_rate:,.0f}",
            f"{redis_read * 1e3:.1f}",
            f"{file_rate:,.0f}",
            f"{file_read * 1e3:.1f}",
        )
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
