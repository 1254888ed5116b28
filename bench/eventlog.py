"""Event log: append and fold rates on both stores, what one coordinate pass costs as the log grows, and
what one reaper pass costs as the fleet holds more runs.

Every coordinate pass decides from the run's folded log; if its cost grows with the log, a long run (an
``agent.alive`` tick every few seconds per agent) makes the ``control`` queue the fleet's bottleneck.
The coordinate figure runs ``workers.runtime.coordinator.coordinate`` on a Runtime over the Redis store (the
fleet's), with a run whose reviewers are in flight, so a pass decides nothing new: what it costs is the
reading, folding and mirroring.

The reaper figure runs ``workers.runtime.coordinator.reap`` over that many such runs. One worker makes that
pass every reap period (``JURY_REAP_EVERY``), in a thread beside its tasks, and it reads every active run:
its cost grows with the number of runs the fleet holds, not with their logs, and it says how many runs a
fleet can hold before the pass takes a good part of its period.

The run-end figure is what expiring an ended run's keys costs (``RedisStore.expire_run``, on every pass
over an ended run) with more keys in the database beside it: other runs' keys, kept for
``JURY_RETENTION`` after they end (a week by default), so a busy fleet's database holds many. It reads the
run's key set; the SCAN of the whole database that the expiry made before the key set is timed beside it.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path

import redis

from bench.stats import Figure, figure, ratio, seconds_of
from orchestrator.config import Settings
from orchestrator.domain import (
    AgentAlive,
    AgentReport,
    Event,
    FindingRaised,
    FindingResolved,
    JuryConfigEvent,
    RoundStart,
    TargetEvent,
)
from orchestrator.fold import fold
from orchestrator.run_json import run_json
from orchestrator.spec import AgentSpec, JuryConfig, SandboxSettings, Target
from orchestrator.store.files import FileStore
from orchestrator.store.redis import RedisStore
from workers.runtime import coordinator
from workers.runtime.context import Runtime

SPEC = AgentSpec(name="a", argv=["a", "{prompt}"], judge_argv=["a", "{prompt}"])
BATCH = 20  # events per append: a job appends its launch, ticks, then its report and done in small batches


def head() -> list[Event]:
    """A run's first events: what to review and with whom (the sandbox off: nothing runs here)."""
    config = JuryConfig(
        reviewers=["a", "b"], judge="a", agents={"a": SPEC, "b": SPEC}, sandbox=SandboxSettings(mode="none")
    )
    return [
        TargetEvent(eid="target:0", target=Target(repo="r", id="1", state="review", head="h", base="b")),
        JuryConfigEvent(eid="config:0", config=config),
    ]


def history(n: int) -> list[Event]:
    """A plausible run of ``n`` events: rounds of two reviewers' alive ticks, reports, findings, verdicts."""
    events = head()
    rnd = 0
    while len(events) < n:
        rnd += 1
        events.append(RoundStart(eid=f"round.start:{rnd}", n=rnd, sha="h", prompt="p" * 2000))
        for agent in ("a", "b"):
            events += [
                AgentAlive(
                    eid=f"alive:{rnd}:{agent}:{i}", agent=agent, round=rnd, seconds=i * 5.0, quiet_seconds=1.0
                )
                for i in range(40)
            ]
            events.append(
                AgentReport(
                    eid=f"report:{rnd}:{agent}",
                    agent=agent,
                    round=rnd,
                    verdict="found",
                    seconds=200,
                    report="r" * 4000,
                )
            )
        for i in range(10):
            fid = f"r{rnd}-a-{i}"
            events.append(
                FindingRaised(
                    eid=f"raised:{fid}", id=fid, round=rnd, agent="a", claim=f"claim {i}", loc=f"f{i}.py:{i}"
                )
            )
            events.append(
                FindingResolved(eid=f"resolved:{fid}", id=fid, verdict="rejected", reason="no", who="a")
            )
    return events[:n]


@contextmanager
def scratch_prefix(client: redis.Redis) -> Iterator[str]:
    """A fresh key prefix, every key under it deleted afterwards."""
    prefix = f"bench-{uuid.uuid4().hex[:10]}"
    try:
        yield prefix
    finally:
        found = list(client.scan_iter(f"{prefix}:*", count=5000))
        for i in range(0, len(found), 1000):
            client.unlink(*found[i : i + 1000])


def append_all(store: RedisStore | FileStore, slug: str, events: list[Event]) -> float:
    t = time.perf_counter()
    for i in range(0, len(events), BATCH):
        store.append(slug, events[i : i + BATCH])
    return len(events) / (time.perf_counter() - t)


def rates(client: redis.Redis, n: int, repeat: int) -> list[Figure]:
    """Append (events/s, batches of 20), read and fold (events/s) of an ``n``-event run on each store."""
    events = history(n)
    out = [
        figure(
            "event log",
            f"fold {n:,} events",
            "events/s",
            [n / s for s in seconds_of(lambda: fold(events), repeat)],
        ),
    ]
    state = fold(events)
    out.append(
        figure(
            "event log",
            f"run.json of {n:,} events",
            "ms",
            [s * 1e3 for s in seconds_of(lambda: run_json(state), repeat)],
        )
    )
    r_append: list[float] = []
    r_read: list[float] = []
    f_append: list[float] = []
    f_read: list[float] = []
    for _ in range(repeat):
        with scratch_prefix(client) as prefix:
            rstore = RedisStore(client, prefix=prefix)
            r_append.append(append_all(rstore, "bench-run", events))
            r_read += [n / s for s in seconds_of(partial(rstore.read, "bench-run"), 1)]
        with tempfile.TemporaryDirectory() as d:
            fstore = FileStore(Path(d))
            f_append.append(append_all(fstore, "bench-run", events))
            f_read += [n / s for s in seconds_of(partial(fstore.read, "bench-run"), 1)]
    out += [
        figure("event log", f"redis append {n:,} events", "events/s", r_append, note=f"batches of {BATCH}"),
        figure("event log", f"redis read {n:,} events", "events/s", r_read),
        figure("event log", f"files append {n:,} events", "events/s", f_append, note=f"batches of {BATCH}"),
        figure("event log", f"files read {n:,} events", "events/s", f_read),
    ]
    return out


def runtime(client: redis.Redis, prefix: str, state_dir: Path, reap_after: float | None = None) -> Runtime:
    """A Runtime on the Redis store under ``prefix`` whose sends and kicks go nowhere (no worker runs);
    ``reap_after`` as the settings' (their default when None)."""
    settings = Settings(dir=state_dir)
    if reap_after is not None:
        settings = settings.model_copy(update={"reap_after": reap_after})
    return Runtime(
        settings=settings,
        store=RedisStore(client, prefix=prefix),
        files=FileStore(settings.dir),
        send=lambda kind, slug, key: None,
        kick=lambda slug: None,
    )


def coordinate_passes(client: redis.Redis, lengths: tuple[int, ...], repeat: int) -> list[Figure]:
    """Milliseconds of one coordinate pass over a run of each of ``lengths`` events, reviewers in flight:
    the runs are made first, then their passes taken in turns (``repeat`` each), so a shared machine's
    speed, which wanders within minutes, weighs alike on every length."""
    with ExitStack() as stack:
        runs: list[tuple[Runtime, str]] = []
        for length in lengths:
            prefix = stack.enter_context(scratch_prefix(client))
            d = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            runs.append((run_of(client, prefix, d, length), "bench-coordinate"))
        samples: list[list[float]] = [[] for _ in lengths]
        for _ in range(repeat):
            for i, (rt, slug) in enumerate(runs):
                samples[i] += seconds_of(partial(coordinator.coordinate, rt, slug), 1)
    return [
        figure("coordinate", f"pass at {n:,} events", "ms", [s * 1e3 for s in ms], appended=n)
        for n, ms in zip(lengths, samples, strict=True)
    ]


def run_of(client: redis.Redis, prefix: str, state_dir: Path, length: int) -> Runtime:
    """A runtime holding the run ``bench-coordinate`` of ``length`` events: its reviewers dispatched, then
    ``agent.alive`` ticks appended to its log (as an older log holds them), mirrored once into the files."""
    slug = "bench-coordinate"
    rt = runtime(client, prefix, state_dir)
    rt.store.append(slug, head())
    state = coordinator.coordinate(rt, slug)  # dispatches the reviewers
    keys = [a.key for a in state.inflight()]
    have = len(rt.store.read(slug))
    ticks: list[Event] = [
        AgentAlive(
            eid=f"alive:{i}",
            agent="a",
            round=1,
            seconds=float(i),
            quiet_seconds=1.0,
            key=keys[i % len(keys)],
        )
        for i in range(max(0, length - have))
    ]
    for i in range(0, len(ticks), 500):
        rt.store.append(slug, ticks[i : i + 500])
    coordinator.coordinate(rt, slug)  # the first pass after the ticks mirrors them all into the files
    return rt


def reap_pass(client: redis.Redis, active: int, repeat: int) -> list[Figure]:
    """Milliseconds of one reaper pass over ``active`` runs, each with its two reviewers sent and not yet
    taken (a fleet's backlog: the commonest case), and that per run. Their sends are young (``reap_after``
    an hour), so every pass reads each run and its actions' marks and leases and sends nothing again."""
    with scratch_prefix(client) as prefix, tempfile.TemporaryDirectory() as d:
        rt = runtime(client, prefix, Path(d), reap_after=3600.0)
        for i in range(active):
            slug = f"bench-reap-{i}"
            rt.store.create_run(slug)
            rt.store.append(slug, head())
            rt.store.activate(slug)
            state = coordinator.coordinate(rt, slug)  # dispatches its reviewers; no worker takes them
            if len(state.inflight()) != 2:
                raise RuntimeError(f"reaper bench: {slug} has {len(state.inflight())} actions in flight")
        ms = [s * 1e3 for s in seconds_of(lambda: coordinator.reap(rt), repeat)]
    return [
        figure("reaper", f"pass over {active:,} active runs", "ms", ms, active=active),
        figure("reaper", f"pass over {active:,} active runs, per run", "ms", [m / active for m in ms]),
    ]


def run_end(client: redis.Redis, others: int, repeat: int) -> list[Figure]:
    """Milliseconds of the expiry of one ended run's keys with ``others`` keys of other runs in the database
    (``done`` markers of 50 keys a run, as an ended run leaves them), read from its key set; and of the
    SCAN for the same keys, what the expiry cost before the key set."""
    slug = "bench-run-end"
    with scratch_prefix(client) as prefix, tempfile.TemporaryDirectory() as d:
        rt = runtime(client, prefix, Path(d))
        pipe = client.pipeline(transaction=False)
        for i in range(others):
            pipe.set(f"{prefix}:done:old-{i // 50}:review:r1:a{i % 50}", b"1", ex=3600)
            if i % 5000 == 4999:
                pipe.execute()
        pipe.execute()
        rt.store.append(slug, head())
        state = coordinator.coordinate(rt, slug)  # dispatches the reviewers: their sent marks
        for a in state.inflight():
            rt.store.put_artifact(slug, f"round-1.{a.agent}.stdout.txt", b"report")
        store = RedisStore(client, prefix=prefix)
        expire = [s * 1e3 for s in seconds_of(lambda: store.expire_run(slug, 3600), repeat)]
        scan = [s * 1e3 for s in seconds_of(lambda: store.scan_run_keys(slug), repeat)]
    beside = f"beside {others:,} keys"
    return [
        figure("run end", f"expire an ended run {beside}", "ms", expire, others=others),
        figure("run end", f"SCAN for its keys {beside} (before)", "ms", scan, others=others),
    ]


def measure(client: redis.Redis, *, quick: bool, repeat: int) -> list[Figure]:
    n = 10_000 if quick else 100_000
    out = rates(client, n, repeat)
    passes = coordinate_passes(client, (100, 1_000, 10_000), repeat=max(repeat, 25))
    out += passes
    out.append(
        ratio("coordinate", "pass at 10,000 / pass at 100", passes[-1], passes[0], note="target <= 2x")
    )
    for active in (100, 200) if quick else (100, 1_000):
        out += reap_pass(client, active, repeat)
    many = 20_000 if quick else 200_000
    alone, beside = run_end(client, 0, repeat=max(repeat, 5)), run_end(client, many, repeat=max(repeat, 5))
    out += [*alone, *beside]
    out.append(ratio("run end", f"expiry beside {many:,} keys / beside 0", beside[0], alone[0]))
    return out
