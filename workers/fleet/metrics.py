"""Prometheus metrics: what this worker did (counters, derived from the events it appended) and what the
fleet is doing (gauges, read from Redis at each scrape through ``workers.fleet.fleetview``).

Two kinds of numbers, kept apart by their names:

- ``jury_fleet_*``: the fleet now, the same from every endpoint (``jury metrics``, every worker's
  ``/metrics``): runs by state, queue depths, tasks in flight, spend. Spend and run counts come from the
  runs' folds, as ``jury show`` computes them, so they agree with it; a gauge, not a counter, because a
  run's keys expire (``JURY_RETENTION``) and its spend leaves the sum with it.
- everything else: this worker process since it started, counters and a histogram; sum them over the
  instances. They are derived from the events the worker appends (``RedisStore.observers``), each
  counted once because the store tells only what an append added, plus the task signals of Celery
  (tasks in flight) and the reaper's answer (leases recovered).

A worker with the ``threads`` pool (the default) is one process: its endpoint serves its own registry.
With ``prefork`` the counters live in the pool's child processes: ``jury worker`` then sets
``PROMETHEUS_MULTIPROC_DIR`` to a fresh directory before anything imports prometheus_client, the
children write their values there (prometheus-client's multiprocess mode) and the parent's endpoint adds
them up (``MultiProcessCollector``).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import structlog
from celery.signals import task_postrun, task_prerun, worker_process_shutdown
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from orchestrator.domain import (
    ActionDone,
    AgentLaunch,
    AgentReport,
    BudgetRefused,
    BudgetSpent,
    Event,
    RefuteVerdict,
    ReplyAnswered,
    TargetEvent,
    ToolRefused,
)
from orchestrator.store.redis import RedisStore
from workers.fleet import fleetview

log = structlog.get_logger()

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# Agent runs last from seconds (a check) to an hour (a judge on a large repository).
DURATION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)
NO_SANDBOX_SUFFIX = ":no-sandbox"  # the eid of the event that ends a run a worker could not sandbox

disable_created_metrics()  # no ``*_created`` series: a counter's start is the process's start
OWN = CollectorRegistry()  # this process's metrics (served as they are with the threads pool)

TASKS_IN_FLIGHT = Gauge(
    "jury_worker_tasks_in_flight",
    "Tasks this worker is running now, by task kind (coordinate, reap, review, triage ...).",
    ["kind"],
    registry=OWN,
    multiprocess_mode="livesum",
)
TASKS = Counter(
    "jury_worker_tasks",
    "Tasks this worker ran to their end, by kind and Celery state (SUCCESS, FAILURE ...).",
    ["kind", "state"],
    registry=OWN,
)
AGENT_SECONDS = Histogram(
    "jury_agent_duration_seconds",
    "How long an agent ran, by agent and role (reviewer, judge, reply, refuter).",
    ["agent", "role"],
    buckets=DURATION_BUCKETS,
    registry=OWN,
)
SPEND = Counter(
    "jury_agent_spend_usd",
    "USD the agent calls this worker settled cost (known costs, and unknown ones charged at "
    "usd_per_minute), by agent and model.",
    ["agent", "model"],
    registry=OWN,
)
UNKNOWN_COSTS = Counter(
    "jury_agent_unknown_cost_calls",
    "Agent calls settled with an unknown cost (never counted as zero), by agent and model.",
    ["agent", "model"],
    registry=OWN,
)
REFUTATIONS = Counter(
    "jury_refutations",
    "Second opinions that ran, by source (verification, refuter) and outcome.",
    ["source", "outcome"],
    registry=OWN,
)
BUDGET_REFUSALS = Counter(
    "jury_budget_refusals",
    "Agent calls the budget ledger refused (run, call or fleet-day ceiling), by agent.",
    ["agent"],
    registry=OWN,
)
SANDBOX_REFUSALS = Counter(
    "jury_sandbox_refusals",
    "Actions refused because the run's sandbox cannot run on this worker (the run ends human).",
    registry=OWN,
)
TOOL_REFUSALS = Counter(
    "jury_tool_refusals",
    "Tool calls refused to an http agent (a tool its role lacks, a path outside its worktree), by agent.",
    ["agent", "tool"],
    registry=OWN,
)
LEASES_RECOVERED = Counter(
    "jury_leases_recovered",
    "Actions this worker's reaper handed out again after their worker died (taken, lease expired, not "
    "done); not the messages it sent again that no worker had taken.",
    registry=OWN,
)


class EventMetrics:
    """Counts what a process appends to the event log: ``observe`` is a ``RedisStore`` observer.

    An agent's duration is its report's ``seconds`` (reviewer, judge, reply); a role whose result carries
    no duration (the refuter) is timed here from its ``agent.launch`` to its action's ``action.done``.
    """

    MAX_PENDING = 4096  # launches waiting for their end (a task that lost its lease never ends here)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._launched: OrderedDict[tuple[str, str], tuple[str, str, float]] = OrderedDict()

    def observe(self, slug: str, events: list[Event]) -> None:
        for e in events:
            match e:
                case AgentLaunch(key=str() as key):
                    with self._lock:
                        self._launched[(slug, key)] = (e.agent, e.role, time.monotonic())
                        while len(self._launched) > self.MAX_PENDING:
                            self._launched.popitem(last=False)
                case AgentReport():
                    self._ended(slug, e.key)
                    AGENT_SECONDS.labels(e.agent, e.role).observe(e.seconds)
                case ReplyAnswered():
                    AGENT_SECONDS.labels(e.agent, "reply").observe(e.seconds)
                case ActionDone():
                    if (launched := self._ended(slug, e.key)) is not None and launched[1] != "reply":
                        agent, role, started = launched
                        AGENT_SECONDS.labels(agent, role).observe(time.monotonic() - started)
                case BudgetSpent():
                    labels = (e.agent, e.model or "")
                    charge = e.amount if e.amount is not None else e.charged
                    if charge:
                        SPEND.labels(*labels).inc(charge)
                    if e.amount is None:
                        UNKNOWN_COSTS.labels(*labels).inc()
                case RefuteVerdict():
                    REFUTATIONS.labels(e.source, e.outcome).inc()
                case BudgetRefused():
                    BUDGET_REFUSALS.labels(e.agent).inc()
                case ToolRefused():
                    TOOL_REFUSALS.labels(e.agent, e.tool).inc()
                case TargetEvent() if e.eid.endswith(NO_SANDBOX_SUFFIX):
                    SANDBOX_REFUSALS.inc()
                case _:
                    pass

    def _ended(self, slug: str, key: str | None) -> tuple[str, str, float] | None:
        if key is None:
            return None
        with self._lock:
            return self._launched.pop((slug, key), None)


EVENTS = EventMetrics()


def watch(store: RedisStore) -> None:
    """Count what ``store`` appends from now on (once per store)."""
    if EVENTS.observe not in store.observers:
        store.observers.append(EVENTS.observe)


def leases_recovered(n: int) -> None:
    if n:
        LEASES_RECOVERED.inc(n)


def _kind(task: Any) -> str:
    name = str(getattr(task, "name", "") or "")
    return name.removeprefix("jury.") or "unknown"


@task_prerun.connect
def _task_started(task: Any = None, **_: Any) -> None:
    TASKS_IN_FLIGHT.labels(_kind(task)).inc()


@task_postrun.connect
def _task_ended(task: Any = None, state: str | None = None, **_: Any) -> None:
    TASKS_IN_FLIGHT.labels(_kind(task)).dec()
    TASKS.labels(_kind(task), state or "UNKNOWN").inc()


@worker_process_shutdown.connect
def _child_gone(pid: int | None = None, **_: Any) -> None:
    """A prefork child that exits takes its live gauges with it (multiprocess mode only)."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid or os.getpid())


# --- the fleet ------------------------------------------------------------------------------------------


class FleetCollector(Collector):
    """The ``jury_fleet_*`` gauges, read from Redis at each scrape (``workers.fleet.fleetview``).

    A scrape that cannot read Redis still answers, with ``jury_fleet_up 0`` and no other fleet gauge, so
    the worker's own metrics are never lost with it.
    """

    def __init__(self, store: RedisStore) -> None:
        self.folds = fleetview.RunFolds(store)
        self._lock = threading.Lock()  # scrapes may come at once; the folds' cache is not shared safely

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("jury_fleet_up", "1 when the fleet's Redis could be read for this scrape.")
        try:
            with self._lock:
                fleet = fleetview.read(self.folds)
        except Exception as exc:  # Redis down or unreadable: say so, keep serving the rest
            log.warning("metrics.fleet_unreadable", error=str(exc))
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from fleet_families(fleet)


def fleet_families(fleet: fleetview.Fleet) -> Iterator[GaugeMetricFamily]:
    runs = GaugeMetricFamily("jury_fleet_runs", "Runs in the fleet's Redis, by state.", labels=["state"])
    for state, n in fleet.by_state.items():
        runs.add_metric([state], n)
    yield runs
    depth = GaugeMetricFamily(
        "jury_fleet_queue_depth", "Tasks waiting in each queue (no worker has taken them).", labels=["queue"]
    )
    for queue, n in fleet.queues.items():
        depth.add_metric([queue], n)
    yield depth
    flight = GaugeMetricFamily(
        "jury_fleet_tasks_in_flight",
        "Tasks of each queue delivered to a worker and not yet acknowledged (running, or reserved).",
        labels=["queue"],
    )
    for queue, n in fleet.in_flight.items():
        flight.add_metric([queue], n)
    yield flight
    actions = GaugeMetricFamily(
        "jury_fleet_actions_in_flight",
        "Actions of live runs dispatched and not yet done (queued or running), by kind.",
        labels=["kind"],
    )
    for kind, n in sorted(fleetview.actions_in_flight(fleet.runs.values()).items()):
        actions.add_metric([kind], n)
    yield actions
    spent = GaugeMetricFamily(
        "jury_fleet_spent_usd",
        "USD spent by the runs in the fleet's Redis, as `jury show` adds it up, by agent and its "
        "configured model.",
        labels=["agent", "model"],
    )
    for (agent, model), usd in sorted(fleet.spend.items()):
        spent.add_metric([agent, model], usd)
    yield spent
    workers = GaugeMetricFamily(
        "jury_fleet_workers", "Live workers (their presence in Redis) by state.", labels=["state"]
    )
    for state, n in fleetview.workers_by_state(fleet.workers).items():
        workers.add_metric([state], n)
    yield workers
    slots = GaugeMetricFamily(
        "jury_fleet_worker_slots",
        "Task slots of the running workers that consume each queue (0: no worker takes it).",
        labels=["queue"],
    )
    for queue, n in fleetview.worker_slots(fleet.workers, list(fleet.queues)).items():
        slots.add_metric([queue], n)
    yield slots
    unknown = GaugeMetricFamily(
        "jury_fleet_unknown_cost_calls", "Agent calls of the runs in the fleet's Redis whose cost is unknown."
    )
    unknown.add_metric([], fleetview.unknown_costs(fleet.runs.values()))
    yield unknown


def fleet_registry(store: RedisStore) -> CollectorRegistry:
    """A registry of the fleet's gauges alone (``jury metrics``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(store))
    return registry


def worker_registry(store: RedisStore) -> CollectorRegistry:
    """What a worker's endpoint serves: its own metrics (all pool children's under prefork), the process's
    and the fleet's."""
    path = os.environ.get(MULTIPROC_ENV)
    if path:
        from prometheus_client import multiprocess

        registry = CollectorRegistry(auto_describe=False)
        multiprocess.MultiProcessCollector(registry, path=path)
    else:
        registry = OWN
        if not getattr(registry, "jury_process", False):
            ProcessCollector(registry=registry)
            registry.jury_process = True  # type: ignore[attr-defined]
    registry.register(FleetCollector(store))
    return registry


def serve(port: int, registry: CollectorRegistry, addr: str = "127.0.0.1") -> int:
    """Serve ``registry`` on http://addr:port/metrics from a daemon thread; the port bound (0: any)."""
    server, _ = start_http_server(port, addr=addr, registry=registry)
    return int(server.server_port)


def exposition(registry: CollectorRegistry) -> str:
    """The registry's metrics in Prometheus' text format."""
    return generate_latest(registry).decode()
