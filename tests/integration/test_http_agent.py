"""The http agent's tool loop against a real local chat server, and its tools on a real worktree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.parse import parse_review
from orchestrator.spec import AgentSpec
from tests.fakes.chat_server import ChatServer, answer, malformed, slow, status, tool_call
from workers.agents.chat_answer import call_cost, project_cost
from workers.agents.http import RETRY_AFTER_CAP, retry_after_seconds, run_http_agent
from workers.agents.run import RateLimited
from workers.agents.seat import CALL_DROPPED
from workers.agents.tools import (
    TOOL_SCHEMAS,
    ToolRefusal,
    call_tool,
    resolve_in,
    schemas_for,
    tools_for,
)

KEY_ENV = "LLMVAR"  # deliberately not secret-looking: the runner must still keep it from tools
SECRET = "sk-test-SECRET-4242"
APP = "def add(a, b):\n    return a - b\n"


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as srv:
        yield srv


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit: ``src/app.py`` (a bug) and a README."""
    wt = tmp_path / "wt"
    (wt / "src").mkdir(parents=True)
    (wt / "src" / "app.py").write_text(APP, encoding="utf-8")
    (wt / "README.md").write_text("hello\n", encoding="utf-8")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first"],
    ):
        subprocess.run(["git", *args], cwd=wt, check=True, env=env, capture_output=True)
    return wt


class Events:
    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, name: str, fields: dict[str, Any]) -> None:
        self.items.append((name, fields))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [f for n, f in self.items if n == name]


def spec_for(server: ChatServer, **over: Any) -> AgentSpec:
    fields: dict[str, Any] = {
        "name": "h",
        "kind": "http",
        "base_url": server.url,
        "model": "acme/m1",
        "api_key_env": KEY_ENV,
    }
    fields.update(over)
    return AgentSpec.model_validate(fields)


def run(
    spec: AgentSpec,
    wt: Path,
    out: Path,
    *,
    role: str = "reviewer",
    events: Events | None = None,
    sleeps: list[float] | None = None,
    timeout: float = 20.0,
    **kw: Any,
):
    kw.setdefault("env", {KEY_ENV: SECRET, "PATH": os.environ.get("PATH", "")})
    return run_http_agent(
        spec,
        role=role,  # type: ignore[arg-type]
        prompt="Review the change.",
        worktree=wt,
        out_dir=out,
        name="round-1.h",
        timeout=timeout,
        on_event=events,
        sleep=(sleeps.append if sleeps is not None else lambda _s: None),
        **kw,
    )


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


# --- the loop -------------------------------------------------------------------------------------


def test_reviewer_reads_a_file_then_reports_a_finding(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script(
        "acme/m1",
        tool_call("read_file", {"path": "src/app.py"}, call_id="c1"),
        answer("FINDING: add subtracts\nWHERE: src/app.py:2\nIt returns a - b."),
    )
    events = Events()
    result = run(spec_for(server), repo, tmp_path / "out", events=events)
    assert result.proc.exit_code == 0 and result.proc.error is None
    parsed = parse_review(result.report)
    assert [(f.claim, f.loc) for f in parsed.findings] == [("add subtracts", "src/app.py:2")]
    assert result.model == "acme/m1"
    first, second = server.requests
    assert first.path == "/chat/completions"
    assert [m["role"] for m in first.body["messages"]] == ["system", "user"]
    assert first.body["messages"][1]["content"] == "Review the change."
    offered = {t["function"]["name"] for t in first.body["tools"]}
    assert offered == tools_for("reviewer") and "write_file" not in offered
    (tool_msg,) = tool_messages(second.body)
    assert tool_msg["tool_call_id"] == "c1"
    assert "2\t    return a - b" in tool_msg["content"]
    assert second.body["messages"][2]["tool_calls"][0]["id"] == "c1"  # the assistant turn is kept
    assert events.named("tool.called") == [{"tool": "read_file", "ok": True}]
    assert (tmp_path / "out" / "round-1.h.stdout.txt").read_text() == result.report
    log_lines = [json.loads(line) for line in result.stderr.splitlines()]
    assert any(rec["t"] == "tool" and rec["tool"] == "read_file" for rec in log_lines)


def test_v1_base_url(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", answer("NO NEW FINDINGS"))
    result = run(spec_for(server, base_url=server.url + "/v1/"), repo, tmp_path / "out")
    assert result.report == "NO NEW FINDINGS"
    assert server.requests[0].path == "/v1/chat/completions"


def test_reviewer_write_is_refused_where_the_tool_is_called(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    server.script(
        "acme/m1",
        tool_call("write_file", {"path": "src/app.py", "content": "pwned\n"}),
        answer("NO NEW FINDINGS"),
    )
    events = Events()
    result = run(spec_for(server), repo, tmp_path / "out", events=events)
    assert result.proc.exit_code == 0
    assert (repo / "src" / "app.py").read_text() == APP
    (refused,) = events.named("tool.refused")
    assert refused["tool"] == "write_file" and refused["role"] == "reviewer"
    assert "not allowed for the reviewer role" in refused["reason"]
    assert events.named("tool.called") == []
    (tool_msg,) = tool_messages(server.requests[1].body)
    assert tool_msg["content"].startswith("REFUSED:")


@pytest.mark.parametrize("role", ["reply", "refuter"])
def test_reply_and_refuter_cannot_edit(server: ChatServer, repo: Path, tmp_path: Path, role: str) -> None:
    server.script(
        "acme/m1",
        tool_call("edit_file", {"path": "src/app.py", "old": "a - b", "new": "a + b"}),
        answer("NO CONTEST"),
    )
    events = Events()
    run(spec_for(server), repo, tmp_path / "out", role=role, events=events)
    assert (repo / "src" / "app.py").read_text() == APP
    assert [e["role"] for e in events.named("tool.refused")] == [role]


def test_judge_edits_a_file(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    verdict = '{"verdict": "accepted", "reproduced": true, "test": "t", "test_command": "pytest"}'
    server.script(
        "acme/m1",
        tool_call("edit_file", {"path": "src/app.py", "old": "a - b", "new": "a + b"}, call_id="e1"),
        tool_call("write_file", {"path": "tests/test_app.py", "content": "# new test\n"}, call_id="w1"),
        answer(verdict),
    )
    events = Events()
    result = run(spec_for(server), repo, tmp_path / "out", role="judge", events=events)
    assert result.proc.exit_code == 0 and result.report == verdict
    assert (repo / "src" / "app.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (repo / "tests" / "test_app.py").read_text() == "# new test\n"
    assert events.named("tool.called") == [
        {"tool": "edit_file", "ok": True},
        {"tool": "write_file", "ok": True},
    ]
    offered = {t["function"]["name"] for t in server.requests[0].body["tools"]}
    assert {"write_file", "edit_file"} <= offered


def test_path_escape_is_refused_in_the_loop(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", tool_call("read_file", {"path": "../../etc/passwd"}), answer("NO NEW FINDINGS"))
    events = Events()
    run(spec_for(server), repo, tmp_path / "out", events=events)
    (refused,) = events.named("tool.refused")
    assert "outside the worktree" in refused["reason"]
    assert "root:" not in json.dumps(server.requests[1].body)


def test_unknown_tool_and_bad_arguments_are_refused(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script(
        "acme/m1",
        tool_call("rm_rf", {"path": "."}, call_id="a"),
        tool_call("read_file", "{not json", call_id="b"),
        tool_call("read_file", {"start_line": 1}, call_id="c"),
        answer("NO NEW FINDINGS"),
    )
    events = Events()
    result = run(spec_for(server), repo, tmp_path / "out", events=events)
    assert result.proc.exit_code == 0
    reasons = [e["reason"] for e in events.named("tool.refused")]
    assert len(reasons) == 3
    assert "unknown tool 'rm_rf'" in reasons[0]
    assert "not valid JSON" in reasons[1]
    assert "bad arguments for read_file: path" in reasons[2]


def test_max_rounds_ends_with_what_was_said(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script(
        "acme/m1",
        tool_call("list_dir", {}, content="Looking around."),
        tool_call("list_dir", {"path": "src"}, content="Still looking."),
    )
    result = run(spec_for(server, max_rounds=2), repo, tmp_path / "out")
    assert result.proc.exit_code == 1
    assert "max_rounds (2)" in (result.proc.error or "")
    assert result.report == "Looking around.\n\nStill looking."
    assert len(server.requests) == 2


# --- run_command ----------------------------------------------------------------------------------


def test_run_command_runs_declared_checks_only(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    check = f"{sys.executable} -c \"print('checked ok')\""
    server.script(
        "acme/m1",
        tool_call("run_command", {"command": "python3 -c 'print(1)'"}, call_id="x"),
        tool_call("run_command", {"command": check}, call_id="y"),
        answer("NO NEW FINDINGS"),
    )
    events = Events()
    run(spec_for(server), repo, tmp_path / "out", events=events, checks={"test": check})
    (refused,) = events.named("tool.refused")
    assert refused["tool"] == "run_command" and "only a declared check" in refused["reason"]
    assert events.named("tool.called") == [{"tool": "run_command", "ok": True}]
    last = tool_messages(server.requests[2].body)
    assert last[0]["content"].startswith("REFUSED:")
    assert "exit code 0" in last[1]["content"] and "checked ok" in last[1]["content"]


def test_the_api_key_never_reaches_tools_logs_or_events(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    dump_env = f'{sys.executable} -c "import os; print(sorted(os.environ.items()))"'
    server.script(
        "acme/m1",
        tool_call("run_command", {"command": dump_env}),
        answer("NO NEW FINDINGS"),
    )
    events = Events()
    result = run(spec_for(server), repo, tmp_path / "out", events=events, checks={"env": dump_env})
    assert result.proc.exit_code == 0
    assert all(r.headers.get("Authorization") == f"Bearer {SECRET}" for r in server.requests)
    tool_output = tool_messages(server.requests[1].body)[0]["content"]
    assert "PATH" in tool_output and SECRET not in tool_output and KEY_ENV not in tool_output
    for path in (tmp_path / "out").iterdir():
        assert SECRET not in path.read_text(), path
    assert SECRET not in result.stderr and SECRET not in json.dumps(events.items)


def test_missing_api_key_makes_no_request(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    result = run(spec_for(server), repo, tmp_path / "out", env={"PATH": "/usr/bin"})
    assert result.proc.exit_code == 1
    assert result.proc.error == f"missing API key: environment variable {KEY_ENV} is not set"
    assert server.requests == []
    assert result.cost_usd == 0.0


def test_a_key_is_not_sent_in_clear_to_another_host(repo: Path, tmp_path: Path) -> None:
    """A spec that reached the worker without the config's check (a fleet's message, hand-built) still
    sends no key over plain http:// to a host that is not this machine; nothing is asked of the network."""
    spec = AgentSpec(
        name="h", kind="http", base_url="http://llm.invalid/v1", model="acme/m1", api_key_env=KEY_ENV
    )
    result = run(spec, repo, tmp_path / "out")
    assert result.proc.exit_code == 1 and result.cost_usd == 0.0
    assert result.proc.error is not None
    assert result.proc.error.startswith(f"base_url is plain http:// to llm.invalid, so the key in ${KEY_ENV}")


def test_no_api_key_env_sends_no_authorization(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", answer("NO NEW FINDINGS"))
    run(spec_for(server, api_key_env=None), repo, tmp_path / "out")
    assert "Authorization" not in server.requests[0].headers


# --- retries, fallback, timeouts --------------------------------------------------------------


def test_429_honours_retry_after(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", status(429, retry_after="7"), answer("NO NEW FINDINGS"))
    events, sleeps = Events(), []
    result = run(spec_for(server), repo, tmp_path / "out", events=events, sleeps=sleeps)
    assert result.proc.exit_code == 0 and result.report == "NO NEW FINDINGS"
    assert sleeps == [7.0]
    assert events.named("http.retry") == [{"status": 429, "attempt": 1, "wait": 7.0, "model": "acme/m1"}]
    assert len(server.requests) == 2


def test_a_long_429_in_a_worker_sends_the_run_back_unslept(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    """In a worker's task (``defer_after``) a Retry-After longer than it may sleep ends the run with
    ``RateLimited``: nothing slept, the reserved call dropped (never settled as spent), said in the
    transcript. A short one is still slept; outside a worker (no ``defer_after``) a long one is too."""
    server.script("acme/m1", status(429, retry_after="30"))
    events, sleeps, reserved = Events(), [], []
    with pytest.raises(RateLimited) as back:
        run(
            spec_for(server, price={"input": 1.0, "output": 1.0}),
            repo,
            tmp_path / "out",
            events=events,
            sleeps=sleeps,
            defer_after=5.0,
            reserve=lambda amount: reserved.append(amount) or True,
        )
    assert back.value.seconds == 30.0 and back.value.note == "acme/m1 answered 429 with Retry-After 30s"
    assert sleeps == [] and len(server.requests) == 1 and len(reserved) == 1
    assert events.named(CALL_DROPPED) == [{"model": "acme/m1", "status": 429}]
    assert events.named("http.call") == []
    lines = (tmp_path / "out" / "round-1.h.stderr.txt").read_text().splitlines()
    assert json.loads(lines[-1])["t"] == "deferred"

    server.script("acme/m1", status(429, retry_after="3"), answer("NO NEW FINDINGS"))
    result = run(spec_for(server), repo, tmp_path / "out2", sleeps=sleeps, defer_after=5.0)
    assert result.report == "NO NEW FINDINGS" and sleeps == [3.0]


def test_a_long_429_tries_the_fallback_model_at_once(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", status(429, retry_after="120"))
    server.script("other/m2", answer("NO NEW FINDINGS"))
    sleeps: list[float] = []
    spec = spec_for(server, fallback=["other/m2"])
    result = run(spec, repo, tmp_path / "out", sleeps=sleeps, defer_after=5.0)
    assert result.report == "NO NEW FINDINGS" and result.model == "other/m2"
    assert sleeps == [] and len(server.requests_for("acme/m1")) == 1


def test_retry_after_is_capped(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", status(503, retry_after="3600"), answer("NO NEW FINDINGS"))
    sleeps: list[float] = []
    run(spec_for(server), repo, tmp_path / "out", sleeps=sleeps, timeout=60)
    assert sleeps == [RETRY_AFTER_CAP]


def test_a_wait_past_the_wall_clock_ends_the_run(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", status(503, retry_after="25"), answer("NO NEW FINDINGS"))
    sleeps: list[float] = []
    result = run(spec_for(server), repo, tmp_path / "out", sleeps=sleeps, timeout=10)
    assert sleeps == [] and result.proc.timed_out and len(server.requests) == 1


def test_persistent_500_falls_back_to_the_next_model(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", *[status(500)] * 4)
    server.script("other/m2", answer("FINDING: x is wrong\nWHERE: src/app.py:1"))
    events, sleeps = Events(), []
    spec = spec_for(server, fallback=["other/m2"])
    result = run(spec, repo, tmp_path / "out", events=events, sleeps=sleeps)
    assert result.proc.exit_code == 0
    assert result.model == "other/m2"
    assert len(server.requests_for("acme/m1")) == 4 and len(server.requests_for("other/m2")) == 1
    assert sleeps == [1.0, 2.0, 4.0]  # exponential backoff between the four attempts
    assert [e["attempt"] for e in events.named("http.retry")] == [1, 2, 3]
    assert events.named("http.fallback") == [{"from_model": "acme/m1", "to_model": "other/m2"}]
    assert [e["model"] for e in events.named("http.call")] == ["other/m2"]


def test_every_model_failing_is_an_error(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", *[status(502)] * 4)
    server.script("other/m2", status(404, body='{"error": "no such model"}'))
    result = run(spec_for(server, fallback=["other/m2"]), repo, tmp_path / "out")
    assert result.proc.exit_code == 1
    assert "every model failed" in (result.proc.error or "") and "HTTP 404" in (result.proc.error or "")
    assert len(server.requests_for("other/m2")) == 1  # a 404 is not retried
    assert result.model is None and result.cost_usd == 0.0


def test_401_stops_at_once(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", status(401))
    server.script("other/m2", answer("NO NEW FINDINGS"))
    result = run(spec_for(server, fallback=["other/m2"]), repo, tmp_path / "out")
    assert result.proc.exit_code == 1 and "authentication refused" in (result.proc.error or "")
    assert len(server.requests) == 1


def test_malformed_json_is_retried(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", malformed(), answer("NO NEW FINDINGS"))
    events = Events()
    result = run(spec_for(server), repo, tmp_path / "out", events=events)
    assert result.proc.exit_code == 0 and result.report == "NO NEW FINDINGS"
    assert [e["status"] for e in events.named("http.retry")] == [200]


def test_always_malformed_fails(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", malformed(), malformed(), status(200, body='{"choices": []}'), malformed())
    result = run(spec_for(server), repo, tmp_path / "out")
    assert result.proc.exit_code == 1
    assert "malformed JSON" in (result.proc.error or "")


def test_request_timeout_is_retried(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", slow(2.0), answer("NO NEW FINDINGS"))
    events = Events()
    result = run(spec_for(server, timeout=0.3), repo, tmp_path / "out", events=events)
    assert result.proc.exit_code == 0 and result.report == "NO NEW FINDINGS"
    (retry,) = events.named("http.retry")
    assert retry["status"] is None and retry["attempt"] == 1


def test_wall_clock_timeout(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", slow(60.0), slow(60.0))
    result = run(spec_for(server), repo, tmp_path / "out", timeout=0.5)
    assert result.proc.exit_code == 1
    assert result.proc.timed_out
    assert result.proc.seconds < 30  # cut at its wall clock, not left to wait for a 60 s reply


# --- money ----------------------------------------------------------------------------------------


def test_budget_refusal_means_no_request(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", answer("NO NEW FINDINGS"))
    asked: list[float] = []

    def reserve(amount: float) -> bool:
        asked.append(amount)
        return False

    spec = spec_for(server, price={"input": 3.0, "output": 15.0})
    result = run(spec, repo, tmp_path / "out", reserve=reserve)
    assert server.requests == []
    assert result.proc.exit_code == 1 and (result.proc.error or "").startswith("budget:")
    (projection,) = asked
    assert projection > 4096 * 15.0 / 1e6  # a full output's worth at least


def test_every_call_is_reserved_first(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", tool_call("list_dir", {}), answer("NO NEW FINDINGS"))
    asked: list[float] = []
    spec = spec_for(server, price={"input": 1.0, "output": 2.0})
    run(spec, repo, tmp_path / "out", reserve=lambda a: asked.append(a) or True)
    assert len(asked) == 2 and asked[1] > asked[0]  # the second prompt is longer
    first_messages = server.requests[0].body["messages"]
    assert asked[0] == pytest.approx(project_cost(first_messages, schemas_for("reviewer"), spec.price))


def test_cost_reported_by_the_server(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script(
        "acme/m1",
        tool_call("list_dir", {}, usage={"prompt_tokens": 100, "completion_tokens": 20, "cost": 0.0123}),
        answer("NO NEW FINDINGS", usage={"prompt_tokens": 10, "completion_tokens": 2}, cost=0.001),
    )
    events = Events()
    result = run(
        spec_for(server, price={"input": 1000.0, "output": 1000.0}), repo, tmp_path / "out", events=events
    )
    assert result.cost_usd == pytest.approx(0.0133)
    assert [e["cost_usd"] for e in events.named("http.call")] == [0.0123, 0.001]
    assert result.usage == {"calls": 2, "prompt_tokens": 110, "completion_tokens": 22}


def test_cost_from_tokens_and_price(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script(
        "acme/m1", answer("NO NEW FINDINGS", usage={"prompt_tokens": 1000, "completion_tokens": 500})
    )
    events = Events()
    result = run(
        spec_for(server, price={"input": 2.0, "output": 10.0}), repo, tmp_path / "out", events=events
    )
    assert result.cost_usd == pytest.approx(0.007)
    (call,) = events.named("http.call")
    assert call == {
        "model": "acme/m1",
        "prompt_tokens": 1000,
        "completion_tokens": 500,
        "cost_usd": call["cost_usd"],
    }
    assert call["cost_usd"] == pytest.approx(0.007)


def test_unknown_cost_is_none_not_zero(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", answer("NO NEW FINDINGS"))
    events = Events()
    result = run(spec_for(server), repo, tmp_path / "out", events=events)
    assert result.cost_usd is None
    assert events.named("http.call")[0]["cost_usd"] is None


def test_one_unknown_call_makes_the_total_unknown(server: ChatServer, repo: Path, tmp_path: Path) -> None:
    server.script("acme/m1", tool_call("list_dir", {}, cost=0.5), answer("NO NEW FINDINGS"))
    result = run(spec_for(server), repo, tmp_path / "out")
    assert result.cost_usd is None


@pytest.mark.parametrize(
    ("data", "price", "expected"),
    [
        (
            {"usage": {"cost": 0.2, "prompt_tokens": 1, "completion_tokens": 1}},
            {"input": 9, "output": 9},
            0.2,
        ),
        ({"cost": 0.3, "usage": {}}, None, 0.3),
        ({"usage": {"prompt_tokens": 1_000_000, "completion_tokens": 0}}, {"input": 1.5, "output": 9}, 1.5),
        ({"usage": {"prompt_tokens": 10, "completion_tokens": 10}}, None, None),
        ({}, {"input": 1, "output": 1}, None),
        ({"usage": {"cost": True}}, None, None),
    ],
)
def test_call_cost(data: dict[str, Any], price: dict[str, float] | None, expected: float | None) -> None:
    cost = call_cost(data, price)
    assert cost == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("7", 7.0),
        ("0.5", 0.5),
        ("120", RETRY_AFTER_CAP),
        ("-3", 0.0),
        ("soon", None),
        (None, None),
        ("", None),
    ],
)
def test_retry_after_seconds(header: str | None, expected: float | None) -> None:
    assert retry_after_seconds(header) == expected


def test_retry_after_http_date() -> None:
    from datetime import UTC, datetime

    now = datetime(2024, 1, 1, 0, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("Mon, 01 Jan 2024 00:00:05 GMT", now=now) == 5.0


# --- the tools, directly --------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside.txt"
    secret.write_text("TOPSECRET outside the worktree\n", encoding="utf-8")
    return secret


@pytest.mark.parametrize("rel", ["../../etc/passwd", "/etc/passwd", "src/../../outside.txt", ".git/config"])
def test_resolve_in_refuses_escapes(repo: Path, rel: str) -> None:
    with pytest.raises(ToolRefusal) as info:
        resolve_in(repo, rel)
    assert info.value.reason


def test_resolve_in_refuses_a_symlink_pointing_out(repo: Path, outside: Path) -> None:
    (repo / "link.txt").symlink_to(outside)
    (repo / "linkdir").symlink_to(outside.parent)
    for rel in ("link.txt", "linkdir/outside.txt"):
        with pytest.raises(ToolRefusal, match="outside the worktree"):
            resolve_in(repo, rel)
    (repo / "inner.txt").symlink_to(repo / "README.md")
    assert resolve_in(repo, "inner.txt") == (repo / "README.md").resolve()
    assert resolve_in(repo, "src/../README.md") == (repo / "README.md").resolve()
    assert resolve_in(repo, ".") == repo.resolve()


def test_tools_refuse_the_symlink_out(repo: Path, outside: Path) -> None:
    (repo / "link.txt").symlink_to(outside)
    read = call_tool("read_file", {"path": "link.txt"}, role="reviewer", worktree=repo)
    assert not read.ok and read.refused and "TOPSECRET" not in read.text
    judge_write = call_tool("write_file", {"path": "link.txt", "content": "x"}, role="judge", worktree=repo)
    assert judge_write.refused and outside.read_text() == "TOPSECRET outside the worktree\n"
    found = call_tool("search_text", {"pattern": "TOPSECRET"}, role="reviewer", worktree=repo)
    assert found.ok and found.text == "(no matches)"


def test_read_file_ranges_and_errors(repo: Path) -> None:
    ok = call_tool(
        "read_file", {"path": "src/app.py", "start_line": 2, "end_line": 2}, role="reviewer", worktree=repo
    )
    assert ok.ok and ok.text == "2\t    return a - b"
    missing = call_tool("read_file", {"path": "nope.py"}, role="reviewer", worktree=repo)
    assert not missing.ok and missing.refused is None and "not a file" in missing.text
    (repo / "bin.dat").write_bytes(b"\x00\x01\x02")
    binary = call_tool("read_file", {"path": "bin.dat"}, role="reviewer", worktree=repo)
    assert not binary.ok and "binary" in binary.text


def test_read_file_output_is_capped(repo: Path) -> None:
    (repo / "big.txt").write_text("x" * 100 + "\n" * 1 + ("y" * 99 + "\n") * 1000, encoding="utf-8")
    result = call_tool("read_file", {"path": "big.txt"}, role="reviewer", worktree=repo)
    assert result.ok and len(result.text) < 20_200 and "characters cut" in result.text


def test_list_dir_and_search_text(repo: Path) -> None:
    listing = call_tool("list_dir", {}, role="reviewer", worktree=repo)
    assert listing.text.splitlines() == ["README.md", "src/"]
    (repo / "bin.dat").write_bytes(b"\x00return a - b")
    found = call_tool("search_text", {"pattern": r"return a [-+] b"}, role="reviewer", worktree=repo)
    assert found.text == "src/app.py:2:     return a - b"
    bad = call_tool("search_text", {"pattern": "("}, role="reviewer", worktree=repo)
    assert bad.refused and "bad regular expression" in bad.refused


def test_edit_file_needs_exactly_one_occurrence(repo: Path) -> None:
    (repo / "twice.txt").write_text("a\na\n", encoding="utf-8")
    twice = call_tool("edit_file", {"path": "twice.txt", "old": "a", "new": "b"}, role="judge", worktree=repo)
    assert not twice.ok and "occurs 2 times" in twice.text
    none = call_tool(
        "edit_file", {"path": "twice.txt", "old": "zzz", "new": "b"}, role="judge", worktree=repo
    )
    assert not none.ok and "not found" in none.text
    assert (repo / "twice.txt").read_text() == "a\na\n"


def test_git_tools_are_read_only(repo: Path) -> None:
    (repo / "README.md").write_text("changed\n", encoding="utf-8")
    diff = call_tool("git_diff", {}, role="reviewer", worktree=repo)
    assert diff.ok and "+changed" in diff.text
    log_ = call_tool("git_log", {"max_count": 1}, role="reviewer", worktree=repo)
    assert log_.ok and "first" in log_.text
    show = call_tool("git_show", {"rev": "HEAD:src/app.py"}, role="reviewer", worktree=repo)
    assert show.ok and "return a - b" in show.text
    for name, args in (
        ("git_show", {"rev": "--output=/tmp/x"}),
        ("git_diff", {"rev_range": "-o/tmp/x"}),
        ("git_log", {"rev_range": "HEAD --output=x"}),
    ):
        result = call_tool(name, args, role="reviewer", worktree=repo)
        assert result.refused, (name, args)
    bad_rev = call_tool("git_show", {"rev": "no-such-rev"}, role="reviewer", worktree=repo)
    assert not bad_rev.ok and bad_rev.refused is None


@pytest.mark.parametrize(
    "command",
    [
        "git status --short",
        "git log --oneline -n 1",
        "git diff HEAD",
        "git grep -n return",
        "git ls-files",
        "rm -rf .",
        "pytest -q",
    ],
)
def test_run_command_runs_no_free_command(repo: Path, command: str) -> None:
    """Not even read-only git: the git tools read git, run_command only runs declared checks."""
    result = call_tool("run_command", {"command": command}, role="reviewer", worktree=repo)
    assert result.refused and "not a declared check" in result.refused, result.text
    assert (repo / "src" / "app.py").read_text() == APP


def test_run_command_by_name_in_the_sandbox(repo: Path) -> None:
    check = f'{sys.executable} -c "import os; print(os.getpid(), sorted(os.environ))"'
    result = call_tool("run_command", {"check": "env"}, role="reviewer", worktree=repo, checks={"env": check})
    assert result.ok and "exit code 0" in result.text, result.text
    pid, names = result.text.splitlines()[2].split(" ", 1)
    assert int(pid) < 10  # a fresh pid namespace: the check cannot see the worker's processes
    assert "HOME" in names and "SECRET" not in names and "JURY" not in names
    unknown = call_tool(
        "run_command", {"check": "nope"}, role="reviewer", worktree=repo, checks={"env": check}
    )
    assert unknown.refused and "env (" in unknown.refused


def test_run_command_runs_exactly_the_declared_check(repo: Path) -> None:
    check = f'{sys.executable} -c "import sys; print(42); sys.exit(3)"'
    ok = call_tool("run_command", {"command": check}, role="refuter", worktree=repo, checks={"t": check})
    assert ok.ok and "exit code 3" in ok.text and "42" in ok.text
    extra = call_tool(
        "run_command", {"command": check + " --x"}, role="refuter", worktree=repo, checks={"t": check}
    )
    assert extra.refused


def test_run_command_timeout(repo: Path) -> None:
    check = f'{sys.executable} -c "import time; time.sleep(10)"'
    result = call_tool(
        "run_command", {"command": check}, role="reviewer", worktree=repo, checks={"t": check}, timeout=0.5
    )
    assert not result.ok and "timed out" in result.text


def test_role_tool_sets_and_schemas() -> None:
    reads = {"read_file", "list_dir", "search_text", "git_diff", "git_log", "git_show", "run_command"}
    for role in ("reviewer", "reply", "refuter"):
        assert tools_for(role) == reads
    assert tools_for("judge") == reads | {"write_file", "edit_file"}
    assert tools_for("nobody") == set()
    assert set(TOOL_SCHEMAS) == tools_for("judge")
    for name, schema in TOOL_SCHEMAS.items():
        assert schema["type"] == "function" and schema["function"]["name"] == name
        params = schema["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])


def test_tool_env_is_scrubbed() -> None:
    from workers.agents.tools import tool_env

    env = tool_env({"PATH": "/bin", "OPENAI_API_KEY": "k", "GIT_DIR": "/elsewhere", "JURY_REDIS_URL": "r"})
    assert env["PATH"] == "/bin"
    assert "OPENAI_API_KEY" not in env and "GIT_DIR" not in env and "JURY_REDIS_URL" not in env
    assert env["GIT_OPTIONAL_LOCKS"] == "0" and env["PYTHONDONTWRITEBYTECODE"] == "1"
