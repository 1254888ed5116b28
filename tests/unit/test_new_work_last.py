"""Which of a coordinator's dispatches are new work (sent behind every run under way, ``Runtime.send_new``)
and which continue a run: on the in-memory twins. The broker's side (a real worker taking a run's second
round before other runs' first reviews) is tests/e2e/test_continue_first.py."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config import Settings
from orchestrator.domain import AgentLaunch, Event, JuryConfigEvent, TargetEvent
from orchestrator.fold import fold
from orchestrator.spec import AgentSpec, JuryConfig, SandboxSettings, Target
from orchestrator.store.files import FileStore
from orchestrator.store.memory import ManualClock, MemoryStore
from workers.fleet.ledger import MemoryLedger
from workers.runtime import coordinator
from workers.runtime.context import Runtime
from workers.runtime.lease import MemoryLeases

SLUG = "acme-widgets-pr-7"
SPEC = AgentSpec(name="x", argv=["x", "{prompt}"], judge_argv=["x", "{prompt}"])


def runtime(tmp_path: Path, sent: list[tuple[str, str]], *, with_send_new: bool = True) -> Runtime:
    clock = ManualClock()
    settings = Settings(dir=tmp_path / "state")
    return Runtime(
        settings=settings,
        store=MemoryStore(clock),
        files=FileStore(settings.dir),
        send=lambda kind, slug, key: sent.append(("continuing", key)),
        kick=lambda slug: None,
        lease_backend=MemoryLeases(clock),
        ledger_backend=MemoryLedger(clock),
        send_new=(lambda kind, slug, key: sent.append(("new", key))) if with_send_new else None,
    )


def first_events() -> list[Event]:
    config = JuryConfig(
        reviewers=["a", "b"], judge="j", agents={n: SPEC for n in ("a", "b", "j")}, sandbox=SandboxSettings()
    )
    return [
        TargetEvent(eid="target:0", target=Target(repo="r", id="feat", state="review", head="h0", base="b0")),
        JuryConfigEvent(eid="config:0", config=config),
    ]


def test_a_runs_first_reviews_are_new_work(tmp_path: Path) -> None:
    sent: list[tuple[str, str]] = []
    rt = runtime(tmp_path, sent)
    rt.store.append(SLUG, first_events())
    state = coordinator.coordinate(rt, SLUG)
    assert sent == [("new", "review:r1:a"), ("new", "review:r1:b")]
    assert not coordinator.begun(state)


def test_a_run_is_begun_once_an_agent_of_it_launched(tmp_path: Path) -> None:
    sent: list[tuple[str, str]] = []
    rt = runtime(tmp_path, sent)
    rt.store.append(SLUG, first_events())
    coordinator.coordinate(rt, SLUG)
    rt.store.append(SLUG, [AgentLaunch(eid="launch", agent="a", round=1, key="review:r1:a")])
    assert coordinator.begun(fold(rt.store.read(SLUG), SLUG))
    # the reaper's sends again, a put-back's, a hand-back's: continuing work, at the first priority
    coordinator.send(rt, "review", SLUG, "review:r1:b")
    assert sent[-1] == ("continuing", "review:r1:b")


def test_without_send_new_everything_goes_by_send(tmp_path: Path) -> None:
    """The twins elsewhere, and a runtime of a release before this one, give no ``send_new``."""
    sent: list[tuple[str, str]] = []
    rt = runtime(tmp_path, sent, with_send_new=False)
    rt.store.append(SLUG, first_events())
    coordinator.coordinate(rt, SLUG)
    assert sent == [("continuing", "review:r1:a"), ("continuing", "review:r1:b")]
