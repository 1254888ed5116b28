"""structlog set-up: key-value events to stderr, JSON when stderr is not a terminal; secrets redacted.

Secrets (an http model's API key) are registered once with ``add_secret`` by whoever holds them, and
``redact`` is the one function that removes them from text. Two gates use it, so no path is left open:
the http runner passes everything it writes or emits for a run (transcript, events, report, tool
arguments and results) through it, and ``configure`` makes it the last step of every log line of the
process, applied to the rendered line itself — whatever field, nesting or exception text the key hid
in, it cannot reach stderr. A secret stays registered for the life of the process: a line logged after
its run ended must not leak it either.
"""

from __future__ import annotations

import json as jsonlib
import logging
import sys
import threading
from typing import Any

import structlog

REDACTED = "[redacted]"

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()


def add_secret(value: str | None) -> None:
    """Redact ``value`` (and its JSON-escaped spelling) from every later log line and ``redact`` call."""
    global _secrets
    if not value:
        return
    forms = {value, jsonlib.dumps(value)[1:-1]}
    with _lock:
        # Longest first: a secret that contains another is replaced whole.
        _secrets = tuple(sorted(set(_secrets) | forms, key=len, reverse=True))


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``[redacted]``."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _redacting(renderer: structlog.typing.Processor) -> structlog.typing.Processor:
    """``renderer`` whose rendered line is redacted: the last gate before a log line leaves."""

    def render(logger: Any, name: str, event: Any) -> Any:
        line = renderer(logger, name, event)
        return redact(line) if isinstance(line, str) else line

    return render


def configure(level: str = "WARNING", json: bool | None = None) -> None:
    if json is None:
        json = not sys.stderr.isatty()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _redacting(renderer),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
