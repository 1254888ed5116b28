"""The worker's context and what every agent task shares: the job read back from the log, its budget
(reserve, reconcile), its checkout, and the final append. Its agent runs through ``workers.runtime.seating``.

Each task reads the run's log, folds it, does its one piece of work and appends its result events in
one batch, ending with ``action.done``; then it kicks the coordinator. Event ids derive from the action
key, so a redelivered task that runs again appends nothing new.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import InitVar, dataclass, field
from functools import cache
from pathlib import Path

import redis
import structlog

from orchestrator.actions import ACTIONS
from orchestrator.config import Settings, config_dir
from orchestrator.cost import Prices, agent_cost, load_prices, projection
from orchestrator.domain import ActionDone, BudgetRefused, BudgetReserved, BudgetSpent, Event
from orchestrator.fold import DispatchedAction, RunState
from orchestrator.run_reader import read_state
from orchestrator.spec import TERMINAL_STATES, AgentSpec, Target
from orchestrator.store.base import LiveStore
from orchestrator.store.files import FileStore
from orchestrator.store.redis import RedisStore
from workers.agents.run import AgentRun
from workers.fleet.ledger import BudgetLedger, Ledger
from workers.isolation.limits import MemorySlots, RedisSlots, Slots
from workers.isolation.mirror import run_repo
from workers.isolation.names import run_key, safe_name
from workers.isolation.sandbox import require_sandbox
from workers.isolation.supervise import Interrupted
from workers.isolation.worktree import Worktrees, host_worktrees, repo_lock
from workers.runtime import shutdown
from workers.runtime.lease import Claim, Leases, RedisLeases
from workers.runtime.wake import due

log = structlog.get_logger()

Send = Callable[[str, str, str], None]  # (kind, slug, key): enqueue the task of that kind
SendLater = Callable[[str, str, str, float], None]  # ... to be taken after a countdown (seconds)


@dataclass
class Runtime:
    """What a worker's code reaches the world through: the live store, leases, the ledger, the files, and
    how to enqueue tasks. A fleet's is all Redis; a unit test's is the in-memory twins (``MemoryStore``,
    ``MemoryLeases``, ``MemoryLedger``) and a ``send``/``kick`` that only record."""

    settings: Settings
    store: LiveStore  # the live log and the control plane's marks
    files: FileStore  # the plain-file record under settings.dir
    send: Send
    kick: Callable[[str], None]  # enqueue coordinate(slug)
    lease_backend: InitVar[Leases | None] = None  # None: Redis leases beside a RedisStore
    ledger_backend: InitVar[BudgetLedger | None] = None  # None: the Redis ledger beside a RedisStore
    # How a task put back comes again after a countdown; None: ``send`` at once (the twins only record).
    send_later: SendLater | None = None
    # The actions whose tasks wait in the broker's queues, taken by no worker yet (fleetview.queued_actions);
    # None, or an answer of None: not known (the twins; a backlog too long to read): the reaper goes by age.
    queued: Callable[[], set[tuple[str, str]] | None] | None = None
    # How the action of a run none of whose actions has been taken yet is enqueued: behind the work that
    # continues runs already under way (``coordinator.send``; a fleet's: Celery's lowest priority); None:
    # ``send`` (the twins record both alike).
    send_new: Send | None = None
    slots_backend: InitVar[Slots | None] = None  # None: Redis semaphores beside a RedisStore, else memory
    leases: Leases = field(init=False)
    ledger: BudgetLedger = field(init=False)
    slots: Slots = field(init=False)  # the [limits] semaphores (workers/isolation/limits.py)

    def __post_init__(
        self, lease_backend: Leases | None, ledger_backend: BudgetLedger | None, slots_backend: Slots | None
    ) -> None:
        if (lease_backend is None or ledger_backend is None) and not isinstance(self.store, RedisStore):
            raise TypeError("a store other than RedisStore needs its lease_backend and ledger_backend given")
        self.leases = RedisLeases(self.client, self.prefix) if lease_backend is None else lease_backend
        self.ledger = Ledger(self.client, self.prefix) if ledger_backend is None else ledger_backend
        if slots_backend is None:
            redis_store = isinstance(self.store, RedisStore)
            slots_backend = RedisSlots(self.client, self.prefix) if redis_store else MemorySlots()
        self.slots = slots_backend

    def wake(self, slug: str) -> None:
        """Have the run's coordinator make a pass: ``kick``, unless a coordinate task of the run is already
        queued and not yet started (``workers.runtime.wake.due``). However many of its actions end, or reapers
        look at it, before that pass starts, it takes one pass, and the control queue holds one task per
        run at the most. The mark lapses after ``2 x reap_after``, so a lost message is sent again."""
        for due_slug in due(self.store, [slug], self.settings.reap_after):
            self.kick(due_slug)

    def later(self, kind: str, slug: str, key: str, seconds: float) -> None:
        """Enqueue the task of ``kind`` to be taken in ``seconds`` (``send_later``, else at once)."""
        if self.send_later is not None:
            self.send_later(kind, slug, key, seconds)
        else:
            self.send(kind, slug, key)

    @property
    def client(self) -> redis.Redis:
        """The Redis client of a Redis store (tests and diagnostics: the workers go through the store)."""
        if not isinstance(self.store, RedisStore):
            raise TypeError(f"no Redis client: the store is a {type(self.store).__name__}")
        return self.store.client

    @property
    def prefix(self) -> str:
        """The key prefix of a Redis store."""
        if not isinstance(self.store, RedisStore):
            raise TypeError(f"no key prefix: the store is a {type(self.store).__name__}")
        return self.store.prefix

    @property
    def worktrees(self) -> Worktrees:
        return host_worktrees(self.settings)

    def run_dir(self, slug: str) -> Path:
        """The run's record directory, private (0700, ``runs/`` too): agents write prompts and output here."""
        from orchestrator.store.files import private_dir

        private_dir(self.settings.dir / "runs")
        return private_dir(self.settings.dir / "runs" / slug)

    def cancelled(self, slug: str) -> bool:
        return self.store.cancel_flagged(slug)

    def repo(self, slug: str, target: Target, shas: Iterable[str | None] = ()) -> Path:
        """The repository the run's tasks work in on this host, holding the commits ``shas``: a PR's is
        this host's own mirror, completed from the forge and the run's patches
        (``workers/isolation/mirror.py``)."""
        return run_repo(
            self.settings.dir,
            target,
            shas,
            events=lambda: self.store.read(slug),
            patches=lambda name: self.store.get_artifact(slug, name),
            forge_hosts=self.settings.forge_hosts,
        )


def jury_branch(slug: str) -> str:
    return f"jury/{slug}"


@cache
def prices() -> Prices:
    return load_prices(config_dir())


class BudgetExhausted(Exception):
    """The ledger refused the reservation for the next agent call; the run cannot afford it."""


class LeaseLost(Exception):
    """The task's lease lapsed or went to another holder: the action is someone else's now, so this task
    records nothing (no result, no failure, no done marker) and leaves it to that holder or the reaper."""


class TaskInterrupt:
    """A task's ``Interrupted``: true once its lease is lost, its run is cancelled or its worker is handing
    its actions back at the end of a shutdown's grace (cheap: no Redis call).

    ``lost()`` asks Redis whether the lease is still ours, for the moments a task is about to record its
    result: a lease can lapse between two heartbeats (a worker frozen past its TTL). A worker handing back
    counts as having lost it: the action is the next holder's, so nothing is recorded here.
    """

    def __init__(self, lease: Claim, cancelled: Callable[[], bool]) -> None:
        self.lease, self.cancelled = lease, cancelled

    def __call__(self) -> bool:
        return self.lease.lost.is_set() or shutdown.handing_back() or self.cancelled()

    def lost(self) -> bool:
        return self.lease.lost.is_set() or shutdown.handing_back() or not self.lease.held()


@dataclass
class Job:
    """One dispatched action, read back from the log."""

    slug: str
    state: RunState
    action: DispatchedAction
    interrupted: Interrupted = field(default=lambda: False)  # true when the work must end now
    repo_path: Path | None = None  # this host's repository of the run (``Runtime.repo``), when resolved

    @property
    def spec(self) -> AgentSpec:
        assert self.state.config is not None and self.action.agent is not None
        return self.state.config.agents[self.action.agent]

    @property
    def repo(self) -> Path:
        """The run's repository on this host: set by ``load_job`` (a PR's mirror here), else the target's
        path (a local target)."""
        return self.repo_path or Path(self.state.target.path or ".")

    def done(self, ok: bool = True) -> ActionDone:
        return ActionDone(eid=f"{self.action.key}:done", key=self.action.key, ok=ok)


def load_job(rt: Runtime, slug: str, key: str, interrupted: Interrupted | None = None) -> Job | None:
    """The action to run, or None when it already ran or the run has ended (then it is marked done).

    ``SandboxUnavailable`` when the action would run code or an agent and the run's sandbox cannot run on
    this worker: nothing has started yet, and the caller ends the run ``human`` with the reason.
    """
    state = read_state(rt.store, slug)[0]
    action = state.actions.get(key)
    if action is None:
        log.warning("action.unknown", slug=slug, key=key)
        return None
    if action.done:
        log.info("action.already_done", slug=slug, key=key)
        return None
    job = Job(slug=slug, state=state, action=action, interrupted=interrupted or (lambda: False))
    if state.state in TERMINAL_STATES or state.cancel_requested:
        rt.store.append(slug, [job.done(ok=False)])
        return None
    if ACTIONS[action.kind].sandboxed and state.config is not None:
        require_sandbox(state.config.sandbox)  # no sandbox, no run: SandboxUnavailable ends the run human
    job.repo_path = rt.repo(slug, state.target, [action.sha, state.tip])
    return job


def holder_of(job: Job) -> str:
    """Who runs the job now: its task's lease token (short), so two holders never share a name."""
    interrupted = job.interrupted
    return interrupted.lease.token[:12] if isinstance(interrupted, TaskInterrupt) else uuid.uuid4().hex[:12]


def holder_name(job: Job, what: str) -> str:
    """A checkout name for ``what`` (verify, checks ...) that belongs to the job's current holder."""
    return f"{run_key(job.state)}.{safe_name(job.action.key)}.{what}.{holder_of(job)}"


@contextmanager
def agent_worktree(rt: Runtime, job: Job, sha: str) -> Iterator[Path]:
    """The job's checkout, named after its run, its action and its task's lease
    (``<slug>.<run id>.<key>.<holder>``).

    Two holders of one action (a worker frozen past its lease, then woken) never share a checkout, so the
    one that lost the action cannot remove the one its successor works in. Checkouts of the action left by
    earlier holders (dead, or gone since) are removed first: whoever holds the lease now is the only one
    entitled to one.
    """
    base = f"{run_key(job.state)}.{safe_name(job.action.key)}"
    holder = holder_of(job)
    wts = rt.worktrees
    if wts.root.is_dir():
        stale = [p for p in wts.root.iterdir() if re.fullmatch(re.escape(base) + r"\.[0-9a-f]{12}", p.name)]
        for path in stale:
            log.warning("worktree.stale_holder", slug=job.slug, key=job.action.key, path=str(path))
            with repo_lock(job.repo, wts.lock_dir):
                wts.clear(job.repo, path)
    repo = rt.repo(job.slug, job.state.target, [sha])  # a fix another host committed: rebuilt here
    with wts.checkout(repo, sha, name=f"{base}.{holder}") as wt:
        yield wt


def reserve_call(rt: Runtime, job: Job, call_key: str, amount: float) -> str | None:
    """Reserve ``amount`` for one call of the job's agent in the ledger, with its ``budget.*`` event;
    the refusal's reason, or None when reserved."""
    a, cfg = job.action, job.state.config
    res = rt.ledger.reserve(
        slug=job.slug,
        call_id=f"{job.slug}:{call_key}",
        projection=amount,
        run_ceiling=cfg.budget if cfg else None,
        call_ceiling=rt.settings.call_ceiling,
        day_ceiling=rt.settings.fleet_day_ceiling,
    )
    if not res.ok:
        reason = res.reason or "refused"
        event: Event = BudgetRefused(
            eid=f"{call_key}:budget-refused", key=call_key, agent=a.agent or "", reason=reason
        )
        rt.store.append(job.slug, [event])
        return reason
    rt.store.append(
        job.slug,
        [
            BudgetReserved(
                eid=f"{call_key}:reserved",
                key=call_key,
                agent=a.agent or "",
                amount=amount,
                finding=a.finding,
            )
        ],
    )
    return None


def reserve(rt: Runtime, job: Job) -> float:
    """Reserve the projected cost of the job's agent call in the ledger, or raise ``BudgetExhausted``."""
    spec = job.spec
    amount = projection(spec.expect_seconds, spec.usd_per_minute, spec.model, prices())
    if (refused := reserve_call(rt, job, job.action.key, amount)) is not None:
        raise BudgetExhausted(refused)
    return amount


def call_cost(run: AgentRun, spec: AgentSpec) -> float | None:
    """A finished call's actual cost: the runner's own (an http agent's), else what the CLI reported (its
    dollars, else its tokens at ``config/prices.toml``); None when unknown, never 0."""
    if run.cost_usd is not None:
        return run.cost_usd
    return agent_cost(run.stdout, spec.report, run.model or spec.model, prices())


def reconcile(rt: Runtime, job: Job, run: AgentRun) -> BudgetSpent:
    """Settle the reservation at the call's actual cost; an unknown cost is recorded as unknown."""
    spec, a = job.spec, job.action
    actual = call_cost(run, spec)
    charge = None
    if actual is None and spec.usd_per_minute is not None:
        charge = round(spec.usd_per_minute * run.proc.seconds / 60.0, 6)
    rt.ledger.reconcile(f"{job.slug}:{a.key}", actual, unknown_charge=charge)
    return BudgetSpent(
        eid=f"{a.key}:spent",
        key=a.key,
        agent=a.agent or "",
        amount=actual,
        charged=charge,
        finding=a.finding,
        model=run.model or spec.model,
    )


def run_failure(run: AgentRun) -> str | None:
    """Why the agent run failed, or None when it ran to completion."""
    p = run.proc
    if p.error:
        return p.error
    if p.timed_out:
        return f"timed out (killed with its process group after {p.seconds:.0f}s)"
    if p.cancelled:
        return "cancelled"
    return None


def stderr_tail(run: AgentRun) -> str:
    return run.stderr.strip()[-300:]


def ensure_held(job: Job) -> None:
    """Raise ``LeaseLost`` when the job's task no longer holds its lease."""
    if isinstance(job.interrupted, TaskInterrupt) and job.interrupted.lost():
        raise LeaseLost(f"{job.slug}:{job.action.key}")


def finish(rt: Runtime, job: Job, events: list[Event], ok: bool = True) -> None:
    ensure_held(job)
    rt.store.append(job.slug, [*events, job.done(ok)])
    rt.wake(job.slug)


def throttled(check: Callable[[], bool], every: float = 1.0) -> Callable[[], bool]:
    """``check`` asked at most once per ``every`` seconds; a True answer sticks."""
    last, answer = 0.0, False

    def ask() -> bool:
        nonlocal last, answer
        now = time.monotonic()
        if not answer and now - last >= every:
            last, answer = now, check()
        return answer

    return ask


REFUTATION_LOG_MAX = 1024 * 1024  # bytes before refutations.jsonl is rotated to refutations.jsonl.1


def log_refutation(rt: Runtime, slug: str, record: dict[str, object]) -> None:
    """One line of the run's refutation log (bounded, rotated once). Never fails the run."""
    try:
        path = rt.run_dir(slug) / "refutations.jsonl"
        if path.exists() and path.stat().st_size > REFUTATION_LOG_MAX:
            path.replace(path.with_name(path.name + ".1"))
        with path.open("a") as f:
            f.write(json.dumps({"ts": time.time(), **record}, default=str) + "\n")
    except (OSError, TypeError, ValueError) as exc:
        log.warning("refutation_log.failed", slug=slug, error=str(exc))
