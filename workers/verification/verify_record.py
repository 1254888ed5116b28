"""The record of a verification: the table event ``jury show`` and ``run.json`` carry per finding, and
the run's artifacts as the cache of the head's suite results."""

from __future__ import annotations

from orchestrator.domain import VerifyTable
from orchestrator.store.base import EventStore
from workers.verification.suite import SuiteSide
from workers.verification.verify import Verification

__all__ = ["ArtifactCache", "table_event"]


class ArtifactCache:
    """The head's suite results, kept as artifacts of the run: any host verifying a finding of the same
    tree reads them back instead of running the suite again."""

    def __init__(self, store: EventStore, slug: str) -> None:
        self.store, self.slug = store, slug

    def get(self, name: str) -> bytes | None:
        return self.store.get_artifact(self.slug, name)

    def put(self, name: str, data: bytes) -> None:
        self.store.put_artifact(self.slug, name, data)


def _side(side: SuiteSide | None) -> dict[str, object] | None:
    """A suite run for the record: counts, not every test's outcome (the artifact keeps those)."""
    if side is None:
        return None
    counts: dict[str, int] = {}
    for outcome in side.outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return side.model_dump(exclude={"outcomes"}) | {"counts": counts, "summary": side.summary()}


def table_event(eid: str, fid: str, v: Verification) -> VerifyTable:
    """The verification table of one acceptance (``jury show``, ``run.json``), with the seconds of each
    run: the named tests on both trees, coverage, and the suite (a cached head run cost nothing now)."""
    seconds: dict[str, float] = {}
    for r in v.runs:  # the mutants are one entry: what they cost together
        key = r.tree if r.tree != "final" else "check"
        seconds[key] = round(seconds.get(key, 0.0) + r.seconds, 3)
    suite = None
    if v.suite is not None:
        suite = v.suite.model_dump(exclude={"head", "fixed"}) | {
            "head": _side(v.suite.head),
            "fixed": _side(v.suite.fixed),
        }
        for side in (v.suite.head, v.suite.fixed):
            if side is not None:
                seconds[f"suite-{side.tree}"] = 0.0 if side.cached else side.seconds
    return VerifyTable(
        eid=eid,
        id=fid,
        ok=v.ok,
        reason=v.reason,
        runner=v.runner,
        tests=[t.model_dump() for t in v.tests],
        coverage=[c.model_dump() for c in v.coverage],
        coverage_note=v.coverage_note,
        suite=suite,
        config_changes=v.config_changes,
        weakening=v.weakening,
        seconds=v.seconds,
        run_seconds=seconds,
    )
