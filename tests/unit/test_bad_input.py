"""Hostile JSON from an agent, a tool call or a check is bad input, never a crash, never a stall.

Python's decoder recurses once per nesting level: ``[[[[...]]]]`` 100,000 deep raises RecursionError,
which the ``except ValueError`` of every reader let through. Each reader here is fed that, the same with
a verdict after it, a 50 MB line, and text that made the embedded-JSON scan quadratic.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from orchestrator import diagnostics, jsonsafe
from orchestrator.parse import extract_report, parse_reply, parse_review, parse_verdict, report_cost
from orchestrator.refute.verdicts import parse_refutation
from orchestrator.store.files import FileStore
from workers.agents.tools import ToolRefusal, _parse_args, call_tool

DEEP = 100_000
DEEP_ARRAY = "[" * DEEP + "]" * DEEP
DEEP_OBJECT = '{"a":' * DEEP + "1" + "}" * DEEP
DEEP_VERDICT = '{"verdict": ' + DEEP_ARRAY + "}"
UNCLOSED = '{"verdict": "accepted", "x": ' + "[" * DEEP  # a truncated deep answer
VERDICT = '{"verdict": "rejected", "reason": "not a bug"}'
MB = 1024 * 1024
HOSTILE = [DEEP_ARRAY, DEEP_OBJECT, DEEP_VERDICT, UNCLOSED]
IDS = ["array", "object", "verdict", "unclosed"]


def huge_line() -> str:
    """One 50 MB line of nested openings: the decoder gives up at its recursion limit, at once."""
    return '{"a":' * (50 * MB // 5)


# --- answers: judge verdicts, reviews, replies, refuters ----------------------------------------------


@pytest.mark.parametrize("text", HOSTILE, ids=IDS)
def test_judge_verdict_too_deep_is_unparseable(text: str) -> None:
    assert parse_verdict(text) is None


@pytest.mark.parametrize("text", HOSTILE, ids=IDS)
def test_a_verdict_after_hostile_nesting_is_still_read(text: str) -> None:
    verdict = parse_verdict(text + "\n" + VERDICT + "\n")
    assert verdict is not None and verdict.verdict == "rejected" and verdict.reason == "not a bug"


def test_a_verdict_nested_deeper_than_the_limit_is_not_taken() -> None:
    # 500 levels: the decoder reaches it, but nobody should walk it (json.dumps, recursive helpers).
    wrapped = '{"a":' * 500 + '{"verdict": "accepted"}' + "}" * 500
    assert parse_verdict(wrapped) is None
    assert parse_verdict(wrapped + "\n" + VERDICT).verdict == "rejected"  # type: ignore[union-attr]


@pytest.mark.parametrize("text", HOSTILE, ids=IDS)
def test_review_reply_and_refutation_of_hostile_text(text: str) -> None:
    assert parse_review(text).verdict == "unparseable"
    assert parse_reply(text).contests == []
    assert parse_refutation(text).outcome == "unclear"


def test_50mb_verdict_line_then_a_verdict() -> None:
    verdict = parse_verdict(huge_line() + "\n" + VERDICT)
    assert verdict is not None and verdict.verdict == "rejected"


def test_failed_starts_cost_linear_work() -> None:
    # Blocks of 400 unclosed objects: each start decoded to the block's end before failing, O(n * depth).
    # It took 6 s for these 400 KB before the work bound (and minutes for an agent's 8 MB of output).
    text = ('{"a":' * 400 + "X") * 200 + "\n" + VERDICT
    started = time.monotonic()
    parse_verdict(text)
    assert time.monotonic() - started < 3.0


# --- transcripts and raw CLI output -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["result-json", "opencode-json", "stream-json"])
@pytest.mark.parametrize("text", HOSTILE, ids=IDS)
def test_transcript_with_a_hostile_line_keeps_the_good_ones(fmt: str, text: str) -> None:
    good = {
        "result-json": {"type": "result", "result": "NO NEW FINDINGS", "total_cost_usd": 0.25},
        "opencode-json": {"type": "text", "part": {"type": "text", "text": "NO NEW FINDINGS"}},
        "stream-json": {"type": "result", "result": "NO NEW FINDINGS", "total_cost_usd": 0.25},
    }[fmt]
    stdout = text + "\n" + json.dumps(good) + "\n"
    assert extract_report(stdout, "", fmt) == "NO NEW FINDINGS"
    if fmt != "opencode-json":
        assert report_cost(stdout) == 0.25


@pytest.mark.parametrize("fmt", ["result-json", "stream-json"])
def test_transcript_50mb_line(fmt: str) -> None:
    stdout = huge_line() + "\n" + json.dumps({"type": "result", "result": "NO NEW FINDINGS"}) + "\n"
    assert extract_report(stdout, "", fmt) == "NO NEW FINDINGS"


def test_files_record_with_a_hostile_line(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.create_run("r1")
    run_dir = tmp_path / "runs" / "r1"
    with open(run_dir / "events.ndjson", "a") as fh:
        fh.write(DEEP_ARRAY + "\n")
    (run_dir / "run.json").write_text(DEEP_OBJECT)
    assert store.read("r1") == []
    assert store.read_state("r1") is None
    assert store.runs() == ["r1"]


# --- tool calls ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", HOSTILE, ids=IDS)
def test_tool_arguments_too_deep_are_refused(text: str, tmp_path: Path) -> None:
    with pytest.raises(ToolRefusal, match="not valid JSON"):
        _parse_args(text)
    result = call_tool("read_file", text, role="reviewer", worktree=tmp_path)
    assert result.refused and not result.ok


def test_tool_arguments_of_50mb_are_refused_unread(tmp_path: Path) -> None:
    args = json.dumps({"path": "a.txt", "content": "x" * (50 * MB)})
    with pytest.raises(ToolRefusal):
        _parse_args(args)
    result = call_tool("write_file", args, role="judge", worktree=tmp_path)
    assert result.refused and not (tmp_path / "a.txt").exists()


# --- check output (the reviewed code's tools) ---------------------------------------------------------


@pytest.mark.parametrize("text", HOSTILE, ids=IDS)
def test_check_output_too_deep_is_no_diagnostic(text: str) -> None:
    assert diagnostics.parse_sarif(text) == []
    assert diagnostics.parse_ruff(text) == []
    assert diagnostics.parse_auto("ruff check .", text) == []
    assert diagnostics.parse_auto("semgrep --sarif", text) == []


def test_check_output_of_50mb() -> None:
    text = huge_line()
    assert diagnostics.parse_sarif(text) == []
    assert diagnostics.parse_auto("tool", text) == []


# --- the bounded reader itself ------------------------------------------------------------------------


def test_loads_bounds() -> None:
    assert jsonsafe.loads('{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}
    for bad in (DEEP_ARRAY, "[" * 101 + "]" * 101, "{", "x" * 10):
        with pytest.raises(jsonsafe.BadJSON):
            jsonsafe.loads(bad)
    assert jsonsafe.loads("[" * 100 + "]" * 100) is not None
    with pytest.raises(jsonsafe.BadJSON, match="over the"):
        jsonsafe.loads(" " * 11, max_bytes=10)
    assert isinstance(jsonsafe.BadJSON("x"), ValueError)  # every existing ``except ValueError`` holds


def test_depth_is_iterative() -> None:
    value: list[object] = []
    for _ in range(50_000):  # built by hand: past any recursion limit
        value = [value]
    assert jsonsafe.depth(value) == jsonsafe.MAX_DEPTH + 1  # stops counting past the limit
    assert jsonsafe.depth(value, limit=60_000) == 50_001
    assert jsonsafe.depth(3) == 0 and jsonsafe.depth([]) == 1 and jsonsafe.depth({"a": [1]}) == 2


# --- an http model's answers (a real loopback chat server) ----------------------------------------------


def _http_run(tmp_path: Path, *replies: object) -> object:
    from orchestrator.spec import AgentSpec
    from tests.fakes.chat_server import ChatServer
    from workers.agents.http import run_http_agent

    with ChatServer() as server:
        server.script("acme/m1", *replies)  # type: ignore[arg-type]
        spec = AgentSpec.model_validate(
            {"name": "h", "kind": "http", "base_url": server.url, "model": "acme/m1", "api_key_env": "K"}
        )
        return run_http_agent(
            spec,
            role="reviewer",
            prompt="Review the change.",
            worktree=tmp_path,
            out_dir=tmp_path / "out",
            name="round-1.h",
            timeout=30,
            env={"K": "sk-test-key"},
            sleep=lambda _s: None,
        )


@pytest.mark.parametrize("text", [DEEP_ARRAY, DEEP_VERDICT], ids=["array", "object"])
def test_http_response_too_deep_is_malformed_and_retried(text: str, tmp_path: Path) -> None:
    from tests.fakes.chat_server import Reply, answer

    deep = Reply(body=text.encode(), headers={"Content-Type": "application/json"})
    result = _http_run(tmp_path, deep, answer("NO NEW FINDINGS"))
    assert result.proc.exit_code == 0 and result.report == "NO NEW FINDINGS"  # type: ignore[attr-defined]
    always = _http_run(tmp_path, deep, deep, deep, deep)
    assert always.proc.exit_code == 1 and "malformed JSON" in (always.proc.error or "")  # type: ignore[attr-defined]


def test_http_tool_call_arguments_too_deep_are_refused(tmp_path: Path) -> None:
    from tests.fakes.chat_server import answer, tool_call

    result = _http_run(tmp_path, tool_call("read_file", DEEP_ARRAY, call_id="c1"), answer("NO NEW FINDINGS"))
    assert result.proc.exit_code == 0 and result.report == "NO NEW FINDINGS"  # type: ignore[attr-defined]
    transcript = (tmp_path / "out" / "round-1.h.stderr.txt").read_text()
    assert "not valid JSON" in transcript


# --- what the reviewed code's own runs write, and its files -------------------------------------------


@pytest.mark.parametrize("text", HOSTILE, ids=IDS)
def test_test_reports_too_deep_are_unread(text: str) -> None:
    from workers.verification.testreport import parse_go_json, parse_jest_json

    assert parse_go_json(text + "\n").results == []
    report = parse_jest_json(text)
    assert not report.read and "does not parse" in report.problems[0]


@pytest.mark.parametrize("text", HOSTILE, ids=IDS)
def test_coverage_report_too_deep_is_unread(text: str) -> None:
    from workers.verification.coverage_check import read_coverage

    (only,) = read_coverage(text, {"src/app.py": {2}})
    assert only.status == "not measured" and "does not parse" in (only.note or "")


def test_package_json_and_pyproject_too_deep_are_unreadable() -> None:
    from workers.verification.weakening import _test_tables

    for text in HOSTILE:
        assert _test_tables(text, "package.json") == {"unreadable": text}
    toml = "a = " + "[" * DEEP + "]" * DEEP
    assert _test_tables(toml, "pyproject.toml") == {"unreadable": toml}
    shallow_but_deep = '{"jest": ' + "[" * 500 + "]" * 500 + "}"  # decodes, but past MAX_DEPTH
    assert _test_tables(shallow_but_deep, "package.json") == {"unreadable": shallow_but_deep}


def test_a_repositorys_jury_toml_too_deep_is_a_config_error() -> None:
    from orchestrator.config import _parse_toml
    from orchestrator.errors import ConfigError

    with pytest.raises(ConfigError, match="jury.toml.*nested too deeply"):
        _parse_toml("jury.toml", "[jury]\nreviewers = " + "[" * DEEP + "]" * DEEP)
