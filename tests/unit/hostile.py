"""Hypothesis strategies for hostile text: what an agent, a checker or the reviewed code may write.

The parsers under test read text nobody vouches for. These strategies build it from pieces chosen to
reach their corners, mixed with arbitrary text: keyword lines with markdown decoration, code fences
(also inside one another, also unclosed), JSON nested past the decoder's reach, huge lines of
decoration characters, every line break ``str.splitlines`` knows, and bytes that are not UTF-8, decoded
as the real readers decode them (``errors="replace"`` for agent output, ``"surrogateescape"`` for git).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from hypothesis import strategies as st

# Every separator ``str.splitlines`` splits on, so a parser's idea of a line is tried with all of them.
LINE_BREAKS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
# Markdown an agent puts before a keyword: quotes, bullets, headings, emphasis, list numbers, code.
DECORATIONS = ["", " ", "  ", "\t", "> ", ">> ", "- ", "* ", "+ ", "# ", "### ", "**", "__", "`", "1. "]
CLOSINGS = ["", "**", "*", "__", "_", "`", ".", "!", " ", "**:"]
FENCES = ["```", "````", "~~~", "~~~~~", "```python", "```json", "~~~ text", "> ```", "  ```", "```x```"]
# Characters a line of decoration is made of (regexes over decoration must stay linear in them).
DECORATION_CHARS = " \t*_`->#+~=:.1"

CODE = st.sampled_from(["ruff", "mypy", "pytest", "E501", "F401", "arg-type", "S603", "X1"])


def decoded_bytes(max_size: int = 200) -> st.SearchStrategy[str]:
    """Bytes as a reader decodes them: invalid UTF-8 becomes U+FFFD or lone surrogates."""
    return st.builds(
        lambda raw, errors: raw.decode("utf-8", errors=errors),
        st.binary(max_size=max_size),
        st.sampled_from(["replace", "surrogateescape"]),
    )


def huge_line() -> st.SearchStrategy[str]:
    """One line of up to 15,000 characters: a repeated scrap of decoration or text, maybe keyworded.

    (test_props_speed.py tries longer ones against every parser; here they only need to be there.)"""
    return st.builds(
        lambda head, unit, count, tail: head + unit * count + tail,
        st.sampled_from(["", "FINDING:", "WHERE: ", "CONTEST f-1: ", "REFUTED: ", "1. ", "**", "{", "["]),
        st.text(alphabet=DECORATION_CHARS + "ax{[\"'\\", min_size=1, max_size=3),
        st.integers(min_value=1_000, max_value=5_000),
        st.sampled_from(["", "x", ":", "FINDING: y", "NO NEW FINDINGS", "}", "]"]),
    )


VERDICT_OBJECT = '{"verdict": "accepted"}'


def deep_json_parts() -> st.SearchStrategy[tuple[str, str, int, bool, str]]:
    """What ``deep_json`` is made of: (opener, closer, how many, closed, the innermost value)."""
    return st.tuples(
        st.sampled_from(["[", '{"a":', '{"verdict":', '{"result":', '{"item":']),
        st.sampled_from(["]", "}"]),
        st.sampled_from([3, 99, 100, 101, 500, 5_000, 20_000]),
        st.booleans(),
        st.sampled_from(["1", '"x"', "{}", "[]", "", VERDICT_OBJECT]),
    )


def nest(opener: str, closer: str, n: int, closed: bool, inner: str) -> str:
    return opener * n + inner + (closer * n if closed else "")


def deep_json() -> st.SearchStrategy[str]:
    """JSON (or almost JSON) nested from a few levels to far past the decoder's recursion limit."""
    return deep_json_parts().map(lambda parts: nest(*parts))


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Arbitrary JSON values (finite numbers; text with any code point but lone surrogates)."""
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    return st.recursive(
        scalars | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=max_leaves,
    )


def keyword_line(keywords: Sequence[str]) -> st.SearchStrategy[str]:
    """A parser's keyword, decorated the ways agents decorate it, followed by some text."""
    return st.builds(
        lambda lead, kw, close, rest: f"{lead}{kw}{close}{rest}",
        st.sampled_from(DECORATIONS),
        st.sampled_from(list(keywords)),
        st.sampled_from(CLOSINGS),
        st.text(max_size=30),
    )


def lines(
    keywords: Sequence[str] = (), extra: Sequence[st.SearchStrategy[str]] = ()
) -> st.SearchStrategy[str]:
    """One hostile line (which may itself hold line breaks)."""
    options: list[st.SearchStrategy[str]] = [
        st.text(max_size=40),
        st.sampled_from(FENCES),
        decoded_bytes(60),
        st.sampled_from(["NO NEW FINDINGS", "no new findings.", "**NO NEW FINDINGS**", "NO CONTEST"]),
        st.builds(json.dumps, json_values(6)),
        *extra,
    ]
    if keywords:
        options.append(keyword_line(keywords))
    return st.one_of(*options)


def hostile_text(
    keywords: Sequence[str] = (),
    extra: Sequence[st.SearchStrategy[str]] = (),
    max_lines: int = 25,
    big: bool = True,
) -> st.SearchStrategy[str]:
    """A whole hostile text: lines of the kinds above joined by one line break (mostly ``\\n``), with
    now and then (``big``) one huge line or deeply nested JSON among them; or arbitrary text or bytes
    alone. (The strategies are built once here, not at every draw: building them is most of the cost.)"""
    shapes = st.sampled_from(["lines", "lines", "lines", "lines", "text", "bytes"])
    parts = st.lists(lines(keywords, extra), max_size=max_lines)
    large = (st.none() | huge_line() | deep_json()) if big else st.none()
    seps = st.sampled_from(["\n"] * 6 + LINE_BREAKS)
    anything, some_bytes = st.text(), decoded_bytes(400)

    @st.composite
    def text(draw: st.DrawFn) -> str:
        shape = draw(shapes)
        if shape == "text":
            return draw(anything)
        if shape == "bytes":
            return draw(some_bytes)
        drawn = draw(parts)
        extra_large = draw(large)
        if extra_large is not None:
            drawn.insert(draw(st.integers(0, len(drawn))), extra_large)
        return draw(seps).join(drawn)

    return text()


class TooSlow(Exception):
    """A parser spent more CPU time on one input than any linear reading of it needs."""


@contextmanager
def cpu_seconds(limit: float) -> Iterator[None]:
    """Fail with TooSlow once this process has used ``limit`` seconds of CPU inside the block.

    CPU time, not wall time: another process hogging the machine's two cores cannot make a linear
    parser look slow. The interval timer's signal interrupts a regex mid-match (``re`` checks for
    signals as it backtracks), so a quadratic or cubic pattern fails here in seconds instead of hanging.
    """

    def expire(signum: int, frame: object) -> None:
        raise TooSlow(f"over {limit} CPU seconds")

    previous = signal.signal(signal.SIGVTALRM, expire)
    signal.setitimer(signal.ITIMER_VIRTUAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)
