"""Transcript reading: the commands an agent ran, from codex --json events and rollouts, claude
stream-json and Jury's http tool loop; and codex's final answer and session id from its events."""

from __future__ import annotations

import json

import pytest

from orchestrator.codex_json import codex_message, codex_usage, json_lines
from orchestrator.parse import extract_report, parse_review
from orchestrator.transcript import (
    Commands,
    broken_reason,
    codex_events,
    codex_failure,
    codex_rollout,
    codex_thread,
    commands_of,
    http_tools,
    stream_json,
)

SANDBOX_ERROR = "bwrap: execvp codex-linux-sandbox: No such file or directory"
THREAD = "01a2301e-dce4-7f31-969c-a3dd6833f9b2"


def lines(*records: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def cmd_item(n: int, code: int | None, status: str, output: str = "") -> dict:
    item = {
        "id": f"item_{n}",
        "type": "command_execution",
        "command": "/bin/bash -lc ls",
        "aggregated_output": output,
        "exit_code": code,
        "status": status,
    }
    return {"type": "item.completed", "item": item}


def started(n: int) -> dict:
    item = {"id": f"item_{n}", "type": "command_execution", "exit_code": None, "status": "in_progress"}
    return {"type": "item.started", "item": item}


def message(text: str) -> dict:
    return {"type": "item.completed", "item": {"id": "m", "type": "agent_message", "text": text}}


# What codex 0.171 `exec --json` printed on a healthy run (shapes copied from a real run).
CODEX_OK = lines(
    {"type": "thread.started", "thread_id": THREAD},
    {
        "type": "item.completed",
        "item": {"id": "item_0", "type": "error", "message": "Model metadata not found"},
    },
    {"type": "turn.started"},
    started(1),
    cmd_item(1, 1, "failed", "cat: nonexist: No such file or directory\n"),
    started(2),
    cmd_item(2, 0, "completed", "hello.txt\n"),
    message("NO NEW FINDINGS\n"),
    {"type": "turn.completed", "usage": {"input_tokens": 300, "cached_input_tokens": 0, "output_tokens": 60}},
)
# ... and on the broken one: the sandbox failures are not reported on stdout at all.
CODEX_BROKEN_STDOUT = lines(
    {"type": "thread.started", "thread_id": THREAD},
    {"type": "turn.started"},
    message("NO NEW FINDINGS\n"),
    {"type": "turn.completed", "usage": {"input_tokens": 200, "output_tokens": 40}},
)


def rollout_call(call_id: str, cmd: str = "cat hello.txt", name: str = "exec_command") -> dict:
    payload = {
        "type": "function_call",
        "name": name,
        "arguments": json.dumps({"cmd": cmd}),
        "call_id": call_id,
    }
    return {"type": "response_item", "payload": payload}


def rollout_output(call_id: str, code: int | None, printed: str) -> dict:
    head = "Chunk ID: c20b4b\nWall time: 0.0000 seconds\n"
    status = f"Process exited with code {code}\n" if code is not None else ""
    output = f"{head}{status}Original token count: 3\nOutput:\n{printed}"
    return {
        "type": "response_item",
        "payload": {"type": "function_call_output", "call_id": call_id, "output": output},
    }


TASK_STARTED = {"type": "event_msg", "payload": {"type": "task_started", "turn_id": "t"}}
ROLLOUT_BROKEN = lines(
    {"type": "session_meta", "payload": {"id": THREAD}},
    TASK_STARTED,
    rollout_call("call-1"),
    rollout_output("call-1", 1, SANDBOX_ERROR + "\n"),
    rollout_call("call-2", "ls"),
    rollout_output("call-2", 1, SANDBOX_ERROR + "\n"),
    {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": []}},
)


# --- codex --json events ---------------------------------------------------------------------------


def test_codex_events_count_commands_and_failures() -> None:
    got = codex_events(CODEX_OK)
    assert got == Commands(
        run=2, failed=1, first_error="cat: nonexist: No such file or directory", source="codex --json events"
    )
    assert not got.broken
    assert broken_reason(got, "codex") is None


def test_codex_events_every_command_failed_is_broken() -> None:
    text = lines(
        started(1),
        cmd_item(1, 1, "failed", SANDBOX_ERROR + "\n"),
        cmd_item(2, None, "declined"),
        message("NO NEW FINDINGS"),
    )
    got = codex_events(text)
    assert got is not None and (got.run, got.failed) == (2, 2) and got.broken
    assert broken_reason(got, "codex") == f"every command codex ran failed (2 of 2): {SANDBOX_ERROR}"


def test_codex_events_a_command_that_never_finished_counts_as_failed() -> None:
    got = codex_events(lines(started(1), message("NO NEW FINDINGS")))
    assert got is not None and got.broken
    assert got.first_error == "asked for, but no result came back"


def test_codex_events_without_commands_say_nothing() -> None:
    assert codex_events(CODEX_BROKEN_STDOUT) is None
    assert broken_reason(None, "codex") is None


def test_codex_message_thread_usage() -> None:
    assert codex_message(CODEX_OK) == "NO NEW FINDINGS\n"
    assert codex_thread(CODEX_OK) == THREAD
    assert codex_usage(CODEX_OK) == {"input_tokens": 300, "cached_input_tokens": 0, "output_tokens": 60}
    assert codex_failure(CODEX_OK) is None


def test_codex_message_is_the_last_agent_message() -> None:
    text = lines(message("thinking aloud"), cmd_item(1, 0, "completed"), message("FINDING: x\nWHERE: a.py:1"))
    assert codex_message(text) == "FINDING: x\nWHERE: a.py:1"


def test_codex_events_without_a_message_give_an_empty_answer_never_the_raw_events() -> None:
    # a command printed the stop token: the raw events must not become the report
    text = lines(
        {"type": "thread.started", "thread_id": THREAD}, cmd_item(1, 0, "completed", "NO NEW FINDINGS\n")
    )
    assert codex_message(text) == ""
    assert extract_report(text, "", "codex-json") == ""
    assert parse_review(extract_report(text, "", "codex-json")).verdict == "unparseable"


def test_codex_json_report_falls_back_to_plain_text() -> None:
    assert codex_message("NO NEW FINDINGS\n") is None
    assert extract_report("NO NEW FINDINGS\n", "", "codex-json") == "NO NEW FINDINGS"
    assert extract_report(CODEX_OK, "", "codex-json") == "NO NEW FINDINGS"


def test_codex_thread_refuses_ids_unfit_for_a_file_name() -> None:
    for bad in ("../../etc", "*", "a b c d e f g h", "", 42):
        assert codex_thread(lines({"type": "thread.started", "thread_id": bad})) is None


def test_codex_failure_from_a_failed_turn() -> None:
    text = lines({"type": "turn.failed", "error": {"message": "stream disconnected\nretrying"}})
    assert codex_failure(text) == "stream disconnected"


# --- codex rollouts ----------------------------------------------------------------------------------


def test_rollout_sees_the_sandbox_failures_stdout_does_not() -> None:
    got = codex_rollout(ROLLOUT_BROKEN)
    assert got == Commands(run=2, failed=2, first_error=SANDBOX_ERROR, source="codex session rollout")
    assert commands_of("cli", "codex-json", CODEX_BROKEN_STDOUT, "", ROLLOUT_BROKEN) == got


def test_rollout_counts_only_the_last_turn_of_a_resumed_session() -> None:
    earlier = lines(TASK_STARTED, rollout_call("a"), rollout_output("a", 0, "fine\n"))
    assert codex_rollout(ROLLOUT_BROKEN + earlier) == Commands(
        run=1, failed=0, source="codex session rollout"
    )
    assert codex_rollout(earlier + ROLLOUT_BROKEN).broken  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("output", "ok"),
    [
        pytest.param("Chunk ID: x\nProcess exited with code 0\nOutput:\nok\n", True, id="exec-exit-0"),
        pytest.param("Chunk ID: x\nProcess running with session ID 3\nOutput:\n", True, id="exec-running"),
        pytest.param("Exit code: 0\nWall time: 0.1 seconds\nOutput:\nok\n", True, id="shell-text"),
        pytest.param("Exit code: 2\nOutput:\nno\n", False, id="shell-text-failed"),
        pytest.param(json.dumps({"output": "x", "metadata": {"exit_code": 0}}), True, id="shell-json"),
        pytest.param(
            json.dumps({"output": "denied", "metadata": {"exit_code": 1}}), False, id="shell-json-failed"
        ),
        pytest.param("exec_command failed: sandbox denied\n", False, id="not-started"),
        pytest.param("{" * 100_000, False, id="nested-garbage"),
    ],
)
def test_rollout_shell_outputs(output: str, ok: bool) -> None:
    text = lines(
        TASK_STARTED,
        rollout_call("c"),
        {
            "type": "response_item",
            "payload": {"type": "function_call_output", "call_id": "c", "output": output},
        },
    )
    got = codex_rollout(text)
    assert got is not None and got.run == 1 and got.failed == (0 if ok else 1)


def test_rollout_ignores_tools_that_run_no_command() -> None:
    text = lines(
        TASK_STARTED,
        rollout_call("v", name="view_image"),
        rollout_output("v", 1, "no image"),
        rollout_call("c"),
        rollout_output("c", 0, "fine"),
    )
    assert codex_rollout(text) == Commands(run=1, failed=0, source="codex session rollout")


def test_a_rollout_without_commands_leaves_the_stdout_events() -> None:
    assert commands_of("cli", "codex-json", CODEX_OK, "", lines(TASK_STARTED)) == codex_events(CODEX_OK)
    assert commands_of("cli", "codex-json", CODEX_OK, "", None) == codex_events(CODEX_OK)


# --- claude stream-json --------------------------------------------------------------------------------


def tool_use(tid: str, name: str = "Bash") -> dict:
    content = [{"type": "tool_use", "id": tid, "name": name, "input": {"command": "ls"}}]
    return {"type": "assistant", "message": {"role": "assistant", "content": content}}


def tool_result(tid: str, is_error: bool, content: object) -> dict:
    block = {"type": "tool_result", "tool_use_id": tid, "content": content, "is_error": is_error}
    return {"type": "user", "message": {"role": "user", "content": [block]}}


def test_stream_json_every_tool_call_failed() -> None:
    text = lines(
        {"type": "system", "subtype": "init", "session_id": "s"},
        tool_use("t1"),
        tool_result("t1", True, "Permission denied: sandbox"),
        tool_use("t2", "Read"),
        tool_result("t2", True, [{"type": "text", "text": "\nFile does not exist."}]),
        {"type": "result", "result": "NO NEW FINDINGS"},
    )
    got = stream_json(text)
    assert got == Commands(
        run=2, failed=2, first_error="Permission denied: sandbox", source="stream-json tool calls"
    )
    assert commands_of("cli", "stream-json", text, "") == got


def test_stream_json_one_success_is_enough() -> None:
    text = lines(
        tool_use("t1"), tool_result("t1", True, "nope"), tool_use("t2"), tool_result("t2", False, "ok")
    )
    got = stream_json(text)
    assert got is not None and (got.run, got.failed, got.broken) == (2, 1, False)


def test_stream_json_results_for_unknown_uses_are_ignored() -> None:
    assert stream_json(lines(tool_result("ghost", True, "x"))) is None


# --- the http tool loop ---------------------------------------------------------------------------------


def test_http_tool_loop_refused_and_failed_calls() -> None:
    transcript = lines(
        {"t": "request", "model": "m"},
        {"t": "tool", "tool": "run_command", "ok": False, "refused": "not a declared check", "text": ""},
        {"t": "tool", "tool": "read_file", "ok": False, "refused": None, "text": "not a file: x.py"},
    )
    got = http_tools(transcript)
    assert got == Commands(
        run=2, failed=2, first_error="refused: not a declared check", source="http tool calls"
    )
    assert commands_of("http", "whole", "NO NEW FINDINGS", transcript) == got
    ok = transcript + lines({"t": "tool", "tool": "read_file", "ok": True, "refused": None, "text": "x"})
    assert http_tools(ok) == Commands(run=3, failed=2, first_error=got.first_error, source="http tool calls")


# --- formats that report no command, and bad input -------------------------------------------------


def test_other_formats_say_nothing() -> None:
    assert commands_of("cli", "whole", CODEX_OK, "", ROLLOUT_BROKEN) is None
    assert commands_of("check", "whole", "", "") is None


@pytest.mark.parametrize(
    "garbage",
    [
        "[" * 200_000,
        "{" + '"a":{' * 200_000,
        '{"type": "item.completed", "item": ' + "[" * 100_000 + "}\n",
        '{"type": "item.completed", "item": "not an object"}\n{"type": 7}\n{"message": {"content": "x"}}\n',
        '{"t": "tool", "refused": ["x"]}\n{"t": "tool", "ok": "yes"}\n',
        "\x00\xff not json {",
    ],
)
def test_bad_input_is_never_a_crash(garbage: str) -> None:
    for fmt in ("codex-json", "stream-json", "whole"):
        commands_of("cli", fmt, garbage, garbage, garbage)
        extract_report(garbage, garbage, fmt)
    commands_of("http", "whole", garbage, garbage)
    codex_thread(garbage)
    codex_usage(garbage)
    codex_failure(garbage)
    assert list(json_lines("{" * 100_000)) == []


# --- finding codex's session file (workers/agents/cli.py) -------------------------------------------------


def test_the_rollout_is_found_under_codex_home_or_home(tmp_path) -> None:
    from workers.agents import cli

    day = tmp_path / "ch" / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    (day / f"rollout-2026-12-01T05-41-00-{THREAD}.jsonl").write_text(ROLLOUT_BROKEN)
    (day / "rollout-2026-12-01T05-41-00-other.jsonl").write_text("not this one")
    assert cli.codex_rollout_text({"CODEX_HOME": str(tmp_path / "ch")}, THREAD) == ROLLOUT_BROKEN
    (tmp_path / "ch").rename(tmp_path / ".codex")
    assert cli.codex_rollout_text({"HOME": str(tmp_path)}, THREAD) == ROLLOUT_BROKEN
    assert cli.codex_rollout_text({"HOME": str(tmp_path)}, "0199-no-such-thread") is None
    assert cli.codex_rollout_text({"HOME": str(tmp_path)}, None) is None
    assert cli.codex_rollout_text({}, THREAD) is None


def test_only_the_tail_of_a_huge_rollout_is_read(tmp_path, monkeypatch) -> None:
    from workers.agents import cli

    day = tmp_path / ".codex" / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    old = lines(TASK_STARTED, rollout_call("a"), rollout_output("a", 0, "x" * 5000))
    (day / f"rollout-x-{THREAD}.jsonl").write_text(old + ROLLOUT_BROKEN)
    monkeypatch.setattr(cli, "ROLLOUT_MAX_BYTES", len(ROLLOUT_BROKEN) + 100)
    text = cli.codex_rollout_text({"HOME": str(tmp_path)}, THREAD)
    assert text is not None and len(text) <= len(ROLLOUT_BROKEN) + 100
    assert codex_rollout(text) == codex_rollout(ROLLOUT_BROKEN)  # the torn first line is dropped


@pytest.mark.parametrize(
    "hostile",
    [
        "[" * 100_000,
        '{"a": ' * 5_000 + "1" + "}" * 5_000,
        '{"type": "item.completed", "item": {"id": "x", "type": "comm',
    ],
    ids=["deep-array", "deep-object", "torn"],
)
def test_a_hostile_line_keeps_the_good_ones(hostile: str) -> None:
    text = hostile + "\n" + CODEX_OK + hostile + "\n"
    assert codex_events(text) == codex_events(CODEX_OK)
    assert codex_message(text) == "NO NEW FINDINGS\n" and codex_thread(text) == THREAD
    assert codex_rollout(hostile + "\n" + ROLLOUT_BROKEN) == codex_rollout(ROLLOUT_BROKEN)
