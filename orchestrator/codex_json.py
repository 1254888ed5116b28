"""Reading agent output as JSON lines, and the two facts the core takes from codex ``exec --json``: its
final answer (``codex_message``, the report ``orchestrator.parse`` reads) and its token counts
(``codex_usage``, what ``orchestrator.cost`` prices).

Why a module of its own: these are parsers the core needs, while ``orchestrator.transcript`` (which builds
on them) says in words what an agent's commands did; the core imports no words (the ``wordless-core``
import contract). Every line is agent output, so hostile input: a malformed or deeply nested line is
skipped, never a crash, and nothing here trusts a field's type.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from orchestrator import jsonsafe


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``text``, one a line; anything else (torn, too large, nested deeper than
    ``jsonsafe`` allows, not an object) is skipped with its line."""
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = jsonsafe.loads(line)
        except (ValueError, RecursionError):  # BadJSON is a ValueError
            continue
        if isinstance(value, dict):
            yield value


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def codex_message(stdout: str) -> str | None:
    """The final answer of codex ``exec --json``: the text of its last ``agent_message`` item; "" when it
    printed events but no message (never the raw events); None when stdout holds no codex event."""
    found, events = None, False
    for rec in json_lines(stdout):
        kind = rec.get("type")
        if not isinstance(kind, str):
            continue
        events = events or kind.startswith(("thread.", "turn.", "item."))
        item = _obj(rec.get("item"))
        if (
            kind == "item.completed"
            and item.get("type") == "agent_message"
            and isinstance(item.get("text"), str)
        ):
            found = item["text"]
    if found is not None:
        return found
    return "" if events else None


def codex_usage(stdout: str) -> dict[str, int]:
    """Token counts summed over the ``turn.completed`` events (empty when none reports usage)."""
    usage: dict[str, int] = {}
    for rec in json_lines(stdout):
        if rec.get("type") != "turn.completed":
            continue
        for name, value in _obj(rec.get("usage")).items():
            if (count := _int(value)) is not None and count >= 0:
                usage[name] = usage.get(name, 0) + count
    return usage
