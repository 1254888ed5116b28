"""Cost helpers: price table, tokens to dollars, reported dollars, the pre-call projection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config import config_dir
from orchestrator.cost import (
    FLOOR_USD,
    ModelPrice,
    cost_from_report,
    cost_from_tokens,
    find_price,
    load_prices,
    projection,
)
from orchestrator.errors import ConfigError

PRICES = {
    "openai/gpt-5": ModelPrice(input=1.25, output=10.0),
    "anthropic/claude-sonnet-4": ModelPrice(input=3.0, output=15.0),
    "acme/shared": ModelPrice(input=1.0, output=1.0),
    "other/shared": ModelPrice(input=2.0, output=2.0),
    "local/free": ModelPrice(input=0.0, output=0.0),
}


def test_builtin_prices_load() -> None:
    prices = load_prices(config_dir())
    for name in ("openai/gpt-5", "anthropic/claude-sonnet-4", "google/gemini-2.5-pro"):
        assert name in prices
        assert prices[name].input > 0 and prices[name].output > 0
    assert all("/" in name for name in prices)
    assert load_prices() == prices  # default: the built-in config dir


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[models."a/b"]\ninput = 1\n', "output"),
        ('[models."a/b"]\ninput = -1\noutput = 1\n', "input"),
        ('[models."a/b"]\ninput = 1\noutput = 1\ncached = 0.1\n', "cached"),
        ('[models."nobrand"]\ninput = 1\noutput = 1\n', "vendor/model"),
        ("[prices]\nx = 1\n", "unknown table"),
        ("[models\n", "invalid TOML"),
    ],
)
def test_bad_prices_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "prices.toml").write_text(text)
    with pytest.raises(ConfigError, match=message) as exc:
        load_prices(tmp_path)
    assert "prices.toml" in str(exc.value)


def test_missing_prices_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_prices(tmp_path)


@pytest.mark.parametrize(
    ("model", "found"),
    [
        ("openai/gpt-5", "openai/gpt-5"),
        ("gpt-5", "openai/gpt-5"),
        ("GPT-5", "openai/gpt-5"),
        ("claude-sonnet-4", "anthropic/claude-sonnet-4"),
        ("shared", None),  # ambiguous without the vendor
        ("acme/shared", "acme/shared"),
        ("gpt-6", None),
        ("", None),
        (None, None),
    ],
)
def test_find_price(model: str | None, found: str | None) -> None:
    assert find_price(model, PRICES) == (PRICES[found] if found else None)


@pytest.mark.parametrize(
    ("model", "inp", "out", "usd"),
    [
        ("openai/gpt-5", 1_000_000, 0, 1.25),
        ("openai/gpt-5", 0, 1_000_000, 10.0),
        ("gpt-5", 200_000, 10_000, 0.35),
        ("claude-sonnet-4", 1_000, 1_000, 0.018),
        ("local/free", 5_000_000, 5_000_000, 0.0),
        ("openai/gpt-5", 0, 0, 0.0),
        ("unknown/model", 1_000, 1_000, None),
        (None, 1_000, 1_000, None),
    ],
)
def test_cost_from_tokens(model: str | None, inp: int, out: int, usd: float | None) -> None:
    got = cost_from_tokens(model, inp, out, PRICES)
    assert got == (None if usd is None else pytest.approx(usd))


def test_cost_from_tokens_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="token counts"):
        cost_from_tokens("gpt-5", -1, 0, PRICES)


@pytest.mark.parametrize(
    ("stdout", "usd"),
    [
        (json.dumps({"type": "result", "result": "ok", "total_cost_usd": 0.4321}), 0.4321),
        (json.dumps({"total_cost_usd": 0}), 0.0),
        (json.dumps({"total_cost_usd": 2}), 2.0),
        ("\n".join([json.dumps({"total_cost_usd": 0.1}), json.dumps({"total_cost_usd": 0.3})]), 0.3),
        (json.dumps({"result": "no cost here"}), None),
        (json.dumps({"total_cost_usd": "0.5"}), None),
        (json.dumps({"total_cost_usd": -1.0}), None),
        (json.dumps({"total_cost_usd": True}), None),
        ("plain text, no json", None),
        ("", None),
    ],
)
def test_cost_from_report(stdout: str, usd: float | None) -> None:
    assert cost_from_report(stdout) == usd


@pytest.mark.parametrize(
    ("seconds", "rate", "model", "usd"),
    [
        (600, 0.10, None, 1.0),  # a configured rate wins
        (600, 0.10, "gpt-5", 1.0),  # ... even over a known model price
        (900, 0.0, "gpt-5", 0.0),  # rate 0: a free agent reserves nothing
        (0, 0.10, None, 0.0),
        (900, None, "claude-sonnet-4", 15 * (0.1 * 3.0 + 0.002 * 15.0)),  # 15 min × per-minute tokens
        (1200, None, "openai/gpt-5", 20 * (0.1 * 1.25 + 0.002 * 10.0)),
        (900, None, "local/free", 0.0),
        (900, None, "unknown/model", FLOOR_USD),  # nothing known: the floor
        (900, None, None, FLOOR_USD),
        (5, None, None, FLOOR_USD),
    ],
)
def test_projection(seconds: float, rate: float | None, model: str | None, usd: float) -> None:
    assert projection(seconds, rate, model, PRICES) == pytest.approx(usd)


def test_projection_of_builtin_models_is_plausible() -> None:
    prices = load_prices()
    for model in ("gpt-5", "claude-sonnet-4", "gemini-2.5-pro"):
        usd = projection(900, None, model, prices)
        assert 0.5 < usd < 20, (model, usd)


@pytest.mark.parametrize(
    ("seconds", "rate", "message"),
    [
        (-1, None, "expect_seconds must be >= 0"),
        (float("nan"), None, "expect_seconds must be >= 0"),
        (60, -0.1, "usd_per_minute must be >= 0"),
        (60, float("inf"), "usd_per_minute must be >= 0"),
    ],
)
def test_projection_rejects_bad_input(seconds: float, rate: float | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        projection(seconds, rate, None, PRICES)


def test_cost_module_stays_pure() -> None:
    source = Path(__file__).parents[2].joinpath("orchestrator", "cost.py").read_text()
    for name in ("redis", "httpx", "celery", "subprocess"):
        assert f"import {name}" not in source and f"from {name}" not in source
