"""Work that continues a run under way goes before new runs' first work (issue 49): a real ``jury worker``
on a private Redis, real runs, fake agents.

Four runs are started before any worker runs: A (its finder finds a bug the judge fixes, so A has a second
round of reviews) and B1..B3 (one clean reviewer each). The one worker (one slot) makes their first passes
(control first), which queue their first reviews: A's, then the Bs'. It takes A's; from then on A's work is
continuing work (``coordinator.begun``), sent at the broker's first priority, so A's second-round review
is taken before any B's first review, although those were queued long before it. Before, a queue was FIFO:
A's round 2 waited behind every other run's round 1.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from orchestrator.domain import Event
from tests.e2e.test_fleet import (  # noqa: F401  (fixtures: the private Redis and the fleet on it)
    Fleet,
    agent,
    fleet,
    private_redis,
)


def launches(events: list[Event]) -> list[tuple[datetime, str]]:
    return [(datetime.fromisoformat(e.ts), e.key or "") for e in events if e.t == "agent.launch"]


def test_a_started_runs_second_round_goes_before_new_runs_first_reviews(
    fleet: Fleet,  # noqa: F811
    sample_repo: Path,
    write_config,
    fake_state: Path,
) -> None:
    config = write_config(
        agent("finder", "find", fake_state),
        agent("quiet", "clean", fake_state),
        agent("judge", "clean", fake_state, judge_mode="fix"),
    )
    a = fleet.start(sample_repo, config, "--reviewer", "finder")
    bs = [fleet.start(sample_repo, config, "--reviewer", "quiet") for _ in range(3)]
    fleet.worker(concurrency=1)
    assert fleet.wait_ended(a, timeout=120).state == "converged"
    for b in bs:
        assert fleet.wait_ended(b, timeout=120).state == "converged"

    a_launches = launches(fleet.events(a))
    second_round = [at for at, key in a_launches if key.startswith("review:r2:")]
    assert second_round, a_launches  # A had a second round of reviews
    firsts = {b: min(launches(fleet.events(b))) for b in bs}
    # A's first review was queued before the Bs' and taken first; its second round, queued after theirs,
    # was taken before any of them
    assert min(a_launches)[0] < min(at for at, _ in firsts.values())
    assert max(second_round) < min(at for at, _ in firsts.values()), (a_launches, firsts)
