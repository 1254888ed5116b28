"""Every parser of untrusted text reads a huge line in time linear in its length.

A regex with two overlapping runs (``[\\s*_]*`` then ``[\\s*_`]*``) backtracks quadratically, a lazy group
between two of them cubically: a reviewer's answer, a test's output or a checker's report holding one
line of 20,000 spaces or underscores then held a worker for minutes to hours. Each parser here gets lines
built from its own keywords and the characters such regexes are made of, and must finish each within a
bound of CPU time far above what a linear reading costs and far below what a quadratic one does.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from orchestrator import diagnostics, jsonsafe, parse, transcript
from orchestrator.refute import classify_command, commands_in_task, parse_refutation
from tests.unit.hostile import DECORATION_CHARS, cpu_seconds

# Seconds of CPU time. A linear parse of these lines takes milliseconds, a quadratic one of the explicit
# 80,000-character examples minutes: the margin is a thousandfold either way, so a loaded machine (CPU
# time, not wall time, is counted) cannot fail a linear parser, and no superlinear one passes.
CPU_LIMIT = 10.0

PARSERS: dict[str, Callable[[str], object]] = {
    "parse_review": parse.parse_review,
    "parse_reply": parse.parse_reply,
    "parse_verdict": parse.parse_verdict,
    "parse_loc": parse.parse_loc,
    "same_finding": lambda t: parse.same_finding(t, t, t + "x", t),
    "summarize": parse.summarize,
    "extract_report": lambda t: [parse.extract_report(t, t, f) for f in parse_formats()],
    "report_cost": parse.report_cost,
    "parse_refutation": parse_refutation,
    "commands_in_task": commands_in_task,
    "classify_command": classify_command,
    "parse_ruff": diagnostics.parse_ruff,
    "parse_mypy": diagnostics.parse_mypy,
    "parse_pytest": diagnostics.parse_pytest,
    "parse_sarif": diagnostics.parse_sarif,
    "parse_auto": lambda t: diagnostics.parse_auto("checker", t),
    "changed_lines": diagnostics.changed_lines,
    "transcript": lambda t: [transcript.commands_of(k, r, t, t, t) for k, r in transcript_kinds()],
    "jsonsafe.values": lambda t: list(jsonsafe.values(t, parse._VALUE_START)),
}

# The heads that bring a line to each parser's regexes: its keywords, its line shapes.
HEADS = [
    "",
    "FINDING:",
    "**FINDING 1:** ",
    "WHERE: ",
    "CONTEST f-1: ",
    "NO CONTEST",
    "REFUTED: ",
    "NOT REFUTED",
    "1. ",
    "- `",
    "> ",
    "```",
    "$ ",
    "a.py:1: error: x",
    "a.py:1:2: E501 x",
    "FAILED t.py::t - x",
    "_____ ",
    "_____ ERROR at setup of ",
    "t.py:3: x",
    "E   ",
    " --> a.py:1:",
    "@@ -1 +1 @@",
    "+++ b/",
    "a.py:1",
    "a.py#L",
    '{"verdict": "',
    '{"a":',
    "[",
]
TAILS = ["", "x", ":", "*", "_", "`", " ___", "1", "]", "}", "FINDING: y", "NO NEW FINDINGS", "\nWHERE: a:1"]


def parse_formats() -> list[str]:
    return ["whole", "tail", "result-json", "opencode-json", "stream-json", "codex-json"]


def transcript_kinds() -> list[tuple[str, str]]:
    return [("http", "whole"), ("cli", "codex-json"), ("cli", "stream-json")]


huge_lines = st.builds(
    lambda head, unit, count, middle, tail: head + unit * count + middle + unit * count + tail,
    st.sampled_from(HEADS),
    st.text(alphabet=DECORATION_CHARS + 'a{["\\/()', min_size=1, max_size=3),
    st.integers(min_value=20_000, max_value=40_000),
    st.sampled_from(["", "x", " x ", "*", ":1", "-"]),
    st.sampled_from(TAILS),
)


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=20)
@given(line=huge_lines)
@example(line="_____ " + " " * 80_000 + "x")  # parse_pytest's section title: cubic
@example(line="a.py:1: error: x" + " " * 80_000 + "y")  # parse_mypy's message: quadratic
@example(line=" " * 80_000 + "x")  # every "decoration, then a keyword" regex: quadratic
@example(line="REFUTED: x" + " " * 80_000 + "y")  # the verdict's trailing bold: quadratic
@example(line="a.py" + ":1" * 40_000 + "x")  # parse_loc's path and line: quadratic
@example(line="FINDING:" + "\t" * 40_000 + "x" + "\t" * 40_000 + "x")  # _unwrap's trailing bold: quadratic
def test_a_huge_line_costs_linear_time(name: str, line: str) -> None:
    with cpu_seconds(CPU_LIMIT):
        PARSERS[name](line)
