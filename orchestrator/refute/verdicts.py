"""The refuter's answer: its verdict is the last non-empty line, ``REFUTED: ...`` or ``NOT REFUTED: ...``;
anything else is "unclear" and changes nothing. Nothing here raises on odd input.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

__all__ = ["MIN_REFUTATION_REASON", "ParsedRefutation", "RefuteOutcome", "parse_refutation"]

RefuteOutcome = Literal["refuted", "not_refuted", "unclear"]

MIN_REFUTATION_REASON = 12  # a REFUTED with a shorter reason carries no evidence: "unclear"


class ParsedRefutation(BaseModel):
    outcome: RefuteOutcome
    reason: str


# The decoration before the keyword is matched possessively (``*+``): its runs overlap, and giving
# characters back cannot help the keyword match, only make a long line of spaces cost quadratic time.
_VERDICT_RE = re.compile(
    r"^[\s>#*_`+\-]*+(?:\d+[.)]\s*+)?[\s*_`]*+"
    r"(?P<kw>NOT[\s_\-]+REFUTED|REFUTED)\b"
    r"[\s*_`]*(?P<sep>[:\-–—])?[\s*_`]*(?P<rest>.*)$",
    re.IGNORECASE,
)
_FENCE_ONLY_RE = re.compile(r"^\s*(?:`{3,}|~{3,})\s*\w*\s*$")
_PLACEHOLDER_RE = re.compile(r"^<[^<>]*>$")


def _drop_closing_bold(text: str) -> str:
    """``reason**`` -> ``reason``: a trailing run of spaces and emphasis marks that holds a ``*`` goes.

    A scan from the end: a regex for that run, tried at every position of the reason, was quadratic in a
    reason holding a long run of spaces.
    """
    i = len(text)
    while i and (text[i - 1] in "*_" or text[i - 1].isspace()):
        i -= 1
    return text[:i] if "*" in text[i:] else text


def _verdict_line(line: str) -> tuple[bool, str] | None:
    """(refuted?, reason) when ``line`` is a verdict line, else None."""
    m = _VERDICT_RE.match(line)
    if m is None:
        return None
    rest = m["rest"].strip()
    if not m["sep"] and rest and not rest.startswith("("):
        return None  # "Refuted claims are ..." is prose, not a verdict
    rest = _drop_closing_bold(rest)
    if rest.endswith("`") and rest.count("`") % 2 == 1:
        rest = rest[:-1]
    refuted = not m["kw"].upper().startswith("NOT")
    return refuted, rest.strip()


def parse_refutation(text: str) -> ParsedRefutation:
    """The refuter's verdict from its last non-empty line (a trailing fence line is skipped).

    ``REFUTED: <reason>`` with a reason of at least ``MIN_REFUTATION_REASON`` characters is "refuted";
    ``NOT REFUTED: ...`` is "not_refuted"; anything else (a verdict on an earlier line, a bare or
    placeholder reason, no verdict) is "unclear": uncertainty is not a refutation.
    """
    lines = (text or "").splitlines()
    while lines and (not lines[-1].strip() or _FENCE_ONLY_RE.match(lines[-1])):
        lines.pop()
    if not lines:
        return ParsedRefutation(outcome="unclear", reason="empty answer: no verdict")
    found = _verdict_line(lines[-1])
    if found is None:
        earlier = any(_verdict_line(ln) for ln in lines[:-1])
        why = "the verdict is not on the last line" if earlier else "no REFUTED / NOT REFUTED verdict line"
        return ParsedRefutation(outcome="unclear", reason=why)
    refuted, reason = found
    if _PLACEHOLDER_RE.match(reason):
        why = f"the verdict is the format's placeholder: {reason}"
        return ParsedRefutation(outcome="unclear", reason=why)
    if not refuted:
        said = reason or "(nothing said about what was checked)"
        return ParsedRefutation(outcome="not_refuted", reason=said)
    if len(reason) < MIN_REFUTATION_REASON:
        return ParsedRefutation(
            outcome="unclear",
            reason=f"REFUTED without evidence (reason under {MIN_REFUTATION_REASON} characters): {reason!r}",
        )
    return ParsedRefutation(outcome="refuted", reason=reason)
