"""structlog set-up: key-value events to stderr, JSON when stderr is not a terminal; secrets redacted.

Secrets (an http model's API key, the forge's token, what an agent's entry passes through to it) are
registered with ``add_secret`` by whoever holds them, and ``redact`` is the one function that removes
them from text, in every spelling ``orchestrator.redaction`` knows. Gates use it so no path is left
open: ``workers.agents.seat.run_seat`` passes every agent's output through it before it enters the
record, the http runner everything it writes or emits for a run (transcript, events, report, tool
arguments and results), and ``configure`` makes it the last step of every log line of the
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

import logging
import sys
import threading
from collections.abc import Iterable
from typing import Any

import structlog

from orchestrator.redaction import REDACTED, Redactor

__all__ = ["REDACTED", "add_secret", "add_secrets", "redact", "redactor"]

_lock = threading.Lock()
_redactor = Redactor()


def add_secret(value: str | None) -> None:
    """Redact ``value`` in every spelling ``orchestrator.redaction`` knows (exact, JSON- and URL-escaped,
    split, reversed, hex, base64) from every later log line and ``redact`` call."""
    add_secrets([value] if value else [])


def add_secrets(values: Iterable[str]) -> None:
    """``add_secret`` for each of ``values``, with the one expression that finds them all built once."""
    global _redactor
    with _lock:
        _redactor = _redactor.with_secrets(values)


def redact(text: str) -> str:
    """``text`` with every spelling of every registered secret replaced by ``[redacted]``."""
    return _redactor.redact(text)


def redactor() -> Redactor:
    """The secrets registered so far, as one ``Redactor`` (it does not change once returned)."""
    return _redactor


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
