"""What the Redis store makes of what Redis gives back: a stored JSON object that may be damaged (read as
absent, and logged), a stream's entries as events (garbage skipped, and logged), the control plane's
marks, a run's state, a sweep's claims, and redis-py's bytes as text and back. (A Redis failure becomes a
``StoreError`` in ``orchestrator.store.redis``, the one module that imports redis.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import structlog
from pydantic_core import to_json

from orchestrator.domain import Event, parse_event
from orchestrator.store.base import SentMark, SweepClaim

log = structlog.get_logger()

# A page of a stream, as XRANGE gives it: (entry id, fields).
Entries = list[tuple[bytes, dict[bytes, bytes]]]


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


def snapshot_record(doc: dict[str, Any]) -> bytes:
    """A snapshot as it is stored: its position, a newline, its JSON (printed by pydantic-core), so
    ``READ_FROM_SNAPSHOT_LUA`` reads the position without parsing the JSON. A snapshot with a reaper's
    digest (``doc["reap"]``: ``workers.fleet.reaping``) has it, with the log's origin, on a line of its own
    between the two, so ``REAP_DIGEST_LUA`` hands it over without the body. Compact JSON holds no
    newline, so the lines are the record's own."""
    head = f"{doc.get('position') or ''}\n".encode()
    if "reap" in doc:
        head += to_json({"origin": doc.get("origin"), "reap": doc["reap"]}) + b"\n"
    return head + to_json(doc)


def snapshot_doc(slug: str, raw: bytes | None) -> dict[str, Any] | None:
    """A stored snapshot (``snapshot_record``: its JSON is its last line; a snapshot stored before the
    position led it is JSON alone), or None if absent or unreadable (logged)."""
    if raw is not None and not raw.startswith(b"{"):
        raw = raw.rpartition(b"\n")[2]
    return json_object(slug, raw, "store.bad_snapshot")


def reap_digest(slug: str, answer: list[bytes] | None) -> dict[str, Any] | None:
    """The digest of ``REAP_DIGEST_LUA``'s answer when it is of this log (its origin), else None."""
    if not answer:
        return None
    first, line = answer
    found = json_object(slug, line, "store.bad_reap_digest")
    if found is None or found.get("origin") != text(first):
        return None
    digest = found.get("reap")
    return digest if isinstance(digest, dict) else None


def script_entries(raw: Sequence[Any]) -> Entries:
    """Stream entries as a Lua script returns them (each an id and a flat list of fields and values) in
    the shape redis-py gives XRANGE's (each an id and a dict)."""
    return [(entry_id, dict(zip(fields[::2], fields[1::2], strict=True))) for entry_id, fields in raw]


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


def stream_events(slug: str, entries: Entries, first_line: int | None = None) -> list[Event | None]:
    """Each entry's event (its ``e`` field), None for one that does not parse: logged as
    ``store.skipped_line``, with its line in the log when ``first_line`` numbers the first entry."""
    out: list[Event | None] = []
    for i, (entry_id, fields) in enumerate(entries):
        raw = next((value for name, value in fields.items() if text(name) == "e"), None)
        try:
            event = parse_event(raw) if raw is not None else None
        except ValueError:
            event = None
        if event is None:
            line = {} if first_line is None else {"line": first_line + i}
            log.warning("store.skipped_line", slug=slug, entry=text(entry_id), **line)
        out.append(event)
    return out


def sent_marks(
    slug: str, action_keys: Sequence[str], values: Sequence[bytes | None], now: float
) -> list[SentMark | None]:
    """The actions' marks from one MGET of their sent, taken and resent marks (three values an action, in
    that order): None without a sent mark, or with marks that do not parse (logged)."""
    out: list[SentMark | None] = []
    for i, key in enumerate(action_keys):
        due, taken, resent = values[3 * i : 3 * i + 3]
        if due is None:
            out.append(None)
            continue
        try:
            age = now - float(due)
            resends = int(resent) if resent is not None else 0
        except ValueError:
            log.warning("store.bad_sent_mark", slug=slug, key=key)
            out.append(None)
            continue
        out.append(SentMark(age=age, taken=taken is not None, resends=resends))
    return out


def target_state(slug: str, raw: bytes | None) -> str:
    """The ``target.state`` of a run's stored fold: ``queued`` when it names none, or is damaged (logged as
    ``store.bad_state``)."""
    doc = json_object(slug, raw, "store.bad_state") or {}
    target = doc.get("target")
    word = target.get("state") if isinstance(target, dict) else None
    return word if isinstance(word, str) and word else "queued"


def sweep_claim(outcome: bytes, holder: bytes) -> SweepClaim:
    """What ``START_SWEPT_LUA`` answered for one start."""
    word = text(outcome)
    if word == "started":
        return SweepClaim("started")
    if word == "claimed":
        return SweepClaim("claimed", text(holder))
    return SweepClaim("taken")
