"""A finished CLI call's cost: the dollars it reported, else the tokens it reported at the list price.

The token counts are read from what each CLI prints (codex ``--json`` ``turn.completed`` usage, claude's
``result`` usage), as hostile text: nothing there but the documented answer or None.
"""

from __future__ import annotations

import json

import pytest

from orchestrator.cost import ModelPrice, agent_cost, reported_tokens

PRICES = {
    "openai/gpt-5": ModelPrice(input=1.25, output=10.0),
    "anthropic/claude-x": ModelPrice(input=3, output=15),
}


def lines(*events: dict) -> str:
    return "\n".join(json.dumps(e) for e in events) + "\n"


CODEX = lines(
    {"type": "thread.started", "thread_id": "t"},
    {
        "type": "turn.completed",
        "usage": {"input_tokens": 150_000, "cached_input_tokens": 100_000, "output_tokens": 6_000},
    },
    {"type": "item.completed", "item": {"type": "agent_message", "text": "NO NEW FINDINGS"}},
    {"type": "turn.completed", "usage": {"input_tokens": 50_000, "output_tokens": 4_000}},
)
CLAUDE = lines(
    {"type": "assistant", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}},
    {
        "type": "result",
        "result": "NO NEW FINDINGS",
        "usage": {
            "input_tokens": 10_000,
            "cache_creation_input_tokens": 20_000,
            "cache_read_input_tokens": 70_000,
            "output_tokens": 2_000,
        },
    },
)


@pytest.mark.parametrize(
    ("stdout", "report", "expected"),
    [
        (CODEX, "codex-json", (200_000, 10_000)),  # summed over turns; cached input is inside input_tokens
        (CLAUDE, "stream-json", (100_000, 2_000)),  # the result's total; cache writes and reads added
        (CLAUDE, "result-json", (100_000, 2_000)),
        (CODEX, "whole", None),  # a plain report says nothing of tokens
        (CODEX, "stream-json", None),  # codex events are not claude's
        (lines({"type": "turn.completed", "usage": {}}), "codex-json", None),
        (lines({"type": "turn.completed"}), "codex-json", None),
        (lines({"type": "result", "usage": {"input_tokens": "many"}}), "stream-json", (0, 0)),
        (
            lines({"type": "result", "usage": {"output_tokens": -5, "input_tokens": True}}),
            "stream-json",
            (0, 0),
        ),
        ("not json at all\n{torn", "codex-json", None),
        ("", "stream-json", None),
    ],
)
def test_reported_tokens(stdout: str, report: str, expected: tuple[int, int] | None) -> None:
    assert reported_tokens(stdout, report) == expected


def test_tokens_are_priced_when_no_dollars_are_reported() -> None:
    # 200k input at $1.25/M + 10k output at $10/M
    assert agent_cost(CODEX, "codex-json", "openai/gpt-5", PRICES) == pytest.approx(0.35)
    assert agent_cost(CODEX, "codex-json", "gpt-5", PRICES) == pytest.approx(0.35)  # a bare model name
    assert agent_cost(CLAUDE, "stream-json", "anthropic/claude-x", PRICES) == pytest.approx(0.33)


def test_reported_dollars_come_first() -> None:
    with_cost = CLAUDE + json.dumps({"type": "result", "total_cost_usd": 0.0123}) + "\n"
    assert agent_cost(with_cost, "stream-json", "anthropic/claude-x", PRICES) == pytest.approx(0.0123)


@pytest.mark.parametrize(
    ("stdout", "report", "model"),
    [
        (CODEX, "codex-json", None),  # no model: no price
        (CODEX, "codex-json", "acme/unpriced"),
        ("NO NEW FINDINGS\n", "whole", "openai/gpt-5"),  # nothing reported
    ],
)
def test_an_unknown_cost_is_none_never_zero(stdout: str, report: str, model: str | None) -> None:
    assert agent_cost(stdout, report, model, PRICES) is None
