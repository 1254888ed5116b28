"""``run_seat`` is the door every agent's output enters the record by, whatever its kind: a seat declared
here (no redaction of its own) echoes the secret its entry passes through, in its report, streams, error,
transcript file and events, and nothing a hook or the caller sees, nor its files, holds it."""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.agent_kinds import AGENT_KINDS, AgentKindDescriptor
from orchestrator.spec import AgentSpec
from orchestrator.transcript import Commands
from workers.agents import SEATS, AgentRun, Seat, SeatHooks, SeatRequest, run_seat
from workers.isolation.supervise import ProcResult

SECRET = "tok-" + secrets.token_hex(10)
B64 = base64.b64encode(b"ab" + SECRET.encode()).decode()
LEAKED = f"{SECRET} / {SECRET[::-1]} / {B64} / {SECRET.encode().hex()}"


class BlabberSeat:
    """Says its secret everywhere an agent can say something."""

    reserves_per_call = False

    def run(self, request: SeatRequest) -> AgentRun:
        said = f"the token is {os.environ['BLAB_TOKEN']}: {LEAKED}"
        out = request.out_dir / f"{request.name}.stdout.txt"
        out.write_text(said)
        (request.out_dir / f"{request.name}.transcript.jsonl").write_text('{"said": "' + said + '"}\n')
        request.event("tool.refused", {"tool": "run_command", "reason": said, "nested": [{"x": said}]})
        proc = ProcResult(1, False, False, 0.1, out, out, len(said), 0, error=said)
        return AgentRun(
            proc=proc,
            report=said,
            session_id=None,
            stdout=said,
            stderr=said,
            argv=[],
            commands=Commands(run=1, failed=1, first_error=said),
        )


class Seen(SeatHooks):
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.runs: list[AgentRun] = []

    def on_event(self, request: SeatRequest, name: str, fields: dict[str, Any]) -> None:
        self.events.append((name, fields))

    def after_run(self, seat: Seat, request: SeatRequest, run: AgentRun) -> None:
        self.runs.append(run)


@pytest.fixture(autouse=True)
def declared(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("BLAB_TOKEN", SECRET)
    with (
        AGENT_KINDS.registered("blabber", AgentKindDescriptor("says its secret")),
        SEATS.registered("blabber", BlabberSeat()),
    ):
        yield


def holds(text: str) -> bool:
    return any(part in text for part in (SECRET, SECRET[::-1], SECRET.encode().hex(), SECRET[4:14]))


def test_nothing_an_agent_says_leaves_the_seat_with_its_secret(tmp_path: Path) -> None:
    (tmp_path / "earlier.stdout.txt").write_text(SECRET)  # another run's file: not this run's to touch
    spec = AgentSpec(name="b", kind="blabber", env_pass=["BLAB_TOKEN"])
    seen = Seen()
    request = SeatRequest(
        spec=spec,
        role="reviewer",
        prompt="p",
        worktree=tmp_path,
        out_dir=tmp_path,
        name="round-1.b",
        timeout=5,
        hooks=[seen],
    )
    run = run_seat(request)
    (hooked,) = seen.runs
    for r in (run, hooked):
        texts = [
            r.report,
            r.stdout,
            r.stderr,
            r.proc.error or "",
            r.commands.first_error if r.commands else "",
        ]
        assert not any(holds(t) for t in texts), texts
        assert r.report.startswith("the token is [redacted]: [redacted] / [redacted] / ")
    assert seen.events and not holds(repr(seen.events))
    for name in ("round-1.b.stdout.txt", "round-1.b.transcript.jsonl"):
        text = (tmp_path / name).read_text()
        assert "[redacted]" in text and not holds(text), name
    assert (tmp_path / "earlier.stdout.txt").read_text() == SECRET
