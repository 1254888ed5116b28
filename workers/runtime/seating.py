"""A job's agent in its seat: ``run_agent``, and the hooks every agent task runs its agent with.

The seat (``workers/agents/seat.py``) runs the agent, whatever its kind; what a job adds around it is a
list of ``SeatHooks``, each one concern:

- ``Held``: after the run, a holder that lost its lease stops (``LeaseLost``) and records nothing: the
  task that holds the action now settles it.
- ``Budget``: the ledger. The projected cost is reserved before the run (``BudgetExhausted`` when it is
  refused: the agent never starts) and settled after it; a seat that reserves per call (an http model)
  has each call reserved and settled instead, with the ``budget.*`` events of each.
- ``Progress``: ``agent.launch`` before the run, ``agent.alive`` while it runs (the latest tick kept beside
  the log, which it would grow without bound), ``tool.refused`` for every tool refused to a model.
- ``Capture``: the agent's stdout and stderr kept as artifacts of the run, and one log line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from orchestrator.domain import AgentAlive, AgentLaunch, BudgetSpent, Role, ToolRefused
from orchestrator.spec import agent_timeout
from workers.agents import AgentRun, Seat, SeatHooks, SeatRequest, run_seat
from workers.agents.seat import CALL_DROPPED, CALL_ENDED
from workers.isolation.limits import MAX_BACKOFFS, SLEEP_AT_MOST
from workers.runtime.context import Job, Runtime, ensure_held, reconcile, reserve, reserve_call

log = structlog.get_logger()


def run_agent(
    rt: Runtime,
    job: Job,
    *,
    role: Role,
    prompt: str,
    worktree: Path,
    name: str,
    session: str | None = None,
    resume: bool = False,
    checks: dict[str, str] | None = None,
) -> AgentRun:
    """Run the job's agent as ``role`` in ``worktree`` with the job's hooks; stops (killing the agent's
    group) when the job is ``interrupted``. It may run ``checks`` (default: the repository's declared
    checks) when its kind runs commands for a model."""
    cfg, spec = job.state.config, job.spec
    assert cfg is not None and job.action.agent is not None
    request = SeatRequest(
        spec=spec,
        role=role,
        prompt=prompt,
        worktree=worktree,
        out_dir=rt.run_dir(job.slug),
        name=name,
        timeout=agent_timeout(cfg.timeout, spec),
        base=job.state.target.base or "",
        checks=cfg.checks if checks is None else checks,
        session=session,
        resume=resume,
        sandbox=cfg.sandbox,
        grace=rt.settings.kill_grace,
        tick_every=cfg.alive_every,
        max_output=rt.settings.max_output,
        interrupted=job.interrupted,
        defer_after=defer_after(job),
        hooks=job_hooks(rt, job),
    )
    return run_seat(request)


def defer_after(job: Job) -> float | None:
    """How long the job's model may make it sleep in its worker slot before the action is put back
    (``RateLimited``): ``SLEEP_AT_MOST``. None (sleep every wait, capped, as outside a worker) only past
    ``MAX_BACKOFFS`` put-backs, which a worker never reaches: ``run_task`` ends the action as a failure at
    that refusal, so a spent quota ends its run instead of holding a slot."""
    return SLEEP_AT_MOST if job.action.backoffs < MAX_BACKOFFS else None


def attempt_key(job: Job, what: str) -> str:
    """The name of ``what`` (``call3``, ``refused-tool:1``) in the job's attempt: ``<key>:<what>`` in the
    first, ``<key>:b<k>:<what>`` after a model sent the action back ``k`` times (``RateLimited``). An
    attempt starts its agent afresh and counts from 1 again; its own names keep its calls' reservations,
    spend and refusals from merging into (being dropped as repeats of) the earlier attempts'."""
    a = job.action
    return f"{a.key}:{what}" if not a.backoffs else f"{a.key}:b{a.backoffs}:{what}"


def launch_eid(job: Job) -> str:
    """The name of the job's ``agent.launch``: ``attempt_key(job, "launch")`` (an attempt after a rate limit
    launches anew), and ``<that>:<n>`` for its ``n``-th launch when its worker died running it (each
    attempt launches once otherwise): the relaunch is an event of its own, so the timeline keeps the dead
    worker's run as abandoned beside the one that goes on, instead of the copy being dropped as a repeat."""
    a = job.action
    relaunch = a.launches - a.backoffs  # the launches of this attempt so far
    return attempt_key(job, "launch" if relaunch <= 0 else f"launch:{relaunch + 1}")


def job_hooks(rt: Runtime, job: Job) -> list[SeatHooks]:
    """The hooks of an agent task, in the order they run (``Held`` first after the run: a lost lease
    stops the task before it settles anything)."""
    return [Held(job), Budget(rt, job), Progress(rt, job), Capture(rt, job)]


class Held(SeatHooks):
    def __init__(self, job: Job) -> None:
        self.job = job

    def after_run(self, seat: Seat, request: SeatRequest, run: AgentRun) -> None:
        ensure_held(self.job)


class Budget(SeatHooks):
    def __init__(self, rt: Runtime, job: Job) -> None:
        self.rt, self.job = rt, job
        self.reserved = self.settled = 0  # calls of a seat that reserves per call

    def before_run(self, seat: Seat, request: SeatRequest) -> None:
        if not seat.reserves_per_call:
            reserve(self.rt, self.job)

    def before_call(self, request: SeatRequest, amount: float) -> bool:
        self.reserved += 1
        return reserve_call(self.rt, self.job, attempt_key(self.job, f"call{self.reserved}"), amount) is None

    def on_event(self, request: SeatRequest, name: str, fields: dict[str, Any]) -> None:
        if name not in (CALL_ENDED, CALL_DROPPED):
            return
        a = self.job.action
        self.settled += 1
        call_key = attempt_key(self.job, f"call{self.settled}")
        cost = fields.get("cost_usd") if name == CALL_ENDED else 0.0  # a dropped call was never made
        if name == CALL_ENDED:
            self.rt.ledger.reconcile(f"{self.job.slug}:{call_key}", cost)
        else:
            self.rt.ledger.release(f"{self.job.slug}:{call_key}")
        model = fields.get("model")
        spent = BudgetSpent(
            eid=f"{call_key}:spent",
            key=call_key,
            agent=a.agent or "",
            amount=cost,
            finding=a.finding,
            model=model if isinstance(model, str) else self.job.spec.model,
        )
        self.rt.store.append(self.job.slug, [spent])

    def after_run(self, seat: Seat, request: SeatRequest, run: AgentRun) -> None:
        if not seat.reserves_per_call:
            self.rt.store.append(self.job.slug, [reconcile(self.rt, self.job, run)])


class Progress(SeatHooks):
    def __init__(self, rt: Runtime, job: Job) -> None:
        self.rt, self.job = rt, job
        self.ticks = self.refusals = 0

    def before_run(self, seat: Seat, request: SeatRequest) -> None:
        a = self.job.action
        launch = AgentLaunch(
            eid=launch_eid(self.job),
            agent=a.agent or "",
            round=a.round,
            role=request.role,
            key=a.key,
            finding=a.finding,
        )
        self.rt.store.append(self.job.slug, [launch])

    def on_tick(self, request: SeatRequest, seconds: float, quiet: float) -> None:
        a = self.job.action
        self.ticks += 1
        alive = AgentAlive(
            eid=f"{a.key}:alive:{self.ticks}",
            agent=a.agent or "",
            round=a.round,
            seconds=round(seconds, 1),
            quiet_seconds=round(quiet, 1),
            key=a.key,
        )
        self.rt.store.put_alive(self.job.slug, alive)  # the latest tick, beside the log: it would grow it

    def on_event(self, request: SeatRequest, name: str, fields: dict[str, Any]) -> None:
        a = self.job.action
        if name == "tool.refused":
            self.refusals += 1
            refused = ToolRefused(
                eid=attempt_key(self.job, f"refused-tool:{self.refusals}"),
                key=a.key,
                agent=a.agent or "",
                tool=str(fields.get("tool")),
                role=request.role,
                reason=str(fields.get("reason")),
            )
            self.rt.store.append(self.job.slug, [refused])
        elif name not in (CALL_ENDED, CALL_DROPPED):
            log.info(f"agent.{name}", slug=self.job.slug, key=a.key, **fields)


class Capture(SeatHooks):
    def __init__(self, rt: Runtime, job: Job) -> None:
        self.rt, self.job = rt, job

    def after_run(self, seat: Seat, request: SeatRequest, run: AgentRun) -> None:
        output = {request.name + ".stdout.txt": run.stdout, request.name + ".stderr.txt": run.stderr}
        self.rt.store.put_artifacts(self.job.slug, {name: text.encode() for name, text in output.items()})
        log.info(
            "agent.ran",
            slug=self.job.slug,
            key=self.job.action.key,
            agent=self.job.action.agent,
            kind=request.spec.kind,
            exit_code=run.proc.exit_code,
            timed_out=run.proc.timed_out,
            seconds=round(run.proc.seconds, 1),
            cost_usd=run.cost_usd,
        )
