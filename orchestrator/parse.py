"""Reading what agents answer: reviewer reports, judge verdicts, replies, and the CLIs' raw output.

Pure functions over text. Nothing here raises on odd input: an answer that cannot be
read comes back as "unparseable" or ``None`` and the caller decides what that means.
"""

from __future__ import annotations

import bisect
import json
import re
import shlex
from collections.abc import Iterator
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict

from orchestrator import jsonsafe
from orchestrator.codex_json import codex_message
from orchestrator.domain import Contest
from orchestrator.refute.commands import MAX_COMMAND

STOP_TOKEN = "NO NEW FINDINGS"
NO_CONTEST = "NO CONTEST"
BODY_LIMIT = 4000
CONTEST_LIMIT = 4000

__all__ = [
    "NO_CONTEST",
    "STOP_TOKEN",
    "Contest",
    "JudgeVerdict",
    "ParsedFinding",
    "ReplyParse",
    "ReviewParse",
    "acceptance_refusal",
    "extract_report",
    "find_session",
    "parse_loc",
    "parse_reply",
    "parse_review",
    "parse_verdict",
    "report_cost",
    "same_finding",
    "summarize",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class ParsedFinding(_Frozen):
    """One ``FINDING:``/``WHERE:`` pair of a reviewer report, with the explanation that follows it."""

    claim: str
    loc: str
    body: str = ""


class ReviewParse(_Frozen):
    """A reviewer report, read."""

    findings: list[ParsedFinding]
    stop_token: bool  # the report says ``NO NEW FINDINGS`` (outside code fences)

    @property
    def verdict(self) -> Literal["found", "clean", "unparseable"]:
        """Findings win over the stop token; neither means the report could not be read."""
        if self.findings:
            return "found"
        return "clean" if self.stop_token else "unparseable"


class JudgeVerdict(_Frozen):
    """The judge's JSON answer to a triage, normalized."""

    verdict: Literal["accepted", "rejected", "deferred"]
    reproduced: bool | None = None
    reason: str | None = None
    test: str | None = None
    test_command: str | None = None
    evidence: str | None = None


class ReplyParse(_Frozen):
    """A reviewer's answer to the outcomes of its findings."""

    contests: list[Contest]

    @property
    def clean(self) -> bool:
        return not self.contests


# --- markdown helpers -------------------------------------------------------------------------------

# Decoration an agent may put before a keyword: indentation, quote marks, bullets, headings, emphasis,
# numbered-list markers, backticks. Possessive (``*+``): the runs overlap, and giving characters back
# cannot help the keyword that follows match, only make a line of 20,000 spaces cost quadratic time.
_LEAD = r"^[\s>#*_`+\-]*+(?:\d+[.)]\s*+)?[\s*_`]*+"
# Decoration closing a keyword (``**FINDING:** claim``) but not a backtick opening the text itself.
_AFTER = r"\s*(?:[*_`]+(?=\s|$))?\s*"
_FINDING_RE = re.compile(_LEAD + r"FINDING(?:\s*#?\d+)?[\s*_`]*:" + _AFTER + r"(?P<rest>.*)$", re.IGNORECASE)
_WHERE_RE = re.compile(_LEAD + r"WHERE[\s*_`]*:" + _AFTER + r"(?P<rest>.*)$", re.IGNORECASE)
# The id is its run of word characters, dots and dashes less trailing underscores (those are decoration,
# ``CONTEST f-1__:``), written as "ends in another character" rather than as a lazy run: a lazy run before
# ``[\s*_`]*:`` rescans the underscores after each of its characters, quadratic on a long run.
_CONTEST_RE = re.compile(
    _LEAD
    + r"CONTEST[\s*_`]*+:?[\s*_`]*+(?P<id>[A-Za-z0-9](?:[\w.\-]*[^\W_]|[\w.\-]*[.\-])?)[\s*_`]*:"
    + _AFTER
    + r"(?P<rest>.*)$",
    re.IGNORECASE,
)
_FENCE_RE = re.compile(r"^\s*(?:>\s*)*(?P<mark>`{3,}|~{3,})(?P<info>.*)$")
_LOC_HEAD_RE = re.compile(r"^(?P<loc>\S+?:L?\d+(?:\s*[-–:]\s*L?\d+)?)(?!\d)")
# A loc's line suffix: ``:12``, ``:L12`` or ``#L12``, then ranges and columns (``-14``, ``:5``, ``, 20``).
_LINE_MARK_RE = re.compile(r":|#L")
_LINE_TAIL_RE = re.compile(r"(?::L?|#L)(?P<line>\d+)(?:\s*[-–:,]\s*L?\d+)*+")
_WORD_RE = re.compile(r"[a-z0-9]+")


def _fenced(lines: list[str]) -> list[bool]:
    """For each line, whether it is inside a code fence (the fence lines themselves included)."""
    flags: list[bool] = []
    opener: str | None = None
    for line in lines:
        m = _FENCE_RE.match(line)
        if opener is None:
            # A backtick fence's info string cannot hold backticks (CommonMark), so "```x```" is inline.
            if m and not (m["mark"][0] == "`" and "`" in m["info"]):
                opener = m["mark"]
                flags.append(True)
            else:
                flags.append(False)
        else:
            flags.append(True)
            if m and m["mark"][0] == opener[0] and len(m["mark"]) >= len(opener) and not m["info"].strip():
                opener = None
    return flags


def _unwrap(text: str) -> str:
    """Drop bold markers and stray whitespace around a claim or reason.

    With string methods, not a regex: ``\\s*\\*+$`` is tried at every position of a long run of
    whitespace, which makes a hostile line of tabs cost quadratic time.
    """
    text = text.strip()
    if text.startswith("**"):
        text = text.lstrip("*").lstrip()
    if text.endswith("*"):
        text = text.rstrip("*").rstrip()
    return text.strip()


def _is_stop(line: str) -> bool:
    bare = line.strip().lstrip("#>-+*_` \t").rstrip("*_`.! \t")
    return bare.upper() == STOP_TOKEN


def _next_after(marks: list[int], i: int, default: int) -> int:
    """The first of the sorted ``marks`` after ``i``, else ``default``."""
    k = bisect.bisect_right(marks, i)
    return marks[k] if k < len(marks) else default


def _clean_loc(text: str) -> str:
    loc = text.strip().replace("`", "").strip("*_\"' \t")
    # A sentence's closing punctuation goes, but "." alone is the repository (a check agent's WHERE for a
    # failure it cannot place), not an empty location that drops the finding.
    loc = loc.rstrip(".,;") or loc
    while loc.startswith("./"):
        loc = loc[2:]
    m = _LOC_HEAD_RE.match(loc)
    return m["loc"] if m else loc


# --- reviewer reports -------------------------------------------------------------------------------


def parse_review(text: str) -> ReviewParse:
    """Findings (``FINDING:`` then ``WHERE:`` within two lines, outside code fences) and the stop token."""
    lines = text.splitlines()
    fenced = _fenced(lines)
    stops = [i for i, line in enumerate(lines) if not fenced[i] and _is_stop(line)]
    heads = [i for i, line in enumerate(lines) if not fenced[i] and _FINDING_RE.match(line)]
    head_set = set(heads)
    ends = sorted(head_set | set(stops))
    findings: list[ParsedFinding] = []
    for head in heads:
        m = _FINDING_RE.match(lines[head])
        claim = _unwrap(m["rest"]) if m else ""
        for j in (head + 1, head + 2):
            if j >= len(lines) or j in head_set:
                break
            w = None if fenced[j] else _WHERE_RE.match(lines[j])
            if w is None:
                continue
            loc = _clean_loc(w["rest"])
            if claim and loc:
                end = _next_after(ends, j, len(lines))
                body = "\n".join(lines[j + 1 : end]).strip()[:BODY_LIMIT]
                findings.append(ParsedFinding(claim=claim, loc=loc, body=body))
            break
    return ReviewParse(findings=findings, stop_token=bool(stops))


def parse_loc(loc: str) -> tuple[str, int | None]:
    """``"src/a.py:12-14"`` -> ``("src/a.py", 12)``; no line number -> ``(path, None)``."""
    text = loc.strip().replace("`", "").strip()
    while text.startswith("./"):
        text = text[2:]
    # The path ends at the first mark whose suffix runs to the end of the loc (and holds no line break).
    # A mark inside the suffix of one that stopped short stops at the same place, so the search goes on
    # after that suffix: one pass, where trying every mark again was quadratic in a loc like ``a:1:1:1...``.
    newline = text.find("\n")
    pos = 1
    while (mark := _LINE_MARK_RE.search(text, pos)) is not None and (newline < 0 or mark.start() <= newline):
        tail = _LINE_TAIL_RE.match(text, mark.start())
        if tail is None:
            pos = mark.start() + 1
        elif tail.end() == len(text):
            # Past 18 digits it is no line number (and int() refuses one of over 4,300: a ValueError).
            digits = tail["line"]
            return text[: mark.start()].strip(), int(digits) if len(digits) <= 18 else None
        else:
            pos = tail.end()
    return text, None


def _words(claim: str) -> set[str]:
    return {w for w in _WORD_RE.findall(claim.lower()) if len(w) >= 3}


def _jaccard(a: str, b: str) -> float:
    wa, wb = _words(a), _words(b)
    union = wa | wb
    return len(wa & wb) / len(union) if union else 0.0


def same_finding(a_claim: str, a_loc: str, b_claim: str, b_loc: str) -> bool:
    """Whether two findings are one: same place, or near places and similar claims."""
    a_path, a_line = parse_loc(a_loc)
    b_path, b_line = parse_loc(b_loc)
    if a_path != b_path:
        return False
    if a_line is not None and b_line is not None:
        if a_line == b_line:
            return True
        return abs(a_line - b_line) <= 3 and _jaccard(a_claim, b_claim) >= 0.5
    if a_line is None and b_line is None:
        return _jaccard(a_claim, b_claim) >= 0.5
    return False


# --- JSON helpers -----------------------------------------------------------------------------------

# Where a JSON object or array can start: a cheap filter so code like ``{x: y}`` costs no decode attempt
# (a failed decode builds an error whose line number costs a scan of the text before it).
_OBJECT_START = re.compile(r'\{(?=\s*["}])')
_VALUE_START = re.compile(r'\{(?=\s*["}])|\[(?=\s*[\[{"\]\d\-tfn])')


def _json_values(text: str, arrays: bool = False) -> Iterator[Any]:
    """Each top-level JSON object (and array, if asked) embedded in ``text``, in order.

    A value nested in one is not repeated. A start that does not decode (prose, code, a truncated
    object) is skipped and the scan goes on inside it, so an object wrapped in something broken is found.
    """
    # Bounded (orchestrator.jsonsafe): a value nested too deep is skipped, failed starts cost linear work.
    yield from jsonsafe.values(text, _VALUE_START if arrays else _OBJECT_START)


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    """Every dict inside a JSON value, the outer one first (document order)."""
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _dicts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _dicts(v)


def _records(text: str) -> list[dict[str, Any]]:
    """Top-level objects of ``text`` and the objects directly inside top-level arrays (CLI events)."""
    out: list[dict[str, Any]] = []
    for value in _json_values(text, arrays=True):
        if isinstance(value, dict):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, dict))
    return out


# --- judge verdicts ---------------------------------------------------------------------------------

_NULLS = frozenset({"null", "none", "n/a", ""})
_VERDICTS = frozenset({"accepted", "rejected", "deferred"})


def _opt_str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        return None if text.lower() in _NULLS else text
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return shlex.join(value)  # a command given as argv
    if isinstance(value, bool | int | float):
        return str(value).lower() if isinstance(value, bool) else str(value)
    return json.dumps(value, ensure_ascii=False)


def _opt_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return {"true": True, "yes": True, "false": False, "no": False}.get(value.strip().lower())
    return None


# What a string ``reproduced`` may say that is not a reproduction: codejury's schema gives the observation
# itself as a string, so any other non-empty text is taken as the evidence of a reproduction.
_NOT_REPRODUCED = frozenset({"no", "false", "0", "not reproduced", "unknown", "maybe", "unclear"})


def _reproduced(value: Any) -> tuple[bool | None, str | None]:
    """``reproduced`` as (whether, evidence): a boolean as Jury asks for it, or codejury's string, which is
    the evidence and means reproduced unless it says no, false, null or nothing."""
    if not isinstance(value, str):
        return _opt_bool(value), None
    text = value.strip()
    word = text.lower().rstrip(".!")
    if word in _NULLS:
        return None, None
    if word in _NOT_REPRODUCED:
        return False if word in ("no", "false", "0", "not reproduced") else None, None
    if word in ("yes", "true"):
        return True, None
    return True, text


def parse_verdict(text: str) -> JudgeVerdict | None:
    """The last balanced JSON object with a ``verdict`` key, normalized; None when there is none."""
    found: dict[str, Any] | None = None
    nested: dict[str, Any] | None = None
    for value in _json_values(text):
        if isinstance(value, dict) and "verdict" in value:
            found = value
            continue
        for d in _dicts(value):
            if "verdict" in d:
                nested = d
    chosen = found if found is not None else nested
    if chosen is None:
        return None
    raw = chosen.get("verdict")
    verdict = raw.strip().lower() if isinstance(raw, str) else None
    if verdict not in _VERDICTS:
        return None
    reproduced, observed = _reproduced(chosen.get("reproduced"))
    return JudgeVerdict(
        verdict=cast(Literal["accepted", "rejected", "deferred"], verdict),
        reproduced=reproduced,
        reason=_opt_str(chosen.get("reason")),
        test=_opt_str(chosen.get("test")),
        test_command=_opt_str(chosen.get("test_command", chosen.get("testCommand"))),
        evidence=_opt_str(chosen.get("evidence")) or observed,
    )


def acceptance_refusal(v: JudgeVerdict) -> str | None:
    """Why an acceptance cannot be taken (no reproduction, test or test command), or None."""
    if v.verdict != "accepted":
        return None
    reasons = []
    if v.reproduced is not True:
        reasons.append("accepted without a reproduction")
    if not v.test:
        reasons.append("accepted without a regression test")
    if not v.test_command:
        reasons.append("accepted without a test_command")
    elif len(v.test_command) > MAX_COMMAND:
        reasons.append(f"a test_command of {len(v.test_command):,} characters (at most {MAX_COMMAND:,})")
    return "; ".join(reasons) or None


# --- replies ----------------------------------------------------------------------------------------


def parse_reply(text: str) -> ReplyParse:
    """``CONTEST <finding-id>: <reason>`` lines outside code fences; the reason runs to the next one."""
    lines = text.splitlines()
    fenced = _fenced(lines)
    heads: list[tuple[int, str, str]] = []
    stops: list[int] = []
    for i, line in enumerate(lines):
        if fenced[i]:
            continue
        m = _CONTEST_RE.match(line)
        if m:
            heads.append((i, m["id"], _unwrap(m["rest"])))
        elif line.strip().lstrip("#>-+*_` \t").rstrip("*_`.! \t").upper() == NO_CONTEST:
            stops.append(i)
    ends = sorted({i for i, _, _ in heads} | set(stops))
    texts: dict[str, str] = {}
    for i, fid, first in heads:
        end = _next_after(ends, i, len(lines))
        more = "\n".join(lines[i + 1 : end]).strip()
        reason = "\n".join(p for p in (first, more) if p)
        texts[fid] = "\n\n".join(p for p in (texts.get(fid, ""), reason) if p)[:CONTEST_LIMIT]
    return ReplyParse(contests=[Contest(id=fid, text=t) for fid, t in texts.items()])


# --- raw CLI output ---------------------------------------------------------------------------------


def _tail(stdout: str) -> str:
    lines = stdout.splitlines()
    marks = [i for i, line in enumerate(lines) if line.strip() == "codex"]
    if not marks:
        return stdout.strip()
    return "\n".join(lines[marks[-1] + 1 :]).strip()


def _result_json(stdout: str) -> str | None:
    found: str | None = None
    for rec in _records(stdout):
        if isinstance(rec.get("result"), str):
            found = rec["result"]
    return found


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif (
                isinstance(part, dict)
                and part.get("type") in (None, "text", "output_text")
                and isinstance(part.get("text"), str)
            ):
                parts.append(part["text"])
        return "".join(parts)
    return ""


def _opencode_text(rec: dict[str, Any]) -> str | None:
    if rec.get("role") == "user":
        return None
    props = rec.get("properties")
    part = rec.get("part")
    if not isinstance(part, dict) and isinstance(props, dict):
        part = props.get("part")
    if isinstance(part, dict):
        if part.get("type") in (None, "text") and isinstance(part.get("text"), str):
            if part.get("role") == "user" or part.get("synthetic"):
                return None
            return part["text"]
        return None
    if rec.get("type") in ("text", "message", "assistant", None):
        if isinstance(rec.get("text"), str):
            return rec["text"]
        if rec.get("role") == "assistant":
            return _content_text(rec.get("content")) or None
    return None


def _stream_text(stdout: str) -> str | None:
    pieces: list[str] = []
    result: str | None = None
    for rec in _records(stdout):
        msg = rec.get("message") if isinstance(rec.get("message"), dict) else None
        if rec.get("type") == "result" and isinstance(rec.get("result"), str):
            result = rec["result"]
        if msg is not None and (rec.get("type") == "assistant" or msg.get("role") == "assistant"):
            text = _content_text(msg.get("content"))
        elif rec.get("role") == "assistant":
            text = _content_text(rec.get("content"))
        else:
            continue
        if text:
            pieces.append(text if text.endswith("\n") else text + "\n")
    if pieces:
        return "".join(pieces)
    return result


def extract_report(stdout: str, stderr: str, fmt: str) -> str:
    """The agent's final answer from its raw output, per its report format (``AgentSpec.report``)."""
    try:
        if fmt == "tail":
            return _tail(stdout)
        if fmt == "result-json":
            found = _result_json(stdout)
        elif fmt == "opencode-json":
            texts = [t for rec in _records(stdout) if (t := _opencode_text(rec))]
            found = texts[-1] if texts else None
        elif fmt == "stream-json":
            found = _stream_text(stdout)
        elif fmt == "codex-json":
            found = codex_message(stdout)
        else:
            found = None
        return (found if found is not None else stdout).strip()
    except Exception:  # never let odd output break a worker; the raw text is the answer
        return stdout.strip()


def find_session(pattern: str | None, stdout: str, stderr: str) -> str | None:
    """The session id captured by ``pattern``'s first group: the last match in stderr, else in stdout."""
    if not pattern:
        return None
    try:
        rx = re.compile(pattern)
    except re.error:
        return None
    for stream in (stderr, stdout):
        last = None
        for m in rx.finditer(stream or ""):
            last = m
        if last is not None:
            value = last.group(1) if rx.groups else last.group(0)
            if value:
                return value
    return None


def report_cost(stdout: str) -> float | None:
    """``total_cost_usd`` of the last JSON object that reports it (claude ``--output-format json``)."""
    cost: float | None = None
    try:
        for rec in _records(stdout):
            value = rec.get("total_cost_usd")
            if isinstance(value, int | float) and not isinstance(value, bool):
                cost = float(value)
    except Exception:
        return None
    return cost


def summarize(text: str, limit: int = 200) -> str:
    """The first non-empty line, cut to ``limit`` characters."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: max(limit - 1, 0)] + "…"
    return ""
