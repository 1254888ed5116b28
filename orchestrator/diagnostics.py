"""Checker output read as diagnostics, and diagnostics written as a reviewer report.

Pure functions over text: ruff, mypy, flake8, pytest and SARIF 2.1.0 output become ``Diagnostic``s;
``changed_lines`` reads a unified diff; ``to_report`` writes ``FINDING:``/``WHERE:`` pairs that
``orchestrator.parse.parse_review`` reads like any agent's report. Nothing here raises on odd input:
lines that are not diagnostics are skipped.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict

from orchestrator import jsonsafe
from orchestrator.parse import STOP_TOKEN

ParserName = Literal["ruff", "mypy", "pytest", "flake8", "sarif", "none"]

__all__ = [
    "PARSERS",
    "Diagnostic",
    "ParserName",
    "changed_lines",
    "detect_parser",
    "parse_auto",
    "parse_flake8",
    "parse_mypy",
    "parse_pytest",
    "parse_ruff",
    "parse_sarif",
    "to_report",
]


class Diagnostic(BaseModel):
    """One problem a checker reported. ``detail`` is optional context (e.g. an output tail)."""

    model_config = ConfigDict(frozen=True)

    path: str
    line: int | None = None
    col: int | None = None
    code: str = ""
    message: str
    severity: str = "error"
    detail: str = ""


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _clean_path(path: str) -> str:
    path = path.strip()
    while path.startswith("./"):
        path = path[2:]
    return path


# --- ruff and flake8 ------------------------------------------------------------------------------

# Numbers read as line, column or count have at most 18 digits: a longer one is no line number, and
# ``int()`` refuses one of over 4,300 digits (a ValueError out of a parser that never raises).
# ``path:line:col: CODE message`` (ruff concise and pre-0.12 full, flake8 default, pylint parseable).
_CONCISE_RE = re.compile(
    r"^(?P<path>[^\s:][^:]*?):(?P<line>\d{1,18}):(?P<col>\d{1,18}):\s+"
    r"(?P<code>[A-Z]+\d+|[A-Za-z]+(?:-[a-z0-9]+)+|SyntaxError):?\s*(?:\[\*\]\s*)?(?P<msg>.*)$"
)
# ruff >= 0.12 full output: a ``CODE [*] message`` header, then `` --> path:line:col``.
_FULL_HEAD_RE = re.compile(r"^(?P<code>[A-Z]+\d+|[a-z]+(?:-[a-z0-9]+)+):?\s+(?:\[\*\]\s*)?(?P<msg>\S.*)$")
_ARROW_RE = re.compile(r"^\s*-->\s+(?P<path>.+?):(?P<line>\d{1,18}):(?P<col>\d{1,18})\s*$")


def _concise(text: str) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for line in text.splitlines():
        m = _CONCISE_RE.match(line.rstrip())
        if m is None:
            continue
        message = m["msg"].strip()
        out.append(
            Diagnostic(
                path=_clean_path(m["path"]),
                line=int(m["line"]),
                col=int(m["col"]),
                code=m["code"],
                message=message or m["code"],
            )
        )
    return out


def _ruff_json(data: Any) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("filename"), str):
            continue
        loc = _obj(item.get("location"))
        row, col = loc.get("row"), loc.get("column")
        code = item.get("code") or item.get("name") or ""
        out.append(
            Diagnostic(
                path=_clean_path(item["filename"]),
                line=row if isinstance(row, int) else None,
                col=col if isinstance(col, int) else None,
                code=str(code),
                message=str(item.get("message") or code or "problem"),
                severity=str(item.get("severity") or "error"),
            )
        )
    return out


def parse_ruff(text: str) -> list[Diagnostic]:
    """ruff output: ``--output-format json``, concise, or full (old and ``-->`` styles)."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            return _ruff_json(jsonsafe.loads(stripped))
        except ValueError:
            pass
    out = _concise(text)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _ARROW_RE.match(line)
        if m is None or i == 0:
            continue
        head = _FULL_HEAD_RE.match(lines[i - 1].strip())
        if head is None:
            continue
        out.append(
            Diagnostic(
                path=_clean_path(m["path"]),
                line=int(m["line"]),
                col=int(m["col"]),
                code=head["code"],
                message=head["msg"].strip(),
            )
        )
    return out


def parse_flake8(text: str) -> list[Diagnostic]:
    """flake8's default ``path:line:col: CODE message`` lines."""
    return _concise(text)


# --- mypy -----------------------------------------------------------------------------------------

# The message is empty or ends in a non-space: a message free to end anywhere inside a long run of spaces
# had the ``\s+`` after it rescan the run from each of those ends (quadratic in the run).
_MYPY_RE = re.compile(
    r"^(?P<path>[^\s:][^:]*?)(?::(?P<line>\d{1,18}))?(?::(?P<col>\d{1,18}))?(?::\d+:\d+)?:\s+"
    r"(?P<sev>error|warning|note):\s+(?P<msg>(?:.*?\S)??)(?:\s+\[(?P<code>[a-z0-9_-]+)\])?\s*$"
)


def parse_mypy(text: str) -> list[Diagnostic]:
    """mypy's ``path:line[:col[:eline:ecol]]: error: message  [code]`` lines; notes are skipped."""
    out: list[Diagnostic] = []
    for line in text.splitlines():
        m = _MYPY_RE.match(line.rstrip())
        if m is None or m["sev"] == "note":
            continue
        out.append(
            Diagnostic(
                path=_clean_path(m["path"]),
                line=int(m["line"]) if m["line"] else None,
                col=int(m["col"]) if m["col"] else None,
                code=m["code"] or "",
                message=m["msg"],
                severity=m["sev"],
            )
        )
    return out


# --- pytest ---------------------------------------------------------------------------------------

_SUMMARY_RE = re.compile(r"^(?P<kind>FAILED|ERROR)\s+(?P<node>\S+?)(?:\s+-\s+(?P<msg>.*))?\s*$")
# A section title ``____ name ____``: the name runs to the last non-space before the closing rule. Read as a
# lazy name between two runs of spaces, a long run cost cubic time (a test can print any line).
_SECTION_RE = re.compile(
    r"^_{3,}+\s++(?:(?:ERROR|FAILURE) (?:at \w+ of |collecting )?)?(?P<name>.+)(?<=\S)\s++_{3,}+$"
)
_TB_LOC_RE = re.compile(r"^(?P<path>[^\s:][^:]*?\.py):(?P<line>\d{1,18}):(?:\s+(?P<what>.*))?$")
_E_LINE_RE = re.compile(r"^E\s+(?P<msg>.+)$")


def _traceback_locations(lines: list[str]) -> dict[str, tuple[str, int, str]]:
    """Per FAILURES section name: the deepest in-repo ``path:line:`` location and its error line."""
    found: dict[str, tuple[str, int, str]] = {}
    name: str | None = None
    for line in lines:
        sec = _SECTION_RE.match(line.strip())
        if sec is not None and not set(sec["name"]) <= {"_", " "}:
            name = sec["name"].strip()
            continue
        if line.startswith("=") or name is None:
            if line.startswith("="):
                name = None
            continue
        err = _E_LINE_RE.match(line)
        if err is not None:
            if name in found and not found[name][2]:
                path, lineno, _ = found[name]
                found[name] = (path, lineno, err["msg"].strip())
            continue
        loc = _TB_LOC_RE.match(line.rstrip())
        if loc is not None and not os.path.isabs(loc["path"]) and "site-packages" not in loc["path"]:
            what = (loc["what"] or "").strip()
            error = "" if what.startswith("in ") else what
            found[name] = (_clean_path(loc["path"]), int(loc["line"]), error)
    return found


def _section_name(node: str) -> str:
    """``tests/t.py::TestA::test_b[1]`` -> ``TestA.test_b[1]`` (pytest's FAILURES section title)."""
    return ".".join(node.split("::")[1:]) or node


def parse_pytest(text: str) -> list[Diagnostic]:
    """Failed and errored tests from the short summary, located by their traceback when present.

    A traceback location without a summary line (``-rN``) is reported on its own.
    """
    lines = text.splitlines()
    tracebacks = _traceback_locations(lines)
    out: list[Diagnostic] = []
    used: set[str] = set()
    for line in lines:
        m = _SUMMARY_RE.match(line.strip())
        if m is None or ("::" not in m["node"] and not m["node"].endswith(".py")):
            continue
        node = m["node"]
        path = _clean_path(node.split("::", 1)[0])
        section = _section_name(node)
        message = (m["msg"] or "").strip()
        lineno: int | None = None
        if section in tracebacks:
            used.add(section)
            tb_path, tb_line, tb_error = tracebacks[section]
            path, lineno = tb_path, tb_line
            message = message or tb_error
        label = f"{node} failed" if m["kind"] == "FAILED" else f"{node} errored"
        out.append(
            Diagnostic(
                path=path,
                line=lineno,
                code=m["kind"],
                message=f"{label}: {message}" if message else label,
            )
        )
    for section, (path, lineno, error) in tracebacks.items():
        if section not in used:
            out.append(
                Diagnostic(
                    path=path, line=lineno, code="FAILED", message=f"{section} failed: {error or 'error'}"
                )
            )
    return out


# --- SARIF ----------------------------------------------------------------------------------------


def _uri_path(uri: str) -> str:
    if uri.startswith("file:"):
        return unquote(urlsplit(uri).path)
    return _clean_path(unquote(uri))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_sarif(text: str) -> list[Diagnostic]:
    """SARIF 2.1.0: each result's first physical location (artifact uri, region start line/column)."""
    try:
        data = jsonsafe.loads(text)
    except ValueError:
        return []
    out: list[Diagnostic] = []
    runs = data.get("runs") if isinstance(data, dict) else None
    for run in runs if isinstance(runs, list) else []:
        results = run.get("results") if isinstance(run, dict) else None
        for result in results if isinstance(results, list) else []:
            if not isinstance(result, dict):
                continue
            msg = _obj(result.get("message"))
            message = str(msg.get("text") or msg.get("markdown") or "").strip()
            rule = _obj(result.get("rule"))
            code = str(result.get("ruleId") or rule.get("id") or "")
            path, line, col = "", None, None
            locations = result.get("locations")
            if isinstance(locations, list) and locations and isinstance(locations[0], dict):
                phys = locations[0].get("physicalLocation")
                if isinstance(phys, dict):
                    art = phys.get("artifactLocation")
                    if isinstance(art, dict) and isinstance(art.get("uri"), str):
                        path = _uri_path(art["uri"])
                    region = phys.get("region")
                    if isinstance(region, dict):
                        line, col = _int(region.get("startLine")), _int(region.get("startColumn"))
            out.append(
                Diagnostic(
                    path=path or ".",
                    line=line,
                    col=col,
                    code=code,
                    message=message or code or "problem",
                    severity=str(result.get("level") or "warning"),
                )
            )
    return out


# --- choosing a parser ----------------------------------------------------------------------------

PARSERS: dict[str, Callable[[str], list[Diagnostic]]] = {
    "ruff": parse_ruff,
    "mypy": parse_mypy,
    "pytest": parse_pytest,
    "flake8": parse_flake8,
    "sarif": parse_sarif,
    "none": lambda _text: [],
}
_BY_PROGRAM: dict[str, ParserName] = {
    "ruff": "ruff",
    "mypy": "mypy",
    "dmypy": "mypy",
    "flake8": "flake8",
    "pytest": "pytest",
    "py.test": "pytest",
}
_PYTEST_MARK_RE = re.compile(r"^(?:(?:FAILED|ERROR) \S+::|=+ (?:FAILURES|short test summary info) =+$)", re.M)
_MYPY_MARK_RE = re.compile(r"^[^\s:][^:]*:\d+(?::\d+)?: (?:error|warning): ", re.M)


def _is_sarif(text: str) -> bool:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return False
    try:
        data = jsonsafe.loads(stripped)
    except ValueError:
        return False
    return isinstance(data, dict) and isinstance(data.get("runs"), list)


def detect_parser(command: str, text: str) -> ParserName:
    """The parser for ``command``'s output: SARIF by content, then by program name, then by content."""
    if _is_sarif(text):
        return "sarif"
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for word in words:
        name = os.path.basename(word).removesuffix(".exe")
        if name in _BY_PROGRAM:
            return _BY_PROGRAM[name]
    if _PYTEST_MARK_RE.search(text):
        return "pytest"
    if _MYPY_MARK_RE.search(text):
        return "mypy"
    if text.strip().startswith("[") and _ruff_json(_safe_json(text)):
        return "ruff"
    if any(_ARROW_RE.match(line) for line in text.splitlines()):
        return "ruff"
    if _concise(text):
        return "flake8"
    return "none"


def _safe_json(text: str) -> Any:
    try:
        return jsonsafe.loads(text)
    except ValueError:
        return None


def parse_auto(command: str, text: str) -> list[Diagnostic]:
    """``text`` read by the parser ``detect_parser`` picks."""
    return PARSERS[detect_parser(command, text)](text)


# --- diffs and reports ----------------------------------------------------------------------------

_HUNK_RE = re.compile(r"^@@ -\d+(?:,(?P<old>\d{1,18}))? \+(?P<start>\d{1,18})(?:,(?P<new>\d{1,18}))? @@")


def _diff_path(raw: str) -> str | None:
    """The path of a ``+++`` header (``b/`` prefix dropped, git's C quoting undone); None for /dev/null."""
    raw = raw.rstrip("\n").split("\t", 1)[0]
    if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
        try:
            raw = raw[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
            raw = raw.encode("latin-1").decode("utf-8", errors="replace")
        except (UnicodeError, ValueError):
            raw = raw[1:-1]
    if raw == "/dev/null":
        return None
    return raw[2:] if raw.startswith("b/") else raw


def changed_lines(diff_text: str) -> dict[str, set[int]]:
    """New-side line numbers added or changed per file, from a unified diff (any context size).

    A file whose change only deletes lines maps to an empty set; a deleted file is left out.
    """
    out: dict[str, set[int]] = {}
    path: str | None = None
    new_line = old_left = new_left = 0
    for line in diff_text.splitlines():
        if old_left > 0 or new_left > 0:  # inside a hunk: count its lines, whatever they look like
            if line.startswith("+"):
                if path is not None:
                    out[path].add(new_line)
                new_line += 1
                new_left -= 1
            elif line.startswith("-"):
                old_left -= 1
            elif line.startswith(" ") or line == "":
                new_line += 1
                new_left -= 1
                old_left -= 1
            continue
        if line.startswith("diff --git "):
            path = None
        elif line.startswith("+++ "):
            path = _diff_path(line[4:])
            if path is not None:
                out.setdefault(path, set())
        elif (m := _HUNK_RE.match(line)) is not None:
            new_line = int(m["start"])
            old_left = int(m["old"]) if m["old"] is not None else 1
            new_left = int(m["new"]) if m["new"] is not None else 1
    return out


def _one_line(text: str) -> str:
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return first[:500]


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    mark = "`" * max(3, longest + 1)
    return f"{mark}\n{text.rstrip()}\n{mark}"


def to_report(diagnostics: Iterable[Diagnostic], *, tool: str) -> str:
    """``FINDING: <tool> <code>: <message>`` / ``WHERE: <path>:<line>`` pairs, or the stop token.

    A diagnostic's ``detail`` follows its WHERE line inside a code fence, so it can never be read as a
    finding or a stop token. Its code and path are put on one line: a line break in them (a SARIF uri
    with ``%0A``) cut the pair and made lines of their own, read as another finding.
    """
    blocks: list[str] = []
    for d in diagnostics:
        message = _one_line(d.message) or "problem"
        code, path = " ".join(d.code.splitlines()), " ".join(d.path.splitlines())
        claim = f"{tool} {code}: {message}" if code else f"{tool}: {message}"
        where = f"{path}:{d.line}" if d.line is not None else path
        block = f"FINDING: {claim}\nWHERE: {where}"
        if d.detail.strip():
            block += "\n" + _fence(d.detail)
        blocks.append(block)
    return "\n\n".join(blocks) + "\n" if blocks else STOP_TOKEN + "\n"
