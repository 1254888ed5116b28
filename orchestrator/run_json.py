"""The fold of a run in codejury's ``run.json`` shape (its rounds, exchanges and lanes in minutes since the
run's first event), with Jury's whole state under the ``jury`` key: what the files store writes beside the
log and what codejury's readers read."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from orchestrator.fold import RunState


def _minutes(ts: str | None, start: datetime | None) -> float | None:
    if ts is None or start is None:
        return None
    return round((_parse_ts(ts) - start).total_seconds() / 60.0, 2)


def _parse_ts(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def run_json(s: RunState) -> dict[str, Any]:
    """The fold in codejury's ``run.json`` shape, with Jury's whole state under ``jury``."""
    start = _parse_ts(s.first_ts) if s.first_ts else None
    rounds = []
    lanes: dict[str, list[dict[str, Any]]] = {}
    for r in s.rounds:
        verdicts = []
        for slot in r.agents.values():
            verdicts.append(
                {
                    "a": slot.agent,
                    "s": slot.state,
                    "t": slot.summary,
                    "seconds": slot.seconds,
                    "report": slot.report,
                    "rawFile": slot.raw_file,
                }
            )
            seg: dict[str, Any] = {
                "r": r.n,
                "s": _minutes(slot.launched_at, start),
                "e": _minutes(slot.reported_at, start),
                "t": slot.state,
            }
            if slot.reported_at is None:
                seg["open" if r is s.current else "abandoned"] = True
            lanes.setdefault(slot.agent, []).append(seg)
        rounds.append(
            {
                "n": r.n,
                "sha": r.sha,
                "verdicts": verdicts,
                "startMin": _minutes(r.started_at, start),
                "prompt": r.prompt_file,
            }
        )
    exchanges = [
        {
            "id": f.id,
            "round": f.round,
            "with": f.agent,
            "claim": f.claim,
            "loc": f.loc,
            "res": f.status,
            "turns": [t.wire() for t in f.turns],
            "reproduced": f.reproduced,
            "outcome": f.reason,
        }
        for f in s.findings.values()
    ]
    return {
        "target": s.target.wire(),
        "rounds": rounds,
        "exchanges": exchanges,
        "replies": [r.wire() for r in s.replies],
        "lanes": [{"who": who, "segs": segs} for who, segs in lanes.items()],
        "marks": [{"at": _minutes(r.started_at, start), "l": f"round {r.n}"} for r in s.rounds],
        "totalMin": _minutes(s.last_ts, start) or 0.0,
        "jury": s.wire(),
    }
