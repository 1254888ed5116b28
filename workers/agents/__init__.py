"""The runners of a jury seat, one per agent kind, behind one call."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.domain import AgentSpec, Role, SandboxSettings
from orchestrator.transcript import http_tools
from workers.agents.check import run_check_agent
from workers.agents.cli import AgentRun, run_cli_agent
from workers.agents.http import run_http_agent


def run_seat(
    spec: AgentSpec,
    *,
    role: Role,
    prompt: str,
    worktree: Path,
    out_dir: Path,
    name: str,
    timeout: float,
    base: str,
    checks: dict[str, str],
    grace: float = 5.0,
    tick_every: float = 30.0,
    on_tick: Callable[[float, float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    session: str | None = None,
    resume: bool = False,
    max_output: int | None = None,
    reserve: Callable[[float], bool] | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    sandbox: SandboxSettings | None = None,
) -> AgentRun:
    """Run ``spec`` as ``role`` in ``worktree``, whatever its kind: a CLI subprocess (``session``,
    ``resume``, ``max_output``), an OpenAI-compatible model with a tool loop (``checks`` it may run,
    ``reserve`` per call, ``on_event``), or a checker whose diagnostics on lines changed since ``base``
    become findings. ``sandbox`` (default: bubblewrap) confines the CLI agent, the checker and the checks an
    http model runs. Never raises for the agent failing: ``AgentRun.proc`` says how it ended."""
    common: dict[str, Any] = {
        "role": role,
        "prompt": prompt,
        "worktree": worktree,
        "out_dir": out_dir,
        "name": name,
        "timeout": timeout,
        "should_stop": should_stop,
    }
    if spec.kind == "http":
        run = run_http_agent(
            spec, checks=checks, reserve=reserve, on_event=on_event, sandbox=sandbox, **common
        )
        run.commands = http_tools(run.stderr)  # its tool calls, from the loop's own transcript
        return run
    if spec.kind == "check":
        return run_check_agent(
            spec, base=base, grace=grace, tick_every=tick_every, on_tick=on_tick, sandbox=sandbox, **common
        )
    return run_cli_agent(
        spec,
        session=session,
        resume=resume,
        grace=grace,
        tick_every=tick_every,
        on_tick=on_tick,
        max_output=max_output,
        sandbox=sandbox,
        **common,
    )
