"""Untrusted text made inert for a forge's Markdown (pure): everything Jury publishes that an agent wrote.

Agents read hostile code, so a claim, a reason, a path or a body may carry ``<img src=x onerror=…>``,
``[x](javascript:…)``, ``<javascript:…>`` autolinks, HTML comments that pass for Jury's own markers, or
``@`` mentions. Every piece of it reaches a published body through one of four functions here:

- ``text``: one line of prose; every character Markdown could read as syntax (``\\ ` * _ [ ] < > & ~ | ! $``,
  and a block marker at the start) is backslash-escaped, so it renders as exactly what was written, with
  no link, image, autolink, raw HTML or entity in it. Mentions are broken with a zero-width space.
- ``code``: one line shown verbatim as an inline code span, delimited by a backtick run longer than any
  run inside it (code spans interpret nothing: no HTML, no link).
- ``code_block``: many lines shown verbatim in a fenced block whose fence is longer than any backtick run
  inside, so nothing inside can close it.
- ``plain``: one line for the fields a forge shows as plain text (a check's title, a status's
  description), flattened, cut and kept from mentioning anyone.

Escaping is an allow-list in effect: only letters, digits, whitespace and the punctuation that cannot
start Markdown syntax pass bare; the rest is escaped (CommonMark lets any ASCII punctuation be escaped).
Each line these functions produce is complete on its own (no span opened on one line and closed on
another), so cutting a body at a line boundary (``fit``) never leaves a half-open construct behind.
Checked by tests/unit/test_markdown_safe.py with markdown-it-py, a CommonMark parser.
"""

from __future__ import annotations

import re

ELLIPSIS = "…"
ZWSP = "\u200b"  # after ``@``: GitHub and GitLab no longer read a mention
# ASCII punctuation that can open Markdown syntax anywhere in a line (emphasis, code, links, images,
# autolinks, raw HTML, entities, strikethrough, tables, GitLab references, math). ``#``, ``-``, ``+``,
# ``=`` and ``>`` matter only at a line's start; a digit run then ``.``/``)`` too (an ordered list).
_INLINE = frozenset("\\`*_[]<>&~|!$")
_LINE_START = re.compile(r"^(?:[#>+=\-]|\d+[.)])")
_BACKTICKS = re.compile(r"`+")


def _cut(flat: str, limit: int) -> str:
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)] + ELLIPSIS


def flatten(value: object) -> str:
    """One line: every run of whitespace (newlines included) becomes one space, none at the ends; NUL is
    U+FFFD, as a CommonMark parser reads it."""
    return " ".join(normalise(str(value)).split())


def plain(value: object, limit: int) -> str:
    """One line of untrusted text for a plain-text field (not Markdown): flattened, cut, no mentions."""
    return _cut(flatten(value), limit).replace("@", "@" + ZWSP)


def escape(line: str) -> str:
    """``line`` (one line) with every Markdown-significant character backslash-escaped."""
    out = "".join("\\" + ch if ch in _INLINE else ch for ch in line)
    start = _LINE_START.match(out)
    if start is not None:  # escape the marker's punctuation, its last character
        end = start.end()
        out = out[: end - 1] + "\\" + out[end - 1 :]
    return out


def text(value: object, limit: int) -> str:
    """One line of untrusted prose for a Markdown body: renders as exactly what was written (flattened,
    cut to ``limit`` characters, mentions broken), as text and nothing else."""
    return escape(plain(value, limit))


def longest_backtick_run(value: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(value)), default=0)


def code(value: object, limit: int) -> str:
    """One line of untrusted text as an inline code span, verbatim (flattened and cut only). The
    delimiter is one backtick longer than the longest run inside; content that starts or ends with a
    backtick or a space gets a space of padding each side, which CommonMark strips again."""
    inner = _cut(flatten(value), limit) or " "
    ticks = "`" * (longest_backtick_run(inner) + 1)
    if inner.strip(" ") and (inner[0] in "` " or inner[-1] in "` "):
        inner = f" {inner} "
    return f"{ticks}{inner}{ticks}"


def normalise(value: str) -> str:
    """What a CommonMark parser makes of line endings and NUL before anything else: ``\\r\\n`` and a
    lone ``\\r`` are a newline, NUL is U+FFFD. A code block shows this form verbatim."""
    return value.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\ufffd")


def code_block(value: object, limit: int) -> str:
    """Untrusted text as a fenced code block, verbatim (line endings normalised, cut to ``limit``
    characters with a note after the block). The fence is backticks, at least three and one longer than
    any run inside, so no line of the text can close it; it has no info string. Put it at a line's start,
    after a blank line."""
    whole = normalise(str(value))
    shown = whole[:limit]
    fence = "`" * max(3, longest_backtick_run(shown) + 1)
    body = shown if shown.endswith("\n") or not shown else shown + "\n"
    block = f"{fence}\n{body}{fence}"
    if len(whole) > limit:
        block += f"\n\n_(cut to its first {limit} characters)_"
    return block


CUT_NOTE = "_(cut: the rest is too long for one comment)_"


def fit(pieces: list[str], limit: int) -> str:
    """``pieces`` (each whole: a line, or a whole code block) joined with newlines, the ones past
    ``limit`` characters left out for a closing note. A forge's own cut would land mid-line and could
    leave a code span or a fence open, its text read as Markdown or the note swallowed."""
    out: list[str] = []
    size = 0
    budget = limit - len(CUT_NOTE) - 2
    for piece in pieces:
        if size + len(piece) + 1 > budget:
            return "\n".join([*out, "", CUT_NOTE])
        out.append(piece)
        size += len(piece) + 1
    return "\n".join(out)
