"""Rate-limit policy, as pure functions of a response's status, headers and message and the time now.

Both forges say "wait" in the same few ways: ``Retry-After`` (seconds or an HTTP date), a remaining
count of zero with the epoch second it resets at (GitHub ``x-ratelimit-remaining``/``x-ratelimit-reset``,
GitLab ``RateLimit-Remaining``/``RateLimit-Reset``), and GitHub's secondary limits (a 403 or 429 whose
message says "secondary rate limit", to be waited out for at least a minute when no header says how long).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime

SECONDARY_DEFAULT = 60.0  # GitHub: without a header, wait at least a minute after a secondary limit
TOO_MANY_DEFAULT = 60.0  # a 429 that says nothing about when to come back
SERVER_BACKOFF = 2.0  # first wait after a 502/503/504, doubled each attempt
RETRYABLE_SERVER = frozenset({502, 503, 504})

_REMAINING = ("x-ratelimit-remaining", "ratelimit-remaining")
_RESET = ("x-ratelimit-reset", "ratelimit-reset")


def _first(headers: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = headers.get(name)
        if value is not None and value.strip():
            return value.strip()
    return None


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """``Retry-After`` in seconds from ``now`` (epoch seconds); None when absent or unreadable."""
    value = headers.get("retry-after")
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - now
    if seconds != seconds:  # NaN
        return None
    return max(seconds, 0.0)


def exhausted_until(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds until the quota resets when the response says none is left; None otherwise."""
    remaining = _first(headers, _REMAINING)
    if remaining is None:
        return None
    try:
        if int(float(remaining)) > 0:
            return None
    except ValueError:
        return None
    reset = _first(headers, _RESET)
    if reset is None:
        return None
    try:
        return max(float(reset) - now, 0.0)
    except ValueError:
        return None


def is_secondary(message: str) -> bool:
    return "secondary rate limit" in message.lower()


def retry_delay(
    status: int, headers: Mapping[str, str], message: str, now: float, attempt: int
) -> float | None:
    """How long to wait before trying a failed request again; None when it must not be retried.

    ``attempt`` counts the tries made so far (1 after the first). A 403 is only a rate limit when the
    headers or the message say so; any other 403 is a real refusal and fails at once.
    """
    if status in (403, 429):
        waited = retry_after(headers, now)
        if waited is not None:
            return waited
        waited = exhausted_until(headers, now)
        if waited is not None:
            return waited
        if is_secondary(message):
            return SECONDARY_DEFAULT * 2 ** (attempt - 1)
        return TOO_MANY_DEFAULT if status == 429 else None
    if status in RETRYABLE_SERVER:
        waited = retry_after(headers, now)
        return waited if waited is not None else SERVER_BACKOFF * 2 ** (attempt - 1)
    return None
