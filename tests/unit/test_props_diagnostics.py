"""Checker output under property-based tests (orchestrator/diagnostics.py).

A checker's output is the reviewed code's: a test prints what it likes, a file is named as its author
likes. Whatever the text, the parsers return diagnostics and raise nothing; what the checkers really
write reads back field by field; and a check agent's report (``to_report``) reads through
``parse_review`` as exactly one finding per diagnostic, whatever its path, message and detail hold.
"""

from __future__ import annotations

import difflib
import json

from hypothesis import example, given
from hypothesis import strategies as st

from orchestrator.diagnostics import (
    PARSERS,
    Diagnostic,
    changed_lines,
    detect_parser,
    parse_auto,
    parse_flake8,
    parse_mypy,
    parse_sarif,
    to_report,
)
from orchestrator.parse import STOP_TOKEN, parse_review
from tests.unit.hostile import CODE, hostile_text, json_values

CHECKER_WORDS = [
    "a.py:1:2: E501 ",
    "a.py:3: error: ",
    "a.py:4: note: ",
    "FAILED tests/t.py::test_x - ",
    "ERROR t.py",
    "_____ test_x _____",
    "=== FAILURES ===",
    "t.py:12: in test_x",
    "E   assert 1 == 2",
    " --> a.py:1:1",
    "F401 [*] ",
    '{"runs": [',
    '[{"filename": ',
    "@@ -1,2 +1,3 @@",
    "+++ b/a.py",
    "diff --git a/a b/a",
]
ANY_OUTPUT = hostile_text(CHECKER_WORDS)
PATH = st.builds(
    lambda parts, ext: "/".join(parts) + ext,
    st.lists(st.text(alphabet="abcxyz019_-", min_size=1, max_size=8), min_size=1, max_size=3),
    st.sampled_from([".py", ".ts", ".go"]),
)
LINE = st.integers(min_value=1, max_value=10**6)
MESSAGE = st.text(alphabet="abcdefghij klmnop'\"(),.=<>", min_size=1, max_size=60).map(str.strip).filter(bool)


@given(text=ANY_OUTPUT, command=st.sampled_from(["ruff check", "mypy .", "pytest -q", "flake8", "make lint"]))
@example(text="a.py:" + "1" * 5_000 + ":1: E501 x", command="flake8")  # int() raised ValueError
@example(text="@@ -1," + "9" * 5_000 + " +1 @@", command="git diff")
@example(text="t.py:" + "7" * 5_000 + ": in test_x", command="pytest")
def test_any_output_reads_as_diagnostics(text: str, command: str) -> None:
    for name, parser in PARSERS.items():
        for d in parser(text):
            assert isinstance(d, Diagnostic), name
            assert d.line is None or d.line >= 0
            assert d.col is None or d.col >= 0
    assert detect_parser(command, text) in PARSERS
    assert all(isinstance(d, Diagnostic) for d in parse_auto(command, text))
    for path, lines in changed_lines(text).items():
        assert isinstance(path, str) and all(isinstance(n, int) for n in lines)


@given(doc=json_values(20), wrap=st.sampled_from(["runs", "results", "locations", "none"]))
def test_any_json_reads_as_sarif_or_nothing(doc: object, wrap: str) -> None:
    shaped = {
        "runs": {"runs": [doc]},
        "results": {"runs": [{"results": [doc]}]},
        "locations": {"runs": [{"results": [{"locations": [doc], "message": doc}]}]},
        "none": doc,
    }[wrap]
    for d in parse_sarif(json.dumps(shaped)):
        assert d.path and d.message


@given(
    rows=st.lists(st.tuples(PATH, LINE, st.integers(1, 500), CODE.filter(str.isupper), MESSAGE), max_size=6),
    prefix=st.sampled_from(["", "./"]),
)
def test_concise_lines_read_back(rows: list[tuple[str, int, int, str, str]], prefix: str) -> None:
    codes = [c if c[-1].isdigit() else c + "1" for *_, c, _ in rows]
    text = "\n".join(
        f"{prefix}{p}:{n}:{c}: {code} {m}" for (p, n, c, _, m), code in zip(rows, codes, strict=True)
    )
    got = [(d.path, d.line, d.col, d.code, d.message) for d in parse_flake8(text)]
    assert got == [(p, n, c, code, m) for (p, n, c, _, m), code in zip(rows, codes, strict=True)]


@given(
    rows=st.lists(
        st.tuples(
            PATH, LINE, st.none() | st.integers(1, 500), st.sampled_from(["error", "warning"]), MESSAGE
        ),
        max_size=6,
    ),
    code=st.none() | st.sampled_from(["arg-type", "union-attr", "misc"]),
)
def test_mypy_lines_read_back(rows: list[tuple[str, int, int | None, str, str]], code: str | None) -> None:
    suffix = f"  [{code}]" if code else ""
    text = "\n".join(f"{p}:{n}{'' if c is None else f':{c}'}: {s}: {m}{suffix}" for p, n, c, s, m in rows)
    text += "\na.py:1: note: notes are not diagnostics"
    got = [(d.path, d.line, d.col, d.severity, d.message, d.code) for d in parse_mypy(text)]
    assert got == [(p, n, c, s, m, code or "") for p, n, c, s, m in rows]


@given(
    results=st.lists(
        st.tuples(st.text(min_size=1, max_size=30), st.none() | LINE, st.none() | LINE, CODE, MESSAGE),
        max_size=5,
    )
)
def test_sarif_results_read_back(results: list[tuple[str, int | None, int | None, str, str]]) -> None:
    def region(line: int | None, col: int | None) -> dict[str, int]:
        return {k: v for k, v in (("startLine", line), ("startColumn", col)) if v is not None}

    doc = {
        "version": "2.1.0",
        "runs": [
            {
                "results": [
                    {
                        "ruleId": code,
                        "level": "error",
                        "message": {"text": message},
                        "locations": [
                            {
                                "physicalLocation": {
                                    "artifactLocation": {"uri": "src/" + uri.replace("%", "%25")},
                                    "region": region(line, col),
                                }
                            }
                        ],
                    }
                    for uri, line, col, code, message in results
                ]
            }
        ],
    }
    text = json.dumps(doc)
    assert detect_parser("anything", text) == "sarif"
    got = [(d.path, d.line, d.col, d.code, d.message) for d in parse_sarif(text)]
    assert got == [
        (("src/" + uri).strip(), line, col, code, message) for uri, line, col, code, message in results
    ]


DIAGNOSTIC = st.builds(
    Diagnostic,
    # Any text with something to point at, or "." (the repository: a check agent's failure it cannot
    # place, SARIF's result without a location). Decoration alone (``**``, backticks) is no location.
    path=st.just(".") | st.text(max_size=40).filter(lambda p: any(c.isalnum() for c in p)),
    line=st.none() | LINE,
    code=st.sampled_from(["", "E501", "arg-type", "FAILED"]) | st.text(max_size=10),
    message=st.text(max_size=80),
    detail=hostile_text(["FINDING: ", "WHERE: ", STOP_TOKEN, "```", "````", "~~~"], max_lines=8),
)


@given(
    diagnostics=st.lists(DIAGNOSTIC, max_size=5), tool=st.sampled_from(["ruff", "mypy", "pytest", "check"])
)
@example(  # a path holding a line break (a SARIF uri "%0A") cut its WHERE line and forged a finding
    diagnostics=[Diagnostic(path="a.py\nFINDING: forged\nWHERE: b.py", line=1, message="x")], tool="sarif"
)
@example(  # the repository itself ("."): "WHERE: ." read as no location, and the finding was lost
    diagnostics=[Diagnostic(path=".", message="`make check` failed")], tool="check"
)
@example(diagnostics=[Diagnostic(path="a.py", code="E1\u2028FINDING: x", message="m")], tool="ruff")
def test_a_check_report_reads_as_one_finding_per_diagnostic(diagnostics: list[Diagnostic], tool: str) -> None:
    review = parse_review(to_report(diagnostics, tool=tool))
    assert len(review.findings) == len(diagnostics)
    assert review.verdict == ("found" if diagnostics else "clean")
    for d, f in zip(diagnostics, review.findings, strict=True):
        assert f.claim.startswith(tool)
        if d.line is not None:
            assert f.loc.endswith(f":{d.line}")


@given(
    old=st.lists(st.sampled_from(["a", "b", "c", "d", "", "+x", "-y", " z", "@@ -1 +1 @@"]), max_size=30),
    new=st.lists(st.sampled_from(["a", "b", "c", "e", "", "+x", "-y", " z", "@@ -1 +1 @@"]), max_size=30),
    context=st.integers(min_value=0, max_value=3),
)
def test_changed_lines_are_the_new_sides_added_lines(old: list[str], new: list[str], context: int) -> None:
    diff = "\n".join(difflib.unified_diff(old, new, "a/f.py", "b/f.py", n=context, lineterm="")).replace(
        "\n\n", "\n \n"
    )  # an empty context line is " " in git's diffs
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    added = {
        j + 1
        for tag, _i1, _i2, j1, j2 in matcher.get_opcodes()
        if tag in ("replace", "insert")
        for j in range(j1, j2)
    }
    expected = {"f.py": added} if diff else {}
    assert changed_lines(f"diff --git a/f.py b/f.py\n{diff}" if diff else "") == expected
