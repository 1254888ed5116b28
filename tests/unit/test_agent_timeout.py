"""An agent's timeout is decided in one place, ``orchestrator.spec.agent_timeout``: the run's ``--timeout``,
else the agent's configured expectation (3x ``expect_seconds``, at least the default), else the default.

The table is the precedence; the last test is that the places that start an agent or a command (seating,
the judge's verification, the refute checks, ``jury refute``, ``jury verify``) decide it nowhere else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from orchestrator.spec import DEFAULT_TIMEOUT, AgentSpec, agent_timeout

ROOT = Path(__file__).resolve().parents[2]


def spec(expect_seconds: float) -> AgentSpec:
    return AgentSpec(name="a", argv=["a"], expect_seconds=expect_seconds)


@pytest.mark.parametrize(
    ("run_timeout", "agent", "expected", "why"),
    [
        (None, None, DEFAULT_TIMEOUT, "nothing set: the default (a command run for no agent)"),
        (None, spec(60), DEFAULT_TIMEOUT, "a quick agent still gets the default at least"),
        (None, spec(400), 1200.0, "the agent's configuration: 3x its expected seconds"),
        (90.0, spec(400), 90.0, "the run's --timeout wins over the agent's configuration"),
        (90.0, None, 90.0, "the run's --timeout wins over the default"),
        (5000.0, spec(10), 5000.0, "a --timeout above the agent's default is kept too"),
        (0.0, spec(400), 1200.0, "a zero timeout is none asked for: the agent's"),
        (-1.0, None, DEFAULT_TIMEOUT, "a negative one too: the default"),
    ],
)
def test_precedence(run_timeout: float | None, agent: AgentSpec | None, expected: float, why: str) -> None:
    assert agent_timeout(run_timeout, agent) == expected, why


DECIDERS = [
    "workers/runtime/seating.py",
    "workers/runtime/jobs.py",
    "workers/runtime/second_opinion.py",
    "workers/verification/reverify.py",
]


@pytest.mark.parametrize("path", DECIDERS)
def test_the_places_that_start_agents_resolve_through_agent_timeout(path: str) -> None:
    """No ``x.timeout or <something>`` and no ``default_timeout``: each timeout given to an agent or a
    command comes from ``agent_timeout``."""
    tree = ast.parse((ROOT / path).read_text())
    own: list[str] = []
    calls = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            first = node.values[0]
            name = first.attr if isinstance(first, ast.Attribute) else getattr(first, "id", "")
            if name == "timeout":
                own.append(ast.unparse(node))
        if isinstance(node, ast.Attribute) and node.attr == "default_timeout":
            own.append(ast.unparse(node))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "agent_timeout":
            calls += 1
    assert own == [], f"{path} decides a timeout itself: {own}"
    assert calls >= 1, f"{path} no longer resolves a timeout through agent_timeout"
