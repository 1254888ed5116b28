"""A 429 that names no wait, in the http agent's loop against a real local chat server: in a worker's task
it is never slept in the worker's slot (the run ends ``RateLimited`` with no seconds, or the fallback model
is tried at once); outside a worker it is slept with the loop's own backoff, as before.

The put-back's countdown that follows (the task's own back-off) is ``run_task``'s:
tests/unit/test_reap_backoff.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.chat_server import ChatServer, answer, status
from tests.integration.test_http_agent import Events, repo, run, server, spec_for
from workers.agents.run import RateLimited
from workers.agents.seat import CALL_DROPPED

__all__ = ["repo", "server"]  # the fixtures, shared with test_http_agent


def test_a_429_without_retry_after_in_a_worker_sends_the_run_back_unslept(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    server.script("acme/m1", status(429))  # no Retry-After
    events, sleeps = Events(), list[float]()
    with pytest.raises(RateLimited) as back:
        run(spec_for(server), repo, tmp_path / "out", events=events, sleeps=sleeps, defer_after=5.0)
    assert back.value.seconds is None  # the task's back-off decides how long
    assert back.value.note == "acme/m1 answered 429 without Retry-After"
    assert sleeps == [] and len(server.requests) == 1  # not one second slept in the slot, no retry
    assert events.named("http.rate_limited") == [{"model": "acme/m1", "retry_after": None}]
    assert events.named(CALL_DROPPED) == [{"model": "acme/m1", "status": 429}]


def test_a_429_without_retry_after_tries_the_fallback_model_at_once(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    server.script("acme/m1", status(429))
    server.script("other/m2", answer("NO NEW FINDINGS"))
    sleeps: list[float] = []
    spec = spec_for(server, fallback=["other/m2"])
    result = run(spec, repo, tmp_path / "out", sleeps=sleeps, defer_after=5.0)
    assert result.report == "NO NEW FINDINGS" and result.model == "other/m2"
    assert sleeps == [] and len(server.requests_for("acme/m1")) == 1


def test_outside_a_worker_a_429_without_retry_after_is_slept_with_backoff(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    server.script("acme/m1", status(429), status(429), answer("NO NEW FINDINGS"))
    sleeps: list[float] = []
    result = run(spec_for(server), repo, tmp_path / "out", sleeps=sleeps)  # no defer_after: a command
    assert result.report == "NO NEW FINDINGS" and sleeps == [1.0, 2.0]


def test_a_storm_of_short_retry_afters_is_paused_for_once_then_sent_back(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    # Each wait is short enough to sleep in the slot, but a storm of them is a storm: the first 429 of the
    # call is slept, the second sends the run back (it never ends as "every model failed").
    server.script("acme/m1", *[status(429, retry_after="5") for _ in range(10)])
    events, sleeps = Events(), list[float]()
    with pytest.raises(RateLimited) as back:
        run(spec_for(server), repo, tmp_path / "out", events=events, sleeps=sleeps, defer_after=5.0)
    assert back.value.seconds == 5.0 and back.value.note == "acme/m1 answered 429 with Retry-After 5s"
    assert sleeps == [5.0] and len(server.requests) == 2
    assert events.named(CALL_DROPPED) == [{"model": "acme/m1", "status": 429}]


def test_one_short_retry_after_is_slept_and_the_call_goes_on(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    server.script("acme/m1", status(429, retry_after="2"), answer("NO NEW FINDINGS"))
    sleeps: list[float] = []
    result = run(spec_for(server), repo, tmp_path / "out", sleeps=sleeps, defer_after=5.0)
    assert result.report == "NO NEW FINDINGS" and sleeps == [2.0]


def test_the_one_pause_is_for_the_calls_first_429_whatever_failed_before(
    server: ChatServer, repo: Path, tmp_path: Path
) -> None:
    server.script("acme/m1", status(500), status(429, retry_after="2"), answer("NO NEW FINDINGS"))
    sleeps: list[float] = []
    result = run(spec_for(server), repo, tmp_path / "out", sleeps=sleeps, defer_after=5.0)
    assert result.report == "NO NEW FINDINGS" and sleeps == [1.0, 2.0]  # the 500's back-off, the pause
