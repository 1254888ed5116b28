"""What an agent call costs, or may cost: pure functions over prices and text (no I/O but one file read).

Prices come from ``config/prices.toml`` (``load_prices``): USD per million tokens, per ``vendor/model``.
Three answers, in order of trust:

- ``cost_from_report``: the dollars the CLI itself reported (claude's ``total_cost_usd``);
- ``cost_from_tokens``: tokens the CLI reported (``reported_tokens``: codex ``--json``, claude's JSON
  ``usage``), times the price table;
- ``projection``: a guess before the call runs, used to reserve budget (see its docstring).

``agent_cost`` gives a finished CLI call's cost from the first two, in that order. An answer that cannot
be given is ``None``, never 0: the ledger records it as unknown.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.codex_json import codex_usage, json_lines
from orchestrator.errors import ConfigError
from orchestrator.parse import report_cost

PRICES_FILE = "prices.toml"
PER_TOKENS = 1_000_000

# The projection heuristic (see ``projection``). An agent loop re-sends its growing context on every
# turn, so input dominates: ~100k input tokens and ~2k output tokens per minute of wall time is a
# deliberately high estimate of an uncached coding-agent session. For claude-sonnet-4 over 15 minutes it
# projects about $5; for gpt-5 over 20 minutes about $3.
INPUT_TOKENS_PER_MINUTE = 100_000
OUTPUT_TOKENS_PER_MINUTE = 2_000
# When neither a rate nor a model price is known: enough that a $0 ceiling refuses and a handful of calls
# make a small ceiling bite, small enough not to block a run on its own.
FLOOR_USD = 0.50


class ModelPrice(BaseModel):
    """One model's list price, USD per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0, allow_inf_nan=False)
    output: float = Field(ge=0, allow_inf_nan=False)


Prices = Mapping[str, ModelPrice]


def load_prices(config_dir: Path | None = None) -> dict[str, ModelPrice]:
    """The ``[models."vendor/model"]`` tables of ``<config_dir>/prices.toml`` (default: the built-in one).

    A missing file, bad TOML or a bad entry is a ConfigError naming the file and the model.
    """
    if config_dir is None:
        from orchestrator.config import config_dir as default_dir  # lazy: keep this module light

        config_dir = default_dir()
    path = config_dir / PRICES_FILE
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    extra = sorted(set(data) - {"models"})
    if extra:
        raise ConfigError(f'{path}: unknown table(s) {", ".join(extra)}; only [models."vendor/model"]')
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise ConfigError(f'{path}: models must be a table of [models."vendor/model"] tables')
    prices: dict[str, ModelPrice] = {}
    for name, table in models.items():
        if "/" not in name:
            raise ConfigError(f'{path}: models.{name!r}: name it "vendor/model"')
        try:
            prices[name] = ModelPrice.model_validate(table)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'table'}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"{path}: models.{name!r}: {problems}") from exc
    return prices


def find_price(model: str | None, prices: Prices) -> ModelPrice | None:
    """The price of ``model``: an exact ``vendor/model`` key, else the one entry named ``*/model``."""
    if not model:
        return None
    if model in prices:
        return prices[model]
    wanted = model.lower()
    matches = [
        p for name, p in prices.items() if name.lower() == wanted or name.split("/", 1)[-1].lower() == wanted
    ]
    return matches[0] if len(matches) == 1 else None


def cost_from_tokens(
    model: str | None, input_tokens: int, output_tokens: int, prices: Prices
) -> float | None:
    """USD for the tokens at the model's list price; None when the model's price is unknown."""
    if input_tokens < 0 or output_tokens < 0:
        raise ValueError(f"token counts must be >= 0, got {input_tokens} and {output_tokens}")
    price = find_price(model, prices)
    if price is None:
        return None
    return (input_tokens * price.input + output_tokens * price.output) / PER_TOKENS


def cost_from_report(stdout: str) -> float | None:
    """The dollars the CLI reported (claude JSON ``total_cost_usd``); None if absent or not a sane amount."""
    cost = report_cost(stdout)
    if cost is None or not math.isfinite(cost) or cost < 0:
        return None
    return cost


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def reported_tokens(stdout: str, report: str) -> tuple[int, int] | None:
    """The (input, output) tokens a CLI reported for the whole call, or None when it reported none.

    - ``codex-json`` (codex ``exec --json``): the ``usage`` of every ``turn.completed`` event, summed.
      codex counts cached input inside ``input_tokens``; it is priced in full, as the price table has no
      cache discount (the cost errs high, never low).
    - ``stream-json`` and ``result-json`` (claude ``--output-format``): the ``usage`` of the last
      ``result`` event, the call's total; claude counts cache writes and reads apart from
      ``input_tokens``, so they are added to the input.
    """
    if report == "codex-json":
        usage = codex_usage(stdout)
        if "input_tokens" not in usage and "output_tokens" not in usage:
            return None
        return usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    if report in ("stream-json", "result-json"):
        last: dict[str, object] | None = None
        for rec in json_lines(stdout):
            if rec.get("type") == "result" and isinstance(rec.get("usage"), dict):
                last = rec["usage"]
        if not last or ("input_tokens" not in last and "output_tokens" not in last):
            return None
        inputs = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        return sum(_count(last.get(k)) for k in inputs), _count(last.get("output_tokens"))
    return None


def agent_cost(stdout: str, report: str, model: str | None, prices: Prices) -> float | None:
    """What a finished CLI agent call cost: the dollars it reported, else the tokens it reported at the
    model's list price; None (unknown) when it reported neither or the model has no price."""
    dollars = cost_from_report(stdout)
    if dollars is not None:
        return dollars
    tokens = reported_tokens(stdout, report)
    return None if tokens is None else cost_from_tokens(model, *tokens, prices)


def projection(
    expect_seconds: float, usd_per_minute: float | None, model: str | None, prices: Prices
) -> float:
    """What one agent call may cost before it runs: the amount to reserve in the ledger.

    In order: ``usd_per_minute`` × expected minutes when a rate is configured (0 means free); else the
    model's price × ``INPUT_TOKENS_PER_MINUTE`` / ``OUTPUT_TOKENS_PER_MINUTE`` × expected minutes; else
    ``FLOOR_USD``. It is a reservation, given back at reconcile, so erring high only costs concurrency
    near a ceiling while erring low risks overshooting it.
    """
    if not math.isfinite(expect_seconds) or expect_seconds < 0:
        raise ValueError(f"expect_seconds must be >= 0, got {expect_seconds!r}")
    minutes = expect_seconds / 60
    if usd_per_minute is not None:
        if not math.isfinite(usd_per_minute) or usd_per_minute < 0:
            raise ValueError(f"usd_per_minute must be >= 0, got {usd_per_minute!r}")
        return usd_per_minute * minutes
    price = find_price(model, prices)
    if price is not None:
        per_minute = (
            INPUT_TOKENS_PER_MINUTE * price.input + OUTPUT_TOKENS_PER_MINUTE * price.output
        ) / PER_TOKENS
        return per_minute * minutes
    return FLOOR_USD
