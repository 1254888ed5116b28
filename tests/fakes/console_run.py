"""A run's events written straight into a store, in steps, for the console's tests: what a real run's
workers append, without the workers (the console only reads the log, so the log is what it is tested on).

Strings carry markup on purpose: the console must show them as text.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from orchestrator.domain import (
    ActionDispatched,
    ActionDone,
    AgentAlive,
    AgentLaunch,
    AgentReport,
    BudgetSpent,
    CommitPushed,
    Event,
    FindingRaised,
    FindingReproduced,
    FindingResolved,
    JuryConfigEvent,
    RefuteVerdict,
    ReplyAnswered,
    ReplySent,
    RoundStart,
    TargetEvent,
    VerifyRan,
)
from orchestrator.spec import AgentSpec, JuryConfig, Target

HOSTILE = '<img src=x onerror="document.title=\'pwned\'"><script>document.title="pwned"</script>'
T0 = datetime.now(UTC) - timedelta(seconds=90)  # the run began a minute and a half ago


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def config() -> JuryConfig:
    agents = {n: AgentSpec(name=n, argv=["true"]) for n in ("alpha", "beta", "judge")}
    return JuryConfig(reviewers=["alpha", "beta"], judge="judge", agents=agents, budget=2.0)


def started(title: str = "fix the parser", state: str = "review") -> list[Event]:
    """A run in review, round 1 open, both reviewers launched and still running (no report yet)."""
    target = Target(repo="acme/widgets", id="7", title=title, url="javascript:alert(1)", state=state)  # type: ignore[arg-type]
    return [
        TargetEvent(eid="target:0", ts=at(0), target=target),
        JuryConfigEvent(eid="config:0", ts=at(0), config=config()),
        RoundStart(
            eid="round:1", ts=at(1), n=1, sha="a" * 40, prompt="review it", prompt_file="round-1.prompt.md"
        ),
        ActionDispatched(
            eid="d:review:1:alpha", ts=at(1), key="review:1:alpha", kind="review", round=1, agent="alpha"
        ),
        ActionDispatched(
            eid="d:review:1:beta", ts=at(1), key="review:1:beta", kind="review", round=1, agent="beta"
        ),
        AgentLaunch(eid="review:1:alpha:launch", ts=at(2), agent="alpha", round=1, key="review:1:alpha"),
        AgentLaunch(eid="review:1:beta:launch", ts=at(2), agent="beta", round=1, key="review:1:beta"),
    ]


def alpha_found(claim: str = f"parse() drops the last byte {HOSTILE}") -> list[Event]:
    """Reviewer alpha reports one finding (beta still runs)."""
    return [
        AgentReport(
            eid="review:1:alpha:report",
            ts=at(40),
            agent="alpha",
            round=1,
            verdict="found",
            seconds=38.0,
            summary="1 finding",
            report=f"FINDING: {claim}\nWHERE: src/parse.py:3\n",
            raw_file="round-1.alpha.stdout.txt",
            key="review:1:alpha",
        ),
        FindingRaised(
            eid="f:r1-alpha-1",
            ts=at(40),
            id="r1-alpha-1",
            round=1,
            agent="alpha",
            claim=claim,
            loc="src/parse.py:3",
            body=HOSTILE,
        ),
        ActionDone(eid="review:1:alpha:done", ts=at(40), key="review:1:alpha"),
    ]


def judged() -> list[Event]:
    """The judge reproduces, fixes and verifies the finding; a refuter agrees; alpha is told, answers."""
    fid = "r1-alpha-1"
    return [
        ActionDispatched(
            eid="d:triage",
            ts=at(41),
            key="triage:r1-alpha-1",
            kind="triage",
            round=1,
            agent="judge",
            finding=fid,
        ),
        AgentLaunch(
            eid="triage:launch",
            ts=at(41),
            agent="judge",
            round=1,
            role="judge",
            key="triage:r1-alpha-1",
            finding=fid,
        ),
        FindingReproduced(eid="f:repro", ts=at(60), id=fid, evidence="test fails on the head", who="judge"),
        FindingResolved(
            eid="f:resolved",
            ts=at(63),
            id=fid,
            verdict="accepted",
            reason="fixed, test added",
            who="judge",
            test_command="pytest -q tests/test_parse.py",
            patch="patches/r1-alpha-1.patch",
        ),
        VerifyRan(
            eid="v:fixed",
            ts=at(61),
            id=fid,
            command="pytest -q tests/test_parse.py",
            tree="fixed",
            exit_code=0,
            seconds=1.5,
            output_tail="1 passed",
        ),
        VerifyRan(
            eid="v:reverted",
            ts=at(62),
            id=fid,
            command="pytest -q tests/test_parse.py",
            tree="reverted",
            exit_code=1,
            seconds=1.4,
            output_tail="1 failed",
        ),
        RefuteVerdict(
            eid="refute:f",
            ts=at(64),
            id=fid,
            outcome="not_refuted",
            reason="NOT REFUTED: ran the test",
            source="refuter",
            agent="beta",
            model="other/model",
            independent=True,
            cost_usd=0.0006,
        ),
        BudgetSpent(
            eid="spent:triage",
            ts=at(64),
            key="triage:r1-alpha-1:call1",
            agent="judge",
            amount=0.25,
            finding=fid,
        ),
        CommitPushed(eid="commit:1", ts=at(65), sha="b" * 40, subject="fix parse", finding=fid),
        ActionDone(eid="triage:done", ts=at(65), key="triage:r1-alpha-1"),
        ReplySent(
            eid="reply:sent",
            ts=at(66),
            agent="alpha",
            round=1,
            resumed=False,
            text="your finding: accepted",
            findings=[fid],
        ),
        ReplyAnswered(
            eid="reply:answered",
            ts=at(70),
            agent="alpha",
            round=1,
            verdict="clean",
            seconds=4.0,
            report="agreed",
        ),
    ]


def beta_found() -> list[Event]:
    """Reviewer beta reports two findings: the judge rejects the first, and a refuter's second opinion on
    it refutes the claim; the second stays open."""
    return [
        AgentReport(
            eid="review:1:beta:report",
            ts=at(72),
            agent="beta",
            round=1,
            verdict="found",
            seconds=70.0,
            summary="2 findings",
            report="FINDING: the cache never expires\nFINDING: the log grows without bound\n",
            raw_file="round-1.beta.stdout.txt",
            key="review:1:beta",
        ),
        FindingRaised(
            eid="f:r1-beta-1",
            ts=at(72),
            id="r1-beta-1",
            round=1,
            agent="beta",
            claim="the cache never expires",
            loc="src/cache.py:10",
        ),
        FindingRaised(
            eid="f:r1-beta-2",
            ts=at(72),
            id="r1-beta-2",
            round=1,
            agent="beta",
            claim="the log grows without bound",
            loc="src/log.py:4",
        ),
        ActionDone(eid="review:1:beta:done", ts=at(72), key="review:1:beta"),
        FindingResolved(
            eid="f:r1-beta-1:resolved",
            ts=at(74),
            id="r1-beta-1",
            verdict="rejected",
            reason="expire() runs every minute",
            who="judge",
        ),
        RefuteVerdict(
            eid="refute:r1-beta-1",
            ts=at(75),
            id="r1-beta-1",
            outcome="refuted",
            reason="REFUTED: expire() runs every minute (src/cache.py:30)",
            source="refuter",
            agent="alpha",
            model="other/model",
            independent=True,
            cost_usd=0.0004,
        ),
    ]


def beta_tick(seconds: float = 30.0) -> AgentAlive:
    return AgentAlive(
        eid="review:1:beta:alive:1",
        ts=at(2 + seconds),
        agent="beta",
        round=1,
        seconds=seconds,
        quiet_seconds=3.0,
        key="review:1:beta",
    )


@contextmanager
def serve(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """The ASGI ``app`` served by a real uvicorn server on a free port, in a thread; yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((host, 0))
    sock.listen(64)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the console's uvicorn server did not start")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
