"""What the http agent does with each kind of refusal, against a real local chat server.

A refusal of the key (401, 403) ends the run at once: no retry, no fallback model, since every other
model behind the same endpoint and key would refuse it too, and each retry spends a call. A request
timeout (408) is the server's trouble, not the request's: it is retried with backoff on the same model,
then the next model is tried.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.spec import AgentSpec
from tests.fakes.chat_server import ChatServer, answer, status
from workers.agents.http import BACKOFF_BASE, MAX_ATTEMPTS, run_http_agent

KEY_ENV = "STATUS_MODEL_KEY"


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


def run(server: ChatServer, wt: Path, out: Path, sleeps: list[float], events: list[Any]):
    spec = AgentSpec.model_validate(
        {
            "name": "h",
            "kind": "http",
            "base_url": server.url,
            "model": "acme/m1",
            "fallback": ["other/m2"],
            "api_key_env": KEY_ENV,
        }
    )
    return run_http_agent(
        spec,
        role="reviewer",
        prompt="Review the change.",
        worktree=wt,
        out_dir=out,
        name="round-1.h",
        timeout=30,
        env={KEY_ENV: "sk-status-test", "PATH": os.environ["PATH"]},
        sleep=sleeps.append,
        on_event=lambda name, fields: events.append((name, fields)),
    )


@pytest.mark.parametrize("code", [401, 403])
def test_a_refused_key_stops_at_once_without_retry_or_fallback(
    server: ChatServer, repo: Path, tmp_path: Path, code: int
) -> None:
    server.script("acme/m1", status(code), answer("NO NEW FINDINGS"))
    server.script("other/m2", answer("NO NEW FINDINGS"))
    sleeps: list[float] = []
    events: list[Any] = []
    result = run(server, repo, tmp_path / "out", sleeps, events)
    assert result.proc.exit_code == 1
    assert result.proc.error is not None
    assert f"HTTP {code}: authentication refused" in result.proc.error
    assert [r.model for r in server.requests] == ["acme/m1"]
    assert sleeps == [] and [n for n, _ in events if n in ("http.retry", "http.fallback")] == []
    assert result.report == ""


def test_a_request_timeout_is_retried_on_the_same_model(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    server.script("acme/m1", status(408), status(408), answer("NO NEW FINDINGS"))
    server.script("other/m2", answer("FINDING: the fallback must not be asked\nWHERE: app.py:2"))
    sleeps: list[float] = []
    events: list[Any] = []
    result = run(server, repo, tmp_path / "out", sleeps, events)
    assert result.proc.exit_code == 0, result.proc.error
    assert result.report == "NO NEW FINDINGS" and result.model == "acme/m1"
    assert [r.model for r in server.requests] == ["acme/m1"] * 3
    assert sleeps == [BACKOFF_BASE, BACKOFF_BASE * 2]  # backoff: no Retry-After was sent
    retries = [f for n, f in events if n == "http.retry"]
    assert [(f["status"], f["attempt"]) for f in retries] == [(408, 1), (408, 2)]


def test_a_request_timeout_that_persists_moves_to_the_fallback(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    server.script("acme/m1", *[status(408)] * MAX_ATTEMPTS)
    server.script("other/m2", answer("NO NEW FINDINGS"))
    sleeps: list[float] = []
    events: list[Any] = []
    result = run(server, repo, tmp_path / "out", sleeps, events)
    assert result.proc.exit_code == 0, result.proc.error
    assert result.model == "other/m2"
    assert [r.model for r in server.requests] == ["acme/m1"] * MAX_ATTEMPTS + ["other/m2"]
    assert len(sleeps) == MAX_ATTEMPTS - 1
    (fallback,) = [f for n, f in events if n == "http.fallback"]
    assert (fallback["from_model"], fallback["to_model"]) == ("acme/m1", "other/m2")
