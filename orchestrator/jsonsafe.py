"""JSON that an agent, a tool or the reviewed code wrote is hostile input: read it within bounds.

Python's decoder recurses once per nesting level, so ``[[[[...]]]]`` 100,000 deep raises RecursionError —
not the ValueError every caller catches — and a value a few hundred levels deep can still exhaust the
stack of whoever walks it later. A scan that restarts at every ``{`` of a malformed text is quadratic.
Here, everything that reads such JSON gets the same bounds:

- ``loads``: a document over ``MAX_BYTES`` or nested deeper than ``MAX_DEPTH`` is ``BadJSON`` (a
  ValueError), like any other malformed document;
- ``values``: the JSON values embedded in free text (an agent's answer, a transcript), where a value too
  deep is skipped with its line, and the work spent on starts that do not decode is bounded by the text's
  length, after which the rest of the text is not searched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

MAX_BYTES = 16 * 1024 * 1024  # a larger document from an agent or a tool is refused unread
MAX_DEPTH = 100  # deeper than any answer, report or tool call Jury reads; shallow enough to walk safely
# ``values``: decoding work on failed starts, in characters, allowed per character of text (plus a floor).
WORK_FACTOR = 2
WORK_FLOOR = 1 << 20
MAX_TOO_DEEP = 8  # values nested past the decoder's reach before ``values`` stops searching

_DECODER = json.JSONDecoder()


class BadJSON(ValueError):
    """A JSON document out of bounds (too large, too deep) or malformed."""


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply ``value`` nests (a scalar is 0, ``[]`` is 1); stops counting past ``limit``.

    Iterative, so a deep value cannot exhaust the stack here.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def loads(text: str | bytes, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` for untrusted text: BadJSON when it is malformed, too large or too deep."""
    if len(text) > max_bytes:
        raise BadJSON(f"JSON document of {len(text)} bytes is over the {max_bytes}-byte limit")
    try:
        value = json.loads(text)
    except RecursionError:
        raise BadJSON(f"JSON nested deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise BadJSON(str(exc)) from None
    if depth(value, max_depth) > max_depth:
        raise BadJSON(f"JSON nested deeper than {max_depth} levels")
    return value


def values(text: str, starts: re.Pattern[str], *, max_depth: int = MAX_DEPTH) -> Iterator[Any]:
    """Each top-level JSON value embedded in ``text`` at a match of ``starts``, in order.

    A value nested in one is not repeated. A start that does not decode (prose, code, a truncated object)
    is skipped and the search goes on inside it, so an object wrapped in something broken is found —
    until the decoding work on such starts passes ``WORK_FACTOR`` times the text's length. A value nested
    deeper than ``max_depth`` is skipped, and so is the rest of its line when it is past what the decoder
    can reach (after ``MAX_TOO_DEEP`` of those the search stops).
    """
    budget = WORK_FACTOR * len(text) + WORK_FLOOR
    too_deep = 0
    i = 0
    while (m := starts.search(text, i)) is not None:
        start = m.start()
        try:
            value, end = _DECODER.raw_decode(text, start)
        except RecursionError:
            too_deep += 1
            if too_deep >= MAX_TOO_DEEP:
                return
            line_end = text.find("\n", start)
            i = len(text) if line_end < 0 else line_end + 1
            continue
        except ValueError as exc:
            budget -= max(getattr(exc, "pos", start) - start, 1)
            if budget < 0:
                return
            i = start + 1
            continue
        i = end
        if depth(value, max_depth) <= max_depth:
            yield value
