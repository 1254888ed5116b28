"""What a review and a sweep show while they go: on a terminal, the milestones (rounds, findings) as they
happen above a live panel, and a sweep's queued/running/done; off a terminal, the plain lines only, with
no panel and no escape sequences. An action handed back to the fleet (its worker shut down) is said so,
not shown as a second launch."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from jury_cli.progress import Progress
from jury_cli.sweep import follow_all, tally
from orchestrator.domain import (
    AgentLaunch,
    AgentReport,
    Event,
    FindingRaised,
    FindingResolved,
    RoundStart,
    TargetEvent,
)
from orchestrator.fold import RunState, apply
from orchestrator.spec import Target

SLUG = "calc-feature-20261207-2106"


def console(terminal: bool) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=terminal, width=120, color_system=None), buf


def review_events() -> list[list[Event]]:
    """A run's events in the batches ``follow`` would read them."""
    return [
        [TargetEvent(eid="state:review", target=Target(state="review"))],
        [RoundStart(eid="round.start:1", n=1, sha="d586ab835366aa", prompt="p")],
        [AgentLaunch(eid="r1:finder:launch", agent="finder", round=1, key="review:r1:finder")],
        [
            AgentReport(
                eid="r1:finder:report",
                agent="finder",
                round=1,
                verdict="found",
                seconds=3,
                key="review:r1:finder",
            ),
            FindingRaised(
                eid="F1:raised", id="F1", round=1, agent="finder", claim="median is off", loc="stats.py:9"
            ),
        ],
        [FindingResolved(eid="F1:resolved", id="F1", verdict="accepted", reason="fixed", who="judge")],
        [TargetEvent(eid="state:converged", target=Target(state="converged"))],
    ]


def shown(terminal: bool, batches: list[list[Event]]) -> str:
    con, buf = console(terminal)
    state = RunState(slug=SLUG)
    with Progress(con, SLUG) as progress:
        for batch in batches:
            for e in batch:
                apply(state, e)
            progress.update(state, batch)
    return buf.getvalue()


def test_a_review_on_a_terminal_prints_rounds_and_findings_as_they_happen_above_its_panel() -> None:
    said = shown(True, review_events())
    for line in (
        "round 1 started at d586ab835366",
        "finding F1 raised by finder: median is off (stats.py:9)",
        "finding F1 accepted by judge: fixed",
        "run converged",
    ):
        assert said.count(line) == 1, (line, said)
    assert "findings: 1 raised, 1 accepted" in said  # the panel
    assert "finder (reviewer) launched" not in said  # the agents are the panel's


def test_a_review_off_a_terminal_prints_plain_lines_only() -> None:
    said = shown(False, review_events())
    assert "\x1b" not in said, repr(said)
    assert "findings: 1 raised" not in said  # no panel
    assert said.splitlines() == [
        "run review",
        "round 1 started at d586ab835366",
        "  finder (reviewer) launched",
        "  finder (reviewer) found after 3s",
        "  finding F1 raised by finder: median is off (stats.py:9)",
        "  finding F1 accepted by judge: fixed",
        "run converged",
    ]


def test_a_hand_back_is_said_so_not_shown_as_a_second_launch() -> None:
    key = "review:r1:finder"
    batches: list[list[Event]] = [
        [AgentLaunch(eid=f"{key}:launch", agent="finder", round=1, key=key)],
        [AgentLaunch(eid=f"{key}:launch:2", agent="finder", round=1, key=key)],  # the next worker's
        [AgentReport(eid=f"{key}:report", agent="finder", round=1, verdict="clean", seconds=3, key=key)],
        [AgentLaunch(eid="review:r2:finder:launch", agent="finder", round=2, key="review:r2:finder")],
    ]
    for terminal in (False, True):
        said = shown(terminal, batches)
        assert said.count("finder (reviewer) handed back to the fleet") == 1, said
    plain = shown(False, batches)
    assert plain.count("finder (reviewer) launched") == 2, plain  # round 1's first, and round 2's


class ScriptedStore:
    """The store ``follow_all`` polls, answering each poll with the next of the runs' states."""

    def __init__(self, polls: list[dict[str, str | None]]) -> None:
        self.polls = polls

    def run_states(self, slugs: list[str]) -> dict[str, str | None]:
        answer = self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]
        return {s: answer[s] for s in slugs}


class Backend:
    def __init__(self, store: ScriptedStore) -> None:
        self.store = store

    def sync(self, slug: str) -> Any:
        return None


POLLS: list[dict[str, str | None]] = [
    {"a": "queued", "b": "queued", "c": "queued"},
    {"a": "review", "b": "queued", "c": "queued"},
    {"a": "converged", "b": "review", "c": "review"},
    {"a": "converged", "b": "converged", "c": "human"},
]


def test_a_sweep_on_a_terminal_shows_its_runs_queued_running_and_done() -> None:
    con, buf = console(True)
    ended = follow_all(Backend(ScriptedStore([dict(p) for p in POLLS])), ["a", "b", "c"], False, con)  # type: ignore[arg-type]
    assert ended == {"a": "converged", "b": "converged", "c": "human"}
    said = buf.getvalue()
    for line in ("runs: 3 queued, 0 running, 0 done of 3", "runs: 2 queued, 1 running, 0 done of 3"):
        assert line in said, said
    assert "runs: 0 queued, 2 running, 1 done of 3" in said, said
    assert "a  converged" in said and "c  human" in said


def test_a_sweep_off_a_terminal_says_only_each_end() -> None:
    con, buf = console(False)
    follow_all(Backend(ScriptedStore([dict(p) for p in POLLS])), ["a", "b", "c"], False, con)  # type: ignore[arg-type]
    assert buf.getvalue().splitlines() == ["a  converged", "b  converged", "c  human"]


def test_tally_counts_runs_gone_from_the_store_as_done() -> None:
    assert tally({"a": None, "b": "publishing", "c": "queued"}) == "runs: 1 queued, 1 running, 1 done of 3"
