"""One small summary of a run: what a listing shows and a scoreboard counts, without folding the run's log.

The coordinator writes it when a run ends, and whoever folds an ended run after a later event (a nightly
``verify.ran``, a publish) writes it again (``orchestrator.store.files.record``); a listing reads a page of
them instead of every run's whole log. It is built from a ``RunState`` only (pure), so a summary of the
same fold is the same summary, whoever builds it. The stores keep it with no expiry of its own: a month
of figures outlives the runs' own retention.
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.fold import RunState
from orchestrator.spec import TERMINAL_STATES

# Bumped whenever the summary's shape or its counts change meaning: a summary of another version is
# treated as missing (the run is folded instead, and ``jury runs backfill`` writes it again).
SUMMARY_VERSION = 1


class SeatCounts(BaseModel):
    """What one agent did in a run: the findings it raised and what became of them."""

    model_config = ConfigDict(extra="ignore")

    agent: str
    raised: int = 0
    accepted: int = 0
    rejected: int = 0
    refuted: int = 0  # a second opinion said the finding's resolution does not hold
    fixed: int = 0  # accepted with a fix committed to the run's branch
    spent_usd: float = 0.0


class RunSummary(BaseModel):
    """The run at a glance (see the module docstring). Field names are the JSON's (``jury runs --json``,
    ``/api/runs``)."""

    model_config = ConfigDict(extra="ignore")

    version: int = SUMMARY_VERSION
    slug: str
    run_id: str | None = None
    repo: str | None = None
    pr: str | None = None  # the PR's number or id on its forge
    url: str | None = None  # the PR's URL; None for a local branch
    branch: str | None = None
    title: str | None = None
    state: str = "queued"
    state_note: str | None = None
    started: str | None = None  # the first event's time
    updated: str | None = None  # the last event's time
    ended: str | None = None  # the last event's time when the run was last summarised ended
    rounds: int = 0
    findings: dict[str, int] = Field(default_factory=dict)  # status -> count
    fixes: int = 0  # accepted findings whose fix was committed
    spent_usd: float = 0.0
    unknown_costs: int = 0
    trunk_checks: int = 0  # re-runs of accepted findings' tests on trunk (``jury verify``)
    trunk_failures: int = 0  # of those, the ones that did not pass
    seats: list[SeatCounts] = Field(default_factory=list)

    @property
    def open(self) -> int:
        return self.findings.get("open", 0)

    @property
    def total_findings(self) -> int:
        return sum(self.findings.values())


def _seats(state: RunState) -> list[SeatCounts]:
    """One row per agent that sat in a round, raised a finding or spent, in name order."""
    agents = {seat for r in state.rounds for seat in r.agents}
    agents |= {f.agent for f in state.findings.values()} | set(state.spent)
    rows = {
        agent: SeatCounts(agent=agent, spent_usd=round(state.spent.get(agent, 0.0), 6)) for agent in agents
    }
    for f in state.findings.values():
        row = rows[f.agent]
        row.raised += 1
        row.accepted += f.status == "accepted"
        row.rejected += f.status == "rejected"
        row.refuted += f.refutation is not None and f.refutation.ok is False
        row.fixed += f.status == "accepted" and f.integrated
    return [rows[agent] for agent in sorted(rows)]


def summarize(state: RunState, ended: str | None = None) -> RunSummary:
    """The summary of ``state``. ``ended``: when the run ended, if a summary said so before (a rewrite
    after a late event keeps the end it had); else the last event's time of an ended run."""
    finished = state.state in TERMINAL_STATES
    trunk = [run for f in state.findings.values() for run in f.trunk_runs]
    return RunSummary(
        slug=state.slug,
        run_id=state.target.run_id,
        repo=state.target.repo,
        pr=state.target.id,
        url=state.target.url,
        branch=state.target.branch,
        title=state.target.title,
        state=state.state,
        state_note=state.target.state_note,
        started=state.first_ts,
        updated=state.last_ts,
        ended=(ended or state.last_ts) if finished else None,
        rounds=len(state.rounds),
        findings=dict(sorted(Counter(f.status for f in state.findings.values()).items())),
        fixes=sum(f.status == "accepted" and f.integrated for f in state.findings.values()),
        spent_usd=state.total_spent,
        unknown_costs=state.unknown_costs,
        trunk_checks=len(trunk),
        trunk_failures=sum(not run.get("passed") for run in trunk),
        seats=_seats(state),
    )


def matches(summary: RunSummary, state: str | None, repo: str | None) -> bool:
    """Whether a listing filtered by ``state`` and ``repo`` (None: any) shows the run; repositories are
    compared without case, as forges compare them."""
    if state is not None and summary.state != state:
        return False
    return repo is None or (summary.repo or "").lower() == repo.lower()
