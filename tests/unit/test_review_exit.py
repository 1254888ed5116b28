"""``jury review``'s exit code (jury_cli/review.py): 0 only for a run that converged and, when it was to be
published (``--publish``), whose end was published."""

from __future__ import annotations

from jury_cli.review import exit_code
from orchestrator.domain import Event, JuryConfigEvent, RunPublished, TargetEvent
from orchestrator.fold import fold
from orchestrator.spec import AgentSpec, JuryConfig, Target

SPEC = AgentSpec(name="x", argv=["x", "{prompt}"], judge_argv=["x", "{prompt}"])


def ended(state: str, *, publish: bool, published: bool | None) -> list[Event]:
    cfg = JuryConfig(reviewers=["a"], judge="j", agents={"a": SPEC, "j": SPEC}, publish=publish)
    events: list[Event] = [
        TargetEvent(eid="target:0", target=Target(repo="r", url="https://github.com/o/r/pull/1")),
        JuryConfigEvent(eid="config:0", config=cfg),
        TargetEvent(eid="end", target=Target(state=state, state_note="why")),  # type: ignore[arg-type]
    ]
    if published is not None:
        key = f"publish:{state}:e0"
        events.append(RunPublished(eid=f"{key}:published", key=key, state=state, ok=published, error="x"))
    return events


def test_a_converged_run_exits_0() -> None:
    assert exit_code(fold(ended("converged", publish=False, published=None), "s")) == 0
    assert exit_code(fold(ended("converged", publish=True, published=True), "s")) == 0


def test_a_converged_run_whose_publishing_failed_exits_1() -> None:
    assert exit_code(fold(ended("converged", publish=True, published=False), "s")) == 1


def test_a_run_that_did_not_converge_exits_1_whatever_was_published() -> None:
    for state in ("human", "failed", "cancelled"):
        assert exit_code(fold(ended(state, publish=True, published=True), "s")) == 1
        assert exit_code(fold(ended(state, publish=False, published=None), "s")) == 1
