"""The http agent's key against each door it could come in by, one door at a time.

``test_tool_escapes.py`` has a model echo its key everywhere at once; the runner's gates overlap, so
there a gate could go missing and the others would hide it. Here each test puts the key where only one
gate can stop it — a key spelled with JSON escapes in a response body, a key in a tool's output placed
across the transcript's cut, a key in an error body placed across the error snippet's cut — and checks
the record: the run's files, its events, its report and error, what a tool was given, what went back to
the model. A key cut in two halves by a cap would slip past a later gate, so the tests look for any long
part of it, not only the whole.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.spec import AgentSpec
from tests.fakes.chat_server import ChatServer, Reply, answer, status, tool_call
from workers.agents.http import TRANSCRIPT_TEXT_CAP, run_http_agent

KEY_ENV = "DOOR_MODEL_KEY"
KEY = "sk-door-" + secrets.token_hex(16)
PART = 20  # a leak of this many characters of the key counts (a cap may cut it anywhere)
SNIPPET = 300  # how much of an error body the runner quotes in its error text


def escaped(text: str) -> str:
    """``text`` with every character written as a JSON ``\\uXXXX`` escape: the same string once parsed,
    but never the same bytes."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


def parts(text: str) -> list[str]:
    return [text[i : i + PART] for i in range(len(text) - PART + 1)]


def leaks(blob: str) -> list[str]:
    """The parts of the key found in ``blob``."""
    return [p for p in parts(KEY) if p in blob]


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as srv:
        yield srv


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / "app.py").write_text("def add(a, b):\n    return a - b\n")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "first"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=wt,
            check=True,
            env=env,
            capture_output=True,
        )
    return wt


def spec_for(server: ChatServer, **over: Any) -> AgentSpec:
    fields: dict[str, Any] = {
        "name": "door",
        "kind": "http",
        "base_url": server.url,
        "model": "acme/door",
        "api_key_env": KEY_ENV,
        "max_rounds": 6,
    }
    return AgentSpec.model_validate(fields | over)


def run(server: ChatServer, wt: Path, out: Path, role: str = "judge", **over: Any):
    events: list[tuple[str, dict[str, Any]]] = []
    result = run_http_agent(
        spec_for(server, **over),
        role=role,  # type: ignore[arg-type]
        prompt="Judge the finding.",
        worktree=wt,
        out_dir=out,
        name="triage.f1.1",
        timeout=30,
        env={KEY_ENV: KEY, "PATH": os.environ["PATH"]},
        on_event=lambda name, fields: events.append((name, fields)),
        sleep=lambda _s: None,
    )
    return result, events


def record_of(out: Path, result: Any, events: list[tuple[str, dict[str, Any]]]) -> str:
    """Everything the run leaves: its files, its events, its report and error."""
    files = "".join(p.read_text(errors="replace") for p in sorted(out.rglob("*")) if p.is_file())
    return "\n".join([files, json.dumps(events), result.report, result.stderr, result.proc.error or ""])


def raw_answer(body_text: str) -> Reply:
    """A 200 whose body is exactly ``body_text`` (JSON the helper would have escaped differently)."""
    return Reply(body=body_text.encode(), headers={"Content-Type": "application/json"})


def test_a_key_spelled_with_json_escapes_reaches_no_tool_and_no_record(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    # In the body itself (the answer's text), and one level down, inside a tool call's arguments (a
    # JSON string holding JSON): neither spelling is the key's bytes until it is parsed.
    inner = '{"path": "leak.txt", "content": "' + escaped(KEY) + '"}'
    final = (
        '{"choices": [{"message": {"role": "assistant", "content": "FINDING: the key '
        + escaped(KEY)
        + ' leaks\\nWHERE: app.py:2"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}'
    )
    assert KEY not in inner and KEY not in final and json.loads(inner)["content"] == KEY
    server.script("acme/door", tool_call("write_file", inner), raw_answer(final))
    result, events = run(server, repo, tmp_path / "out")
    assert result.proc.exit_code == 0, result.proc.error
    # the tool was given the redacted text, so the tree (and any patch made of it) never holds the key
    assert (repo / "leak.txt").read_text() == "[redacted]"
    assert "the key [redacted] leaks" in result.report
    assert leaks(record_of(tmp_path / "out", result, events)) == []


def test_a_key_in_a_tool_output_is_redacted_before_the_transcript_cuts_it(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    # read_file prints "1\t" before the line: the key starts PART + 8 characters before the cut, so a
    # cut-then-redact would keep its first PART + 8 characters.
    start = TRANSCRIPT_TEXT_CAP - PART - 8
    (repo / "notes.txt").write_text("x" * (start - 2) + KEY + " and more\n")
    server.script("acme/door", tool_call("read_file", {"path": "notes.txt"}), answer("NO NEW FINDINGS"))
    result, events = run(server, repo, tmp_path / "out", role="reviewer")
    assert result.proc.exit_code == 0, result.proc.error
    assert leaks(record_of(tmp_path / "out", result, events)) == []
    # what went back to the model is redacted too: the tool's output is a door of its own
    (returned,) = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert "[redacted] and more" in returned["content"] and leaks(returned["content"]) == []


def test_a_key_in_an_error_body_is_redacted_before_the_error_text_cuts_it(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    prefix = '{"error": "'
    body = prefix + "y" * (SNIPPET - PART - 8 - len(prefix)) + KEY + ' was refused"}'
    server.script("acme/door", *[status(500, body=body)] * 4)
    server.script("acme/door-2", status(400, body=body))
    result, events = run(server, repo, tmp_path / "out", fallback=["acme/door-2"])
    assert result.proc.exit_code == 1 and "every model failed" in (result.proc.error or "")
    assert "HTTP 400" in (result.proc.error or "") and "[redacted]" in (result.proc.error or "")
    assert leaks(record_of(tmp_path / "out", result, events)) == []
    assert len(server.requests) == 5


def test_the_fixture_key_is_long_enough_to_be_found_in_parts() -> None:
    """The leak check looks for parts of PART characters: the key must hold many of them."""
    assert len(KEY) >= 2 * PART and leaks("..." + KEY[5 : 5 + PART] + "...") == [KEY[5 : 5 + PART]]
