"""structlog set-up: key-value events to stderr, JSON when stderr is not a terminal; secrets redacted.

Secrets (an http model's API key) are registered once with ``add_secret`` by whoever holds them, and
``redact`` is the one function that removes them from text. Two gates use it, so no path is left open:
the http runner passes everything it writes or emits for a run (transcript, events, report, tool
arguments and results) through it, and ``configure`` makes it the last step of every log line of the
process, applied to the rendered line itself — whatever field, nesting or exception text the key hid
in, it cannot reach stderr. A secret stays registered for the life of the process: a line logged after
its run ended must not leak it either.

Two set-ups. A command (``configure``) prints structlog's lines to stderr. A worker or beat process
(``configure_process``, called from Celery's ``setup_logging`` signal, so Celery sets up no logging of
its own and redirects no stream) sends structlog's lines and every standard-library logger's (Celery's,
kombu's) through one handler on the real stderr: one line per event, JSON when stderr is not a
terminal, with its true level (Celery's redirect used to wrap each JSON line in a ``WARNING/MainProcess``
line of its own), and the fields bound to the task that logged it (``bind_task``: run slug, action key,
task id) merged into every line, Celery's included.
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


def _renderer(json: bool | None, stream: Any) -> structlog.typing.Processor:
    if json is None:
        json = not stream.isatty()
    if json:
        return structlog.processors.JSONRenderer()
    return structlog.dev.ConsoleRenderer(colors=False)


def configure(level: str = "WARNING", json: bool | None = None) -> None:
    renderer = _renderer(json, sys.stderr)
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


def configure_process(
    level: str = "INFO", json: bool | None = None, library_level: str | None = None
) -> None:
    """A long-running process's logging (a worker, beat): structlog and the standard library alike, one
    line per event on the real stderr at its own level.

    ``level`` filters Jury's lines (``JURY_LOG_LEVEL``); ``library_level`` the other loggers' (Celery's
    ``--loglevel``; default ``level``).
    """
    stream = sys.__stderr__ or sys.stderr
    renderer = _renderer(json, stream)
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            stamp,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.stdlib.add_logger_name,
            stamp,
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            _redacting(renderer),
        ],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers = [handler]
    ours = logging.getLevelName(level.upper())
    theirs = logging.getLevelName((library_level or level).upper())
    root.setLevel(min(ours, theirs))  # the filters below (and structlog's own) do the rest
    for name in ("celery", "kombu", "amqp", "httpx", "httpcore"):
        logging.getLogger(name).setLevel(theirs)
    for name in ("orchestrator", "workers", "jury_cli"):  # structlog's loggers are named by module
        logging.getLogger(name).setLevel(ours)


def bind_task(task_id: str, task: str, slug: str | None, key: str | None) -> None:
    """Bind the running task's identity to every line its thread logs until ``unbind_task``."""
    structlog.contextvars.clear_contextvars()
    fields = {"task_id": task_id, "task": task, "slug": slug, "key": key}
    structlog.contextvars.bind_contextvars(**{k: v for k, v in fields.items() if v is not None})


def unbind_task() -> None:
    structlog.contextvars.clear_contextvars()
