"""A seat: the runner of one agent kind, behind one protocol, with hooks around it.

Every agent kind (``orchestrator.agent_kinds``) has a seat registered in ``SEATS`` under the same name;
``run_seat`` looks it up from the request's ``spec.kind`` and runs it. What the seat needs is one
``SeatRequest``; what it returns is one ``AgentRun``. A seat never raises for its agent failing
(``AgentRun.proc`` says how it ended); it raises ``RateLimited`` when its model asks it to come back
later than ``SeatRequest.defer_after`` (the task then gives its worker slot up instead of sleeping).

Concerns that cut across every kind (reserving the budget, the events a run leaves, capturing its
output) are ``SeatHooks`` (docs/architecture.md, "Extension points"): a class whose every hook is a no-op
until overridden, a list of them on the request, each called in order. ``run_seat`` calls
``before_run`` and ``after_run``; the seat itself passes the hooks its agent reaches while it runs
(``request.tick`` while it is alive, ``request.reserve_call`` before each model call of a seat that
pays per call, ``request.event`` for what it reports).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from orchestrator.agent_kinds import AGENT_KINDS
from orchestrator.domain import Role
from orchestrator.logs import add_secrets, redactor
from orchestrator.registry import Registry
from orchestrator.spec import AgentSpec, SandboxSettings
from workers.agents.run import AgentRun
from workers.agents.secrets import agent_secrets, redact_files, redact_run
from workers.isolation.supervise import Interrupted

CALL_ENDED = "http.call"  # the event a seat that reserves per call sends as each call ends: {"cost_usd"}
# ... and as a reserved call ends unmade (its model sent it back: ``RateLimited``): the reservation goes.
CALL_DROPPED = "http.dropped"


@dataclass(frozen=True)
class SeatRequest:
    """One agent, one role, one run: everything any seat may need, each field read by the kinds it
    concerns and ignored by the others."""

    spec: AgentSpec
    role: Role
    prompt: str
    worktree: Path  # where it runs (its own checkout)
    out_dir: Path  # where ``<name>.prompt.md``, ``<name>.stdout.txt``, ``<name>.stderr.txt`` go
    name: str
    timeout: float  # seconds of wall clock, then its whole process group is killed
    base: str = ""  # the merge-base: a checker reports only on lines changed since it
    checks: Mapping[str, str] = field(default_factory=dict)  # commands a model may run, by name
    session: str | None = None  # a CLI agent's session to use (or resume)
    resume: bool = False
    sandbox: SandboxSettings | None = None  # None: bubblewrap with the default limits
    grace: float = 5.0  # seconds between TERM and KILL
    tick_every: float = 30.0  # seconds between ``tick``s while it runs
    max_output: int | None = None  # bytes of output kept, head and tail
    interrupted: Interrupted | None = None  # true: kill it now (lease lost, run cancelled)
    # A model's Retry-After longer than this many seconds ends the run with ``RateLimited`` instead of a
    # sleep; None: sleep (capped), as a command outside a worker's task does.
    defer_after: float | None = None
    hooks: Sequence[SeatHooks] = ()

    def tick(self, seconds: float, quiet: float) -> None:
        """The agent is alive after ``seconds``, silent for the last ``quiet`` of them."""
        for hook in self.hooks:
            hook.on_tick(self, seconds, quiet)

    def reserve_call(self, amount: float) -> bool:
        """May the next model call, projected at ``amount`` USD, be made? The first refusal says no."""
        return all(hook.before_call(self, amount) for hook in self.hooks)

    def event(self, name: str, fields: dict[str, Any]) -> None:
        """Something the agent's run reports (``CALL_ENDED``, ``tool.refused``, ...), its text redacted:
        what an agent said reaches no hook (an event, a log line) with a secret in it."""
        clean = redactor().redact_json(fields)
        for hook in self.hooks:
            hook.on_event(self, name, clean)


class Seat(Protocol):
    """The runner of one agent kind."""

    # True: the seat asks ``request.reserve_call`` before each model call and reports each call's cost
    # with ``CALL_ENDED``; False: the run is one call, reserved before it and settled after it.
    reserves_per_call: bool

    def run(self, request: SeatRequest) -> AgentRun: ...


class SeatHooks:
    """What happens around every seat's run; each hook does nothing unless overridden.

    ``before_run`` and ``after_run`` may raise to stop the job (a refused budget, a lost lease): the
    exception leaves ``run_seat`` as it is.
    """

    def before_run(self, seat: Seat, request: SeatRequest) -> None:
        return None

    def on_tick(self, request: SeatRequest, seconds: float, quiet: float) -> None:
        return None

    def before_call(self, request: SeatRequest, amount: float) -> bool:
        return True

    def on_event(self, request: SeatRequest, name: str, fields: dict[str, Any]) -> None:
        return None

    def after_run(self, seat: Seat, request: SeatRequest, run: AgentRun) -> None:
        return None


SEATS: Registry[Seat] = Registry("seat")


def register_seat(kind: str, seat: Seat) -> Seat:
    """Make ``seat`` the runner of the agent kind ``kind``, which must be declared."""
    AGENT_KINDS.check(kind)
    return SEATS.register(kind, seat)


def run_seat(request: SeatRequest) -> AgentRun:
    """Run ``request.spec`` in the seat of its kind, with the request's hooks around it.

    The one door by which any agent's output enters the record: the agent's secrets are registered
    before it starts (``agent_secrets``: so its own runner, and every log line, redact them too), and
    what it returns and the files it wrote are redacted before any hook or caller sees them."""
    seat = SEATS[request.spec.kind]
    add_secrets(agent_secrets(request.spec, os.environ))
    for hook in request.hooks:
        hook.before_run(seat, request)
    run = seat.run(request)
    clean = redactor()
    run = redact_run(run, clean)
    redact_files(request.out_dir, request.name, clean)
    for hook in request.hooks:
        hook.after_run(seat, request, run)
    return run
