"""Agent transcripts and raw CLI output under property-based tests (orchestrator/transcript.py, the report
extraction and the reported cost of orchestrator/parse.py).

An agent's stdout, stderr and session file are its own: any JSON of any shape, torn lines, other text.
Whatever they hold, the readers count commands consistently and raise nothing; the events the CLIs
really write read back as written; the answer extracted for each report format is text.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from orchestrator import codex_json, transcript
from orchestrator.cost import cost_from_report
from orchestrator.parse import extract_report, report_cost
from orchestrator.transcript import Commands
from tests.unit.hostile import hostile_text, json_values

FORMATS = ["whole", "tail", "result-json", "opencode-json", "stream-json", "codex-json", "other"]
TYPES = [
    "item.started", "item.completed", "thread.started", "turn.completed", "turn.failed", "error",
    "response_item", "event_msg", "assistant", "user", "result", "message", "text", "tool",
]  # fmt: skip
ITEM_TYPES = [
    "command_execution", "agent_message", "function_call", "function_call_output", "local_shell_call",
    "custom_tool_call", "custom_tool_call_output", "task_started", "tool_use", "tool_result", "text",
]  # fmt: skip


def maybe(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The realistic value, or any JSON value at all in its place."""
    return value | json_values(4)


BLOCK = st.fixed_dictionaries(
    {"type": maybe(st.sampled_from(ITEM_TYPES))},
    optional={
        "id": maybe(st.sampled_from(["c1", "c2"])),
        "tool_use_id": maybe(st.sampled_from(["c1", "c2"])),
        "is_error": maybe(st.booleans()),
        "content": json_values(4),
        "text": maybe(st.text(max_size=20)),
    },
)
RECORD = st.fixed_dictionaries(
    {"type": maybe(st.sampled_from(TYPES))},
    optional={
        "item": maybe(
            st.fixed_dictionaries(
                {"type": maybe(st.sampled_from(ITEM_TYPES))},
                optional={
                    "id": maybe(st.sampled_from(["c1", "c2"])),
                    "exit_code": maybe(st.integers(-2, 3)),
                    "status": maybe(st.sampled_from(["completed", "failed", "in_progress"])),
                    "aggregated_output": maybe(st.text(max_size=30)),
                    "text": maybe(st.text(max_size=30)),
                },
            )
        ),
        "payload": maybe(
            st.fixed_dictionaries(
                {"type": maybe(st.sampled_from(ITEM_TYPES))},
                optional={
                    "name": maybe(st.sampled_from(["exec_command", "shell", "apply_patch"])),
                    "call_id": maybe(st.sampled_from(["c1", "c2"])),
                    "output": maybe(
                        st.sampled_from(["Process exited with code 0", "Exit code: 1\nOutput:\nboom", "{"])
                    ),
                },
            )
        ),
        "message": maybe(st.fixed_dictionaries({"role": st.just("assistant"), "content": st.lists(BLOCK)})),
        "usage": maybe(st.dictionaries(st.sampled_from(["input_tokens", "output_tokens"]), json_values(2))),
        "thread_id": maybe(st.text(max_size=70)),
        "result": maybe(st.text(max_size=20)),
        "total_cost_usd": maybe(st.floats() | st.integers()),
        "t": maybe(st.just("tool")),
        "ok": maybe(st.booleans()),
        "refused": maybe(st.text(max_size=10)),
    },
)
JSON_LINE = RECORD.map(lambda r: json.dumps(r))  # NaN and Infinity written as Python writes them
ANY_OUTPUT = hostile_text(
    ['{"type": "item.completed", "item": {', '{"t": "tool", ', "codex"], extra=[JSON_LINE]
)


def consistent(commands: Commands | None) -> None:
    if commands is None:
        return
    assert 0 <= commands.failed <= commands.run and commands.run > 0
    assert (commands.first_error is None) == (commands.failed == 0)
    assert commands.broken == (commands.failed >= commands.run)


@given(stdout=ANY_OUTPUT, stderr=ANY_OUTPUT, rollout=st.none() | ANY_OUTPUT)
@example(stdout='{"a":' * 50_000 + "\n" + '{"type": "turn.completed"}', stderr="", rollout=None)
def test_any_transcript_counts_commands_consistently(stdout: str, stderr: str, rollout: str | None) -> None:
    assert all(isinstance(rec, dict) for rec in codex_json.json_lines(stdout))
    for kind, report in (("http", "whole"), ("cli", "codex-json"), ("cli", "stream-json"), ("cli", "whole")):
        consistent(transcript.commands_of(kind, report, stdout, stderr, rollout))
    consistent(transcript.codex_rollout(rollout or stdout))
    usage = codex_json.codex_usage(stdout)
    assert all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in usage.values())
    thread = transcript.codex_thread(stdout)
    assert thread is None or ("/" not in thread and "*" not in thread and ".." not in thread)
    failure = transcript.codex_failure(stdout)
    assert failure is None or (failure and "\n" not in failure)
    message = codex_json.codex_message(stdout)
    assert message is None or isinstance(message, str)


@given(stdout=ANY_OUTPUT, stderr=ANY_OUTPUT)
@example(stdout='{"total_cost_usd": NaN}\n{"total_cost_usd": -Infinity}', stderr="")
@example(stdout='{"total_cost_usd": 1' + "0" * 5_000 + "}", stderr="")
def test_any_output_gives_an_answer_and_a_sane_cost(stdout: str, stderr: str) -> None:
    for fmt in FORMATS:
        assert isinstance(extract_report(stdout, stderr, fmt), str)
    assert extract_report(stdout, stderr, "whole") == stdout.strip()
    cost = report_cost(stdout)
    assert cost is None or isinstance(cost, float)
    sane = cost_from_report(stdout)
    assert sane is None or (0 <= sane < float("inf"))


COMMAND = st.tuples(
    st.text(alphabet="abc123", min_size=1, max_size=6),  # its id
    st.integers(min_value=-1, max_value=3),  # its exit code
    st.text(max_size=30),  # what it printed
)


def first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[: transcript.ERROR_CHARS]


@given(
    commands=st.lists(COMMAND, max_size=6, unique_by=lambda c: c[0]), noise=st.lists(JSON_LINE, max_size=2)
)
def test_codex_events_read_back(commands: list[tuple[str, int, str]], noise: list[str]) -> None:
    lines = [json.dumps({"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"})]
    for cid, code, out in commands:
        item = {"id": cid, "type": "command_execution", "command": "ls", "aggregated_output": out}
        lines.append(json.dumps({"type": "item.started", "item": {**item, "status": "in_progress"}}))
        status = "completed" if code == 0 else "failed"
        lines.append(
            json.dumps({"type": "item.completed", "item": {**item, "exit_code": code, "status": status}})
        )
    lines.append(
        json.dumps({"type": "item.completed", "item": {"id": "m", "type": "agent_message", "text": "done"}})
    )
    stdout = "\n".join(
        lines + [n for n in noise if '"command_execution"' not in n and '"agent_message"' not in n]
    )
    got = transcript.codex_events(stdout)
    failures = [(cid, code, out) for cid, code, out in commands if code != 0]
    if not commands:
        assert got is None
    else:
        assert got is not None and (got.run, got.failed) == (len(commands), len(failures))
        if failures:
            _, code, out = failures[0]
            assert got.first_error == (first_line(out) or f"exit code {code}")
    assert codex_json.codex_message(stdout) == "done"
    assert extract_report(stdout, "", "codex-json") == "done"


@given(calls=st.lists(st.tuples(st.booleans(), st.text(max_size=20)), max_size=6))
def test_stream_json_tool_calls_read_back(calls: list[tuple[bool, str]]) -> None:
    lines = []
    for n, (error, text) in enumerate(calls):
        use = {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": "ls"}}
        lines.append(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [use]}}))
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "is_error": error, "content": text}
        lines.append(json.dumps({"type": "user", "message": {"role": "user", "content": [result]}}))
    answer = {"type": "text", "text": "FINDING: x\nWHERE: a.py:1"}
    lines.append(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [answer]}}))
    lines.append(
        json.dumps({"type": "result", "result": "FINDING: x\nWHERE: a.py:1", "total_cost_usd": 0.25})
    )
    stdout = "\n".join(lines)
    got = transcript.stream_json(stdout)
    if not calls:
        assert got is None
    else:
        assert got is not None and (got.run, got.failed) == (len(calls), sum(e for e, _ in calls))
    assert extract_report(stdout, "", "stream-json") == "FINDING: x\nWHERE: a.py:1"
    assert report_cost(stdout) == 0.25


# Output before the answer, without JSON nested hundreds deep and left open: each of its starts fails
# only at the end of the text, and past jsonsafe's work budget (twice the text's length, plus a floor)
# the rest of the text is not searched, so an answer after 500 such levels is not found (documented).
PLAIN_OUTPUT = hostile_text(
    ['{"type": "item.completed", "item": {', '{"t": "tool", '], extra=[JSON_LINE], big=False
)


@given(result=st.text(), before=PLAIN_OUTPUT)
def test_the_last_result_is_the_answer(result: str, before: str) -> None:
    stdout = before + "\n" + json.dumps({"type": "result", "result": result}) + "\n"
    assert extract_report(stdout, "", "result-json") == result.strip()
