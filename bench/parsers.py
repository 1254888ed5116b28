"""Parsers: seconds of CPU per 1 MB hostile line, per parser of untrusted text.

Every parser of an agent's, a checker's or a test's output reads a huge line in time linear in its length
(a backtracking regex once held a worker for hours on one line of spaces). The line here is the worst
shape the parsers met: a keyword head, then a run of decoration characters, a word, and the run again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bench.stats import Figure, figure
from orchestrator import diagnostics, jsonsafe, parse, transcript
from orchestrator.refute import classify_command, commands_in_task, parse_refutation

FORMATS = ["whole", "tail", "result-json", "opencode-json", "stream-json", "codex-json"]
KINDS = [("http", "whole"), ("cli", "codex-json"), ("cli", "stream-json")]

PARSERS: dict[str, Callable[[str], object]] = {
    "parse_review": parse.parse_review,
    "parse_reply": parse.parse_reply,
    "parse_verdict": parse.parse_verdict,
    "parse_loc": parse.parse_loc,
    "same_finding": lambda t: parse.same_finding(t, t, t + "x", t),
    "summarize": parse.summarize,
    "extract_report": lambda t: [parse.extract_report(t, t, f) for f in FORMATS],
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
    "transcript": lambda t: [transcript.commands_of(k, r, t, t, t) for k, r in KINDS],
    "jsonsafe.values": lambda t: list(jsonsafe.values(t, parse._VALUE_START)),
}

# (head, unit): the line is head + unit * n + " x " + unit * n + tail, about 1 MB long.
SHAPES = [
    ("", " "),
    ("FINDING:", " *_"),
    ("_____ ", " "),
    ("a.py:1: error: x", " "),
    ("REFUTED: x", " "),
    ("a.py", ":1"),
    ('{"verdict": "', "["),
]
MB = 1_000_000


def hostile_lines(size: int = MB) -> list[str]:
    lines = []
    for head, unit in SHAPES:
        n = max(1, (size - len(head) - 3) // (2 * len(unit)))
        lines.append(head + unit * n + " x " + unit * n + "\n")
    return lines


def measure(repeat: int, size: int = MB) -> list[Figure]:
    """Per parser: CPU seconds for its slowest hostile shape, ``repeat`` times."""
    lines = hostile_lines(size)
    figures = []
    for name, fn in PARSERS.items():
        samples = []
        for _ in range(repeat):
            worst = 0.0
            for line in lines:
                t = time.process_time()
                fn(line)
                worst = max(worst, time.process_time() - t)
            samples.append(worst * MB / size)
        figures.append(
            figure(
                "parsers",
                name,
                "s per 1 MB line",
                samples,
                note=f"CPU, worst shape, {size // 1000:,} kB lines",
            )
        )
    return figures
