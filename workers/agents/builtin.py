"""The built-in seats: ``cli`` (a subprocess), ``http`` (a model with Jury's tool loop), ``check`` (a
deterministic checker). Each turns a ``SeatRequest`` into its runner's arguments, and nothing more."""

from __future__ import annotations

from typing import Any

from orchestrator.transcript import http_tools
from workers.agents.check import run_check_agent
from workers.agents.cli import run_cli_agent
from workers.agents.http import run_http_agent
from workers.agents.run import AgentRun
from workers.agents.seat import SeatRequest, register_seat


def common(r: SeatRequest) -> dict[str, Any]:
    """The arguments every runner takes alike."""
    return {
        "role": r.role,
        "prompt": r.prompt,
        "worktree": r.worktree,
        "out_dir": r.out_dir,
        "name": r.name,
        "timeout": r.timeout,
        "interrupted": r.interrupted,
        "sandbox": r.sandbox,
    }


class CliSeat:
    """A CLI agent: one process, reserved as one call from its spec's projection."""

    reserves_per_call = False

    def run(self, r: SeatRequest) -> AgentRun:
        return run_cli_agent(
            r.spec,
            **common(r),
            session=r.session,
            resume=r.resume,
            grace=r.grace,
            tick_every=r.tick_every,
            on_tick=r.tick,
            max_output=r.max_output,
        )


class HttpSeat:
    """An OpenAI-compatible model: each call reserved and settled on its own; its commands are its tool
    calls, read from the loop's own transcript."""

    reserves_per_call = True

    def run(self, r: SeatRequest) -> AgentRun:
        run = run_http_agent(
            r.spec,
            **common(r),
            checks=dict(r.checks),
            reserve=r.reserve_call,
            on_event=r.event,
            defer_after=r.defer_after,
        )
        run.commands = http_tools(run.stderr)
        return run


class CheckSeat:
    """A checker: diagnostics on the lines changed since ``base`` become findings; no model, no cost."""

    reserves_per_call = False

    def run(self, r: SeatRequest) -> AgentRun:
        return run_check_agent(
            r.spec,
            **common(r),
            base=r.base,
            grace=r.grace,
            tick_every=r.tick_every,
            on_tick=r.tick,
        )


register_seat("cli", CliSeat())
register_seat("http", HttpSeat())
register_seat("check", CheckSeat())
