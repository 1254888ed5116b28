"""What the Redis store makes of what Redis gives back: a stored JSON object that may be damaged (read as
absent, and logged), and redis-py's bytes as text and back. (A Redis failure becomes a ``StoreError`` in
``orchestrator.store.redis``, the one module that imports redis.)
"""

from __future__ import annotations

import json
from typing import Any

import structlog

log = structlog.get_logger()


def json_object(slug: str, raw: bytes | None, warning: str) -> dict[str, Any] | None:
    """A stored JSON object, or None if absent or unreadable (logged as ``warning``)."""
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        log.warning(warning, slug=slug, error=str(exc))
        return None
    if not isinstance(doc, dict):
        log.warning(warning, slug=slug, error="not a JSON object")
        return None
    return doc


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value
