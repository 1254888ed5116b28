"""What the console shows, as JSON: the run list and one run's page, read through the store.

The run list is a page of the runs' summaries (``orchestrator.listing``; a run without one folded). A
run's page is built from the event log (``fold`` plus the events themselves, for what the fold does not
keep: when each agent run started and ended) and the liveness ticks kept beside it. Nothing here writes.
The strings are the run's own (hostile PRs, agents' output): they are data to the page, which shows them
as text, never markup.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from orchestrator.domain import (
    ActionDeferred,
    ActionDone,
    AgentAlive,
    AgentLaunch,
    AgentReport,
    CommitPushed,
    Event,
    FindingRaised,
    FindingResolved,
    FindingTurn,
    ReplyAnswered,
    ReplySent,
    RunPublished,
    RunResumed,
)
from orchestrator.fold import RunState, apply, tick
from orchestrator.listing import DEFAULT_LIMIT, list_runs
from orchestrator.run_reader import Kept, advance, fold_run
from orchestrator.spec import TERMINAL_STATES
from orchestrator.store.base import EVENTS_FILE, EventStore, LiveStore, check_slug
from orchestrator.store.files import FileStore

# The run list's order (codejury's): what needs a person first, then what runs, then what is done.
STATE_ORDER = ("human", "review", "queued", "converged", "merged")


@dataclass
class LogRead:
    """A run's log as the console read it: the events and the position after the last one (the SSE id a
    page resumes from: the Redis stream's entry id, or the number of events of a files record)."""

    events: list[Event]
    position: str | None


def read_log(store: EventStore, slug: str) -> LogRead:
    """The whole log of ``slug`` with its end position."""
    if isinstance(store, LiveStore):
        found = store.read_after(slug, None) or []
        return LogRead([e for _, e in found], found[-1][0] if found else None)
    events = store.read(slug)
    return LogRead(events, str(len(events)) if events else None)


def read_since(store: EventStore, slug: str, position: str | None) -> tuple[list[tuple[str, Event]], bool]:
    """The events after ``position`` each with its own position, and whether the log was read again from
    its start because ``position`` is not in it any more (a reader then starts over)."""
    if isinstance(store, LiveStore):
        found = store.read_after(slug, position)
        if found is None:
            return [(p, e) for p, e in store.read_after(slug, None) or []], True
        return found, False
    after = 0
    if position is not None:
        try:
            after = int(position)
        except ValueError:
            after = -1
    events = store.read(slug)
    if after < 0 or after > len(events):
        return [(str(i + 1), e) for i, e in enumerate(events)], True
    return [(str(after + i + 1), e) for i, e in enumerate(events[after:])], False


def log_stamp(store: EventStore, slug: str) -> tuple[int, int] | None:
    """The size and change time of a files record's log (it only grows, so an unchanged stamp means nothing
    new to read); None for a live store, which is asked for what follows a position instead."""
    if not isinstance(store, FileStore):
        return None
    try:
        st = os.stat(store.root / "runs" / check_slug(slug) / EVENTS_FILE)
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


def ticks_of(store: EventStore, slug: str) -> list[AgentAlive]:
    """The agents' latest liveness ticks (only a live store keeps them)."""
    return store.alive(slug) if isinstance(store, LiveStore) else []


def folded(slug: str, events: list[Event], ticks: list[AgentAlive]) -> RunState:
    s = RunState(slug=slug)
    for e in events:
        apply(s, e)
    for t in ticks:
        tick(s, t)
    return s


class ListFolds:
    """The run list's folds, kept between requests (the page asks every few seconds): a live run is
    brought up to date with the events after the position last folded, a files record is folded again
    only when its log changed; anything that does not line up (the log deleted or begun again) is folded
    from the coordinator's snapshot and what follows it, else from the whole log."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[str, Kept] = {}  # slug -> its fold, origin and position
        self._files: dict[str, tuple[RunState, tuple[int, int]]] = {}  # slug -> (fold, (size, mtime))

    def fold(self, store: EventStore, slug: str) -> RunState:
        with self._lock:
            if isinstance(store, LiveStore):
                return self._fold_live(store, slug)
            if isinstance(store, FileStore):
                return self._fold_files(store, slug)
            return fold_run(store, slug)

    def _fold_live(self, store: LiveStore, slug: str) -> RunState:
        kept = advance(store, slug, self._live.get(slug))  # ``orchestrator.run_reader``: the one reader
        if kept is None:
            self._live.pop(slug, None)
            return RunState(slug=slug)  # an empty log: listed as skipped
        self._live[slug] = kept
        return kept.state

    def _fold_files(self, store: FileStore, slug: str) -> RunState:
        stamp = log_stamp(store, slug) or (-1, -1)
        kept = self._files.get(slug)
        if kept is not None and kept[1] == stamp:
            return kept[0]
        s = fold_run(store, slug)
        self._files[slug] = (s, stamp)
        return s

    def forget_others(self, slugs: list[str]) -> None:
        with self._lock:
            for table in (self._live, self._files):
                for slug in set(table) - set(slugs):
                    del table[slug]


def state_rank(state: str) -> int:
    return STATE_ORDER.index(state) if state in STATE_ORDER else len(STATE_ORDER)


def run_list(
    store: EventStore,
    folds: ListFolds | None = None,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    state: str | None = None,
    repo: str | None = None,
) -> dict[str, Any]:
    """A page of runs (``orchestrator.listing``: ended ones from their summaries, live ones folded and
    their folds kept between requests), sorted by state (``STATE_ORDER``) then newest first, and the next
    page's cursor; one that cannot be read is listed under ``skipped`` with the reason, never blanking
    the list."""
    folds = folds or ListFolds()
    page = list_runs(store, limit, cursor, state, repo, fold_one=lambda slug: folds.fold(store, slug))
    if cursor is None:  # the first page: a run no longer on it needs no fold kept
        folds.forget_others([r.slug for r in page.runs])
    rows = [
        {
            "slug": r.slug,
            "state": r.state,
            "stateNote": r.state_note,
            "repo": r.repo,
            "id": r.pr,
            "url": r.url,  # a PR's: its id is a number ("#7"), else a branch's name
            "title": r.title,
            "rounds": r.rounds,
            "findings": r.total_findings,
            "open": r.open,
            "spentUsd": r.spent_usd,
            "started": r.started,
            "updated": r.updated,
        }
        for r in page.runs
    ]
    rows.sort(key=lambda r: state_rank(str(r["state"])))  # stable: newest first within a state
    skipped = [{"slug": slug, "reason": why} for slug, why in page.skipped]
    return {"runs": rows, "skipped": skipped, "next": page.next}


def _ts(ts: str | None) -> datetime | None:
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None


def _since(ts: str | None, start: datetime | None) -> float | None:
    t = _ts(ts)
    if t is None or start is None:
        return None
    return round((t - start).total_seconds(), 1)


def _bars(events: list[Event], start: datetime | None) -> list[dict[str, Any]]:
    """Every agent run's bar, in launch order, from the log alone: ended by its report or its action's
    end, or ``abandoned`` (put back, launched again, the run resumed)."""
    bars: dict[str, dict[str, Any]] = {}  # each key's latest attempt
    every: list[dict[str, Any]] = []  # every attempt, in launch order

    def close(bar: dict[str, Any], ts: str, outcome: str) -> None:
        if bar["end"] is None:
            bar["end"], bar["outcome"] = _since(ts, start), outcome

    for e in events:
        match e:
            case AgentLaunch():
                key = e.key or f"{e.agent}@{e.round}:{e.role}"
                if (earlier := bars.get(key)) is not None and earlier["end"] is None:
                    # Launched again with no end of the earlier run: its worker died (or gave it back) and
                    # another took the action; that run ended, at the latest, where this one began.
                    close(earlier, e.ts, "abandoned")
                    earlier["state"] = "abandoned"
                bars[key] = {
                    "key": key,
                    "agent": e.agent,
                    "role": e.role,
                    "round": e.round,
                    "finding": e.finding,
                    "start": _since(e.ts, start),
                    "end": None,
                    "outcome": None,
                    "state": "done",
                }
                every.append(bars[key])
            case ActionDeferred():
                if (bar := bars.get(e.key)) is not None and bar["end"] is None:
                    close(bar, e.ts, f"put back: {e.reason}")  # a rate limit: its next attempt launches anew
                    bar["state"] = "abandoned"
            case AgentReport():
                key = e.key or f"{e.agent}@{e.round}:{e.role}"
                if key in bars:
                    close(bars[key], e.ts, e.verdict)
            case ReplyAnswered():
                for b in reversed(every):
                    if b["role"] == "reply" and b["agent"] == e.agent and b["round"] == e.round:
                        close(b, e.ts, e.verdict)
                        break
            case ActionDone():
                if e.key in bars:
                    close(bars[e.key], e.ts, "done" if e.ok else "error")
            case RunResumed():
                for b in every:
                    if b["end"] is None:
                        b["state"] = "abandoned"
            case _:
                pass
    return every


def _end_open_bars(
    s: RunState, every: list[dict[str, Any]], ticks: list[AgentAlive], *, live: bool, now_s: float
) -> None:
    """Give each bar with no end one: ``running`` up to now while its action is in flight in a live run,
    else ``abandoned`` as long as its latest liveness tick said."""
    latest = {t.key or f"{t.agent}@{t.round}": t for t in ticks}
    for b in every:
        if b["end"] is not None:
            continue
        key = b["key"]
        t = latest.get(key) or latest.get(f"{b['agent']}@{b['round']}")
        a = s.actions.get(key)
        if b["state"] != "abandoned" and live and (a is None or not a.done):
            b["state"], b["end"] = "running", max(now_s, b["start"] or 0.0)
        else:
            b["state"] = "abandoned"
            b["end"] = (b["start"] or 0.0) + (t.seconds if t else 0.0)
        if t is not None:
            b["alive"] = {"seconds": t.seconds, "quietSeconds": t.quiet_seconds}


def timeline(s: RunState, events: list[Event], ticks: list[AgentAlive], now: datetime) -> dict[str, Any]:
    """One lane per agent, one bar per agent run in seconds since the run's first event: from its
    ``agent.launch`` to its report or its action's end. A bar with no end is ``running`` while its action
    is still in flight in a live run, else ``abandoned`` (its worker died, the run was resumed or ended);
    its length then is what its latest liveness tick said. An action's agent launched again keeps a bar
    per launch: the earlier one ``abandoned``, ending where it was put back (a rate limit) or, its worker
    gone, where the next began."""
    start = _ts(s.first_ts)
    every = _bars(events, start)
    live = s.state not in TERMINAL_STATES
    now_s = round((now - start).total_seconds(), 1) if start else 0.0
    _end_open_bars(s, every, ticks, live=live, now_s=now_s)
    lanes: dict[str, list[dict[str, Any]]] = {}
    for b in every:
        lanes.setdefault(b["agent"], []).append(b)
    end = now_s if live else (_since(s.last_ts, start) or 0.0)
    span = max([end, *(b["end"] or 0.0 for b in every)])
    return {
        "seconds": span,
        "live": live,
        "lanes": [{"agent": agent, "bars": lane} for agent, lane in lanes.items()],
        "marks": [{"at": _since(r.started_at, start), "label": f"round {r.n}"} for r in s.rounds],
    }


def rounds(s: RunState, now: datetime) -> list[dict[str, Any]]:
    """A card per round: its tree and each reviewer's verdict (a running one's time: its latest tick, else
    the time since its launch)."""

    def elapsed(seat: Any) -> float:
        launched = _ts(seat.launched_at)
        if seat.state == "running" and not seat.seconds and launched is not None:
            return round(max(0.0, (now - launched).total_seconds()), 1)
        return float(seat.seconds)

    return [
        {
            "n": r.n,
            "sha": r.sha,
            "ended": r.ended,
            "startedAt": r.started_at,
            "prompt": r.prompt_file,
            "verdicts": [
                {
                    "agent": seat.agent,
                    "state": seat.state,
                    "summary": seat.summary,
                    "seconds": elapsed(seat),
                    "quietSeconds": seat.quiet_seconds,
                    "error": seat.error,
                    "rawFile": seat.raw_file,
                    "wrote": seat.wrote,
                }
                for seat in r.agents.values()
            ],
        }
        for r in s.rounds
    ]


def _report_item(e: AgentReport) -> dict[str, Any]:
    """A reviewer's report, as the conversation shows it."""
    return {
        "kind": "report",
        "ts": e.ts,
        "round": e.round,
        "verdict": e.verdict,
        "summary": e.summary,
        "text": e.report,
        "artifact": e.raw_file,
        "error": e.error,
    }


def _finding_item(e: FindingRaised) -> dict[str, Any]:
    """A finding the reviewer raised, as the conversation shows it."""
    return {
        "kind": "finding",
        "ts": e.ts,
        "round": e.round,
        "id": e.id,
        "text": e.claim,
        "loc": e.loc,
    }


def _verdict_item(e: FindingResolved) -> dict[str, Any]:
    """The jury's verdict on a finding, as the conversation shows it."""
    return {
        "kind": "verdict",
        "ts": e.ts,
        "id": e.id,
        "verdict": e.verdict,
        "text": e.reason,
        "who": e.who,
    }


def _reply_item(e: ReplySent) -> dict[str, Any]:
    """A reply the jury sent the reviewer, as the conversation shows it."""
    return {
        "kind": "reply",
        "ts": e.ts,
        "round": e.round,
        "text": e.text,
        "findings": e.findings,
        "resumed": e.resumed,
    }


def _answer_item(e: ReplyAnswered) -> dict[str, Any]:
    """The reviewer's answer to a reply, with its contests, as the conversation shows it."""
    return {
        "kind": "answer",
        "ts": e.ts,
        "round": e.round,
        "verdict": e.verdict,
        "text": e.report,
        "error": e.error,
        "contests": [c.wire() for c in e.contests],
    }


def _commit_item(e: CommitPushed) -> dict[str, Any]:
    """A commit that fixed one of the reviewer's findings, as the conversation shows it."""
    return {
        "kind": "commit",
        "ts": e.ts,
        "id": e.finding,
        "sha": e.sha,
        "text": e.subject,
        "pushed": e.pushed,
        "branch": e.branch,
    }


def conversations(s: RunState, events: list[Event]) -> list[dict[str, Any]]:
    """Each reviewer's exchange with the jury, in log order: its reports and findings, the verdicts on
    them, the replies it was sent and its answers, the contests, and the commits that fixed its findings."""
    owner: dict[str, str] = {}
    talks: dict[str, list[dict[str, Any]]] = {name: [] for name in (s.config.reviewers if s.config else [])}

    def say(agent: str, item: dict[str, Any]) -> None:
        talks.setdefault(agent, []).append(item)

    for e in events:
        match e:
            case AgentReport() if e.role == "reviewer":
                say(e.agent, _report_item(e))
            case FindingRaised():
                owner[e.id] = e.agent
                say(e.agent, _finding_item(e))
            case FindingResolved() if e.id in owner:
                say(owner[e.id], _verdict_item(e))
            case FindingTurn() if e.id in owner:
                say(owner[e.id], {"kind": "turn", "ts": e.ts, "id": e.id, "who": e.who, "text": e.text})
            case ReplySent():
                say(e.agent, _reply_item(e))
            case ReplyAnswered():
                say(e.agent, _answer_item(e))
            case CommitPushed() if e.finding in owner:
                say(owner[e.finding or ""], _commit_item(e))
            case _:
                pass
    return [{"agent": agent, "items": items} for agent, items in talks.items()]


def findings(s: RunState) -> list[dict[str, Any]]:
    """Every finding with its verdict, proof (verification runs and table), second opinion and cost."""
    out = []
    for f in s.findings.values():
        doc = f.wire()
        doc["refutation"] = f.refutation.model_dump(mode="json") if f.refutation is not None else None
        out.append(doc)
    return out


def spend(s: RunState) -> dict[str, Any]:
    return {
        "totalUsd": s.total_spent,
        "byAgent": dict(sorted(s.spent.items())),
        "reservedUsd": round(sum(s.reserved.values()), 6),
        "unknownCalls": s.unknown_costs,
        "budgetUsd": s.config.budget if s.config else None,
        "budgetRefused": s.budget_refused,
        "byFinding": {f.id: f.cost_usd for f in s.findings.values() if f.cost_usd},
    }


def artifacts(s: RunState) -> list[str]:
    """The artifact names the run's events mention (prompts, agents' output, patches)."""
    names: list[str] = []
    for r in s.rounds:
        names += [r.prompt_file] if r.prompt_file else []
        for seat in r.agents.values():
            if seat.raw_file:
                names += [seat.raw_file, seat.raw_file.replace(".stdout.txt", ".stderr.txt")]
    names += [f.patch for f in s.findings.values() if f.patch]
    return list(dict.fromkeys(names))


def run_page(slug: str, log: LogRead, ticks: list[AgentAlive], now: datetime | None = None) -> dict[str, Any]:
    """Everything the run page shows. ``position`` is where its live events resume."""
    s = folded(slug, log.events, ticks)
    now = now or datetime.now(UTC)
    cfg = s.config
    return {
        "slug": slug,
        "position": log.position,
        "state": s.state,
        "terminal": s.state in TERMINAL_STATES,
        "cancelRequested": s.cancel_requested,
        "target": s.target.wire(),
        "config": None
        if cfg is None
        else {
            "reviewers": cfg.reviewers,
            "judge": cfg.judge,
            "rounds": cfg.rounds,
            "refuter": cfg.refuter,
            "budget": cfg.budget,
            "notes": cfg.config_notes,
        },
        "events": s.events,
        "started": s.first_ts,
        "updated": s.last_ts,
        "timeline": timeline(s, log.events, ticks, now),
        "rounds": rounds(s, now),
        "conversations": conversations(s, log.events),
        "findings": findings(s),
        "finalCheck": s.final_refutation.model_dump(mode="json") if s.final_refutation is not None else None,
        "commits": [c.wire() for c in s.commits],
        "spend": spend(s),
        "toolRefusals": s.tool_refusals,
        "published": [e.wire() for e in log.events if isinstance(e, RunPublished)],
        "artifacts": artifacts(s),
    }
