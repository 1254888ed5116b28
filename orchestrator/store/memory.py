"""The live store in memory: ``MemoryStore``, a ``LiveStore`` twin of ``RedisStore`` for one process.

It exists so that ``coordinate``, ``run_task`` and ``reap`` can be tested on their own, without Redis or
Celery: the same contract tests run it beside ``RedisStore`` (``tests/integration/test_store_contract.py``),
so a test that passes on the twin says something about the fleet. What the Lua scripts make atomic in
Redis is done here under one lock; what expires in Redis (an ended run, a cancel flag, a sent mark, the
run's lock) expires by ``clock``, which a test moves by hand (``ManualClock``) instead of waiting.

Events are kept as their JSON and parsed on every read, as in Redis: a reader never shares an object with
a writer, and an event that cannot round-trip fails here as it would in the fleet.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from orchestrator.domain import AgentAlive, Event, dump_event, parse_event
from orchestrator.errors import StoreError
from orchestrator.store.base import (
    CANCEL_TTL,
    SENT_TTL,
    SWEEP_TTL,
    PullHead,
    SentMark,
    SummaryPage,
    SweepClaim,
    SweptPR,
    SweptStart,
    Tail,
    alive_field,
    cap_bytes,
    check_artifact_name,
    check_slug,
    put_each_artifact,
)
from orchestrator.store.paging import page_of, parse_summary
from orchestrator.summary import RunSummary

log = structlog.get_logger()

Clock = Callable[[], float]  # epoch seconds, like time.time
_V = TypeVar("_V")


class ManualClock:
    """A clock that moves only when told: the twins' TTLs, driven by a test instead of by waiting."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward (never back: a TTL does not come back to life)."""
        if seconds < 0:
            raise ValueError(f"a clock only moves forward, not by {seconds}")
        self.now += seconds


@dataclass
class _Run:
    """Everything the store keeps of one slug; dropped whole when its retention deadline passes."""

    registered: tuple[float, int] | None = None  # (creation time, tie-break), None: not in the index
    events: list[str] = field(default_factory=list)  # event JSON, in append order
    eids: set[str] = field(default_factory=set)
    origin: str | None = None
    artifacts: dict[str, bytes] = field(default_factory=dict)
    state: str | None = None
    snapshot: str | None = None
    alive: dict[str, str] = field(default_factory=dict)  # agent run -> its latest tick's JSON
    expires_at: int | None = None  # the retention deadline of an ended run


class MemoryStore:
    """A ``LiveStore`` in this process's memory (see the module docstring). Thread-safe."""

    def __init__(self, clock: Clock = time.time, artifact_cap: int = 8 * 1024 * 1024) -> None:
        self.clock = clock
        self.artifact_cap = artifact_cap
        self._cond = threading.Condition()
        self._runs: dict[str, _Run] = {}
        self._order = itertools.count()
        self._locks: dict[str, tuple[str, float]] = {}  # slug -> (holder token, expiry by clock)
        self._active: set[str] = set()
        self._cancel: dict[str, float] = {}  # slug -> expiry
        self._kicks: dict[str, float] = {}  # slug -> expiry of its pending-kick mark
        # (slug, key) -> (value, expiry), as the three keys of an action's sent mark in Redis: when it is
        # due (sent, plus its countdown), taken (when), resent (how often)
        self._sent: dict[tuple[str, str], tuple[float, float]] = {}
        self._taken: dict[tuple[str, str], tuple[float, float]] = {}
        self._resent: dict[tuple[str, str], tuple[int, float]] = {}
        self._heads: dict[PullHead, tuple[str, float]] = {}  # a PR head -> (the run holding it, expiry)
        # a PR (forge, repo, number) -> (its swept runs: (started at, order, slug)), expiry
        self._pr_runs: dict[tuple[str, str, int], tuple[list[tuple[float, int, str]], float]] = {}
        self._summaries: dict[str, str] = {}  # slug -> its summary's JSON: outlives the run (no expiry)

    def close(self) -> None:
        """Nothing to close (``RedisStore`` closes its connections)."""

    # -- inside the lock -----------------------------------------------------------------------------------

    def _live(self, slug: str) -> _Run | None:
        """The run's record, forgetting it first when its retention deadline has passed."""
        run = self._runs.get(slug)
        if run is not None and run.expires_at is not None and run.expires_at <= self.clock():
            del self._runs[slug]
            self._cancel.pop(slug, None)
            self._kicks.pop(slug, None)
            for marks in (self._sent, self._taken, self._resent):
                for mark in [m for m in marks if m[0] == slug]:
                    del marks[mark]
            return None
        return run

    def _run(self, slug: str) -> _Run:
        run = self._live(slug)
        if run is None:
            run = self._runs[slug] = _Run()
        return run

    def _register(self, run: _Run) -> bool:
        if run.registered is not None:
            return False
        run.registered = (self.clock(), next(self._order))
        return True

    def _events(self, slug: str, after: int) -> list[Event]:
        run = self._live(slug)
        raws = run.events[max(after, 0) :] if run is not None else []
        return [event for raw in raws if (event := parse_event(raw)) is not None]

    # -- runs and events -----------------------------------------------------------------------------------

    def create_run(self, slug: str) -> bool:
        """Register the run (creation time: the clock, ties broken by order); False if it was there."""
        check_slug(slug)
        with self._cond:
            return self._register(self._run(slug))

    def runs(self) -> list[str]:
        """Registered slugs, newest first; runs past their retention deadline are forgotten first."""
        with self._cond:
            known = [(run.registered, slug) for slug in list(self._runs) if (run := self._live(slug))]
        return [slug for _, slug in sorted(((r, s) for r, s in known if r is not None), reverse=True)]

    def exists(self, slug: str) -> bool:
        """Whether the run is registered (and not past its retention deadline)."""
        check_slug(slug)
        with self._cond:
            run = self._live(slug)
            return run is not None and run.registered is not None

    def append(self, slug: str, events: Sequence[Event]) -> int:
        """Append the events with unseen eids and register the run, in one step under the lock."""
        check_slug(slug)
        rows = [(event.eid, dump_event(event)) for event in events]
        with self._cond:
            run = self._run(slug)
            self._register(run)
            appended = 0
            for eid, raw in rows:
                if eid in run.eids:
                    continue
                run.eids.add(eid)
                run.events.append(raw)
                appended += 1
            if appended and run.origin is None:
                run.origin = uuid.uuid4().hex
            if appended:
                self._cond.notify_all()
        return appended

    def read(self, slug: str, after: int = 0) -> list[Event]:
        """The run's events after the first ``after``."""
        check_slug(slug)
        with self._cond:
            return self._events(slug, after)

    def wait(self, slug: str, after: int, timeout: float) -> list[Event]:
        """``read(after)``; if empty, wait (real time, not the clock) for an append or the timeout."""
        check_slug(slug)
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (found := self._events(slug, after)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._cond.wait(remaining)
            return found

    def read_after(self, slug: str, position: str | None) -> list[tuple[str, Event]] | None:
        """The events after ``position`` (the count of entries it covers, as a string; None: all), each
        with its own position; None when the log holds fewer entries than that (or it is not a count)."""
        check_slug(slug)
        with self._cond:
            run = self._live(slug)
            raws = run.events if run is not None else []
        start = 0 if position is None else int(position) if position.isdigit() else -1
        if start < 0 or start > len(raws) or (position is not None and start == 0):
            return None
        found = ((str(n), parse_event(raw)) for n, raw in enumerate(raws[start:], start=start + 1))
        return [(n, event) for n, event in found if event is not None]

    # -- the coordinator's snapshot and the agents' liveness ---------------------------------------------

    def write_snapshot(self, slug: str, doc: dict[str, Any]) -> None:
        """Replace the snapshot (kept as JSON)."""
        check_slug(slug)
        data = json.dumps(doc, ensure_ascii=False)
        with self._cond:
            self._run(slug).snapshot = data

    def read_snapshot(self, slug: str) -> dict[str, Any] | None:
        """The snapshot, or None."""
        check_slug(slug)
        with self._cond:
            run = self._live(slug)
            raw = run.snapshot if run is not None else None
        return json.loads(raw) if raw is not None else None

    def reap_digests(self, slugs: Sequence[str]) -> list[dict[str, Any] | None]:
        """Each run's snapshot's ``reap`` digest when nothing was appended after the snapshot."""
        found: list[dict[str, Any] | None] = []
        with self._cond:
            for slug in slugs:
                origin, doc, tail = self.read_from_snapshot(slug)
                ok = doc is not None and tail == [] and origin is not None and doc.get("origin") == origin
                digest = doc.get("reap") if ok and doc is not None else None
                found.append(digest if isinstance(digest, dict) else None)
        return found

    def read_from_snapshots(
        self, slugs: Sequence[str]
    ) -> list[tuple[str | None, dict[str, Any] | None, Tail]]:
        """``read_from_snapshot`` of each run, under one hold of the lock."""
        with self._cond:
            return [self.read_from_snapshot(slug) for slug in slugs]

    def read_from_snapshot(self, slug: str) -> tuple[str | None, dict[str, Any] | None, Tail]:
        """``origin``, ``read_snapshot`` and the events after the snapshot's ``position``."""
        origin, doc = self.origin(slug), self.read_snapshot(slug)
        position = doc.get("position") if doc is not None else None
        tail = self.read_after(slug, position) if isinstance(position, str) and position else None
        return origin, doc, tail

    def put_alive(self, slug: str, event: AgentAlive) -> None:
        """Keep the tick as its agent run's latest."""
        check_slug(slug)
        raw = dump_event(event)
        with self._cond:
            self._run(slug).alive[alive_field(event)] = raw

    def alive(self, slug: str) -> list[AgentAlive]:
        """Every agent run's latest tick, oldest first."""
        check_slug(slug)
        with self._cond:
            run = self._live(slug)
            raws = list(run.alive.values()) if run is not None else []
        ticks = [e for raw in raws if isinstance(e := parse_event(raw), AgentAlive)]
        return sorted(ticks, key=lambda e: (e.ts, e.eid))

    # -- artifacts and state -------------------------------------------------------------------------------

    def put_artifact(self, slug: str, name: str, data: bytes) -> None:
        """Store the artifact; data over ``artifact_cap`` is cut, ending with a marker line (as in Redis)."""
        check_slug(slug)
        check_artifact_name(name)
        stored, dropped = cap_bytes(bytes(data), self.artifact_cap)
        if dropped:
            log.warning("store.artifact_truncated", slug=slug, name=name, size=len(data), dropped=dropped)
        with self._cond:
            self._run(slug).artifacts[name] = stored

    def put_artifacts(self, slug: str, artifacts: Mapping[str, bytes]) -> None:
        """``put_artifact`` of each; a name refused is refused before any is written, as in Redis."""
        put_each_artifact(self.put_artifact, slug, artifacts)

    def get_artifact(self, slug: str, name: str) -> bytes | None:
        """The artifact's bytes, or None."""
        check_slug(slug)
        check_artifact_name(name)
        with self._cond:
            run = self._live(slug)
            return run.artifacts.get(name) if run is not None else None

    def write_state(self, slug: str, state: dict[str, Any]) -> None:
        """Replace the run's fold (kept as JSON, so the caller's dict is never shared)."""
        check_slug(slug)
        data = json.dumps(state, ensure_ascii=False)
        with self._cond:
            self._run(slug).state = data

    def write_fold(self, slug: str, state: dict[str, Any], snapshot: dict[str, Any]) -> None:
        """Replace the run's fold and its snapshot under one hold of the lock."""
        check_slug(slug)
        data, snap = json.dumps(state, ensure_ascii=False), json.dumps(snapshot, ensure_ascii=False)
        with self._cond:
            run = self._run(slug)
            run.state, run.snapshot = data, snap

    def read_state(self, slug: str) -> dict[str, Any] | None:
        """The run's fold, or None."""
        check_slug(slug)
        with self._cond:
            run = self._live(slug)
            raw = run.state if run is not None else None
        return json.loads(raw) if raw is not None else None

    @contextmanager
    def lock(self, slug: str, timeout: float = 60.0) -> Iterator[None]:
        """Wait up to ``timeout`` real seconds for the run's lock (else StoreError); it expires ``timeout``
        seconds of the clock after it is taken, as Redis's does, so a test can let a holder's lock lapse."""
        check_slug(slug)
        token = uuid.uuid4().hex
        deadline = time.monotonic() + timeout
        with self._cond:
            while (held := self._locks.get(slug)) is not None and held[1] > self.clock():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise StoreError(f"run {slug!r} is locked by another holder")
                self._cond.wait(remaining)
            self._locks[slug] = (token, self.clock() + timeout)
        try:
            yield
        finally:
            with self._cond:
                held = self._locks.get(slug)
                if held is not None and held[0] == token:
                    del self._locks[slug]
                    self._cond.notify_all()
                else:
                    log.warning("store.lock_lost", slug=slug, timeout=timeout)

    # -- retention -----------------------------------------------------------------------------------------

    def origin(self, slug: str) -> str | None:
        """A random id given to the log when its first event was appended; None without events."""
        check_slug(slug)
        with self._cond:
            run = self._live(slug)
            return run.origin if run is not None else None

    def expire_run(self, slug: str, retention: int) -> int:
        """Set the run's deadline once, ``retention`` seconds from now by the clock; return it."""
        check_slug(slug)
        with self._cond:
            run = self._run(slug)
            if run.expires_at is None:
                run.expires_at = int(self.clock()) + retention
            return run.expires_at

    def keep_run(self, slug: str) -> bool:
        """Forget the run's deadline; whether it had one."""
        check_slug(slug)
        with self._cond:
            run = self._live(slug)
            if run is None or run.expires_at is None:
                return False
            run.expires_at = None
            return True

    # -- the control plane's marks -------------------------------------------------------------------------

    def activate(self, slug: str) -> None:
        """Add to the active set, and forget the run's deadline (``keep_run``)."""
        check_slug(slug)
        with self._cond:
            self._active.add(slug)
        self.keep_run(slug)

    def deactivate(self, slug: str) -> None:
        """Remove from the active set."""
        check_slug(slug)
        with self._cond:
            self._active.discard(slug)

    def active_runs(self) -> list[str]:
        """The active set, sorted."""
        with self._cond:
            return sorted(self._active)

    def set_cancel_flag(self, slug: str, ttl: int = CANCEL_TTL) -> None:
        """Set the run's cancel flag until ``ttl`` seconds from now (by the clock)."""
        check_slug(slug)
        with self._cond:
            self._cancel[slug] = self.clock() + ttl

    def clear_cancel_flag(self, slug: str) -> None:
        """Drop the run's cancel flag (a resume)."""
        check_slug(slug)
        with self._cond:
            self._cancel.pop(slug, None)

    def cancel_flagged(self, slug: str) -> bool:
        """Whether the run's cancel flag is set and not expired."""
        check_slug(slug)
        with self._cond:
            self._live(slug)
            expiry = self._cancel.get(slug)
            return expiry is not None and expiry > self.clock()

    def claim_kick(self, slug: str, ttl: float) -> bool:
        """Set the pending-kick mark until the clock passes ``ttl`` seconds on, unless it is set."""
        check_slug(slug)
        with self._cond:
            now = self.clock()
            if self._kicks.get(slug, 0.0) > now:
                return False
            self._kicks[slug] = now + ttl
            return True

    def claim_kicks(self, slugs: Sequence[str], ttl: float) -> list[bool]:
        """``claim_kick`` of each run, under one hold of the lock."""
        with self._cond:
            return [self.claim_kick(slug, ttl) for slug in slugs]

    def clear_kick(self, slug: str) -> None:
        check_slug(slug)
        with self._cond:
            self._kicks.pop(slug, None)

    def mark_sent(self, slug: str, key: str, ttl: int = SENT_TTL, *, delay: float = 0.0) -> None:
        """Remember the clock's time plus ``delay`` as when the action's task is due; forget its taken and
        resent marks."""
        check_slug(slug)
        with self._cond:
            now = self.clock()
            self._sent[(slug, key)] = (now + max(0.0, delay), now + ttl)
            self._taken.pop((slug, key), None)
            self._resent.pop((slug, key), None)

    def mark_resent(self, slug: str, key: str, ttl: int = SENT_TTL) -> int:
        """Sent again, due now, one more resend (the taken mark stays)."""
        check_slug(slug)
        with self._cond:
            now = self.clock()
            self._sent[(slug, key)] = (now, now + ttl)
            count = self._unexpired(self._resent, (slug, key), now)
            self._resent[(slug, key)] = (n := (count or 0) + 1, now + ttl)
            return n

    def mark_taken(self, slug: str, key: str, ttl: int = SENT_TTL) -> None:
        """Remember that a worker took the action's task now."""
        check_slug(slug)
        with self._cond:
            now = self.clock()
            self._taken[(slug, key)] = (now, now + ttl)

    def sent_mark(self, slug: str, key: str) -> SentMark | None:
        """The action's sent mark by the clock; None without one (never sent, or it expired)."""
        check_slug(slug)
        with self._cond:
            self._live(slug)
            now = self.clock()
            due = self._unexpired(self._sent, (slug, key), now)
            if due is None:
                return None
            taken = self._unexpired(self._taken, (slug, key), now) is not None
            return SentMark(now - due, taken, self._unexpired(self._resent, (slug, key), now) or 0)

    def sent_marks(self, slug: str, action_keys: Sequence[str]) -> list[SentMark | None]:
        """``sent_mark`` of each action, under one hold of the lock (all at once, as Redis's MGET)."""
        check_slug(slug)
        with self._cond:
            return [self.sent_mark(slug, key) for key in action_keys]

    def sent_marks_of(self, wanted: Sequence[tuple[str, Sequence[str]]]) -> list[list[SentMark | None]]:
        """``sent_marks`` of each run, under one hold of the lock."""
        with self._cond:
            return [self.sent_marks(slug, action_keys) for slug, action_keys in wanted]

    def sent_age(self, slug: str, key: str) -> float | None:
        """Seconds of the clock since the action's task was sent and due (0 while its countdown runs);
        None if never, or the mark expired."""
        mark = self.sent_mark(slug, key)
        return None if mark is None else max(0.0, mark.age)

    @staticmethod
    def _unexpired(
        marks: dict[tuple[str, str], tuple[_V, float]], at: tuple[str, str], now: float
    ) -> _V | None:
        """The value of an unexpired mark (an expired one is dropped)."""
        mark = marks.get(at)
        if mark is None:
            return None
        if mark[1] <= now:
            del marks[at]
            return None
        return mark[0]

    # -- sweeps --------------------------------------------------------------------------------------------

    def _holder(self, head: PullHead) -> str | None:
        held = self._heads.get(head)
        if held is None or held[1] <= self.clock():
            self._heads.pop(head, None)
            return None
        return held[0]

    def _swept_runs(self, head: PullHead) -> list[str]:
        pr = (head.forge, head.repo, head.number)
        entry = self._pr_runs.get(pr)
        if entry is None or entry[1] <= self.clock():
            self._pr_runs.pop(pr, None)
            return []
        return [slug for _, _, slug in sorted(entry[0], reverse=True)]

    def sweep_lookup(self, heads: Sequence[PullHead]) -> list[SweptPR]:
        """Each head's holder and its PR's swept runs (the newest 20), newest first."""
        with self._cond:
            return [SweptPR(self._holder(h), self._swept_runs(h)[:20]) for h in heads]

    def start_swept(self, starts: Sequence[SweptStart], ttl: int = SWEEP_TTL) -> list[SweepClaim]:
        """Each start in one step under the lock, as the Lua script does it in Redis."""
        claims = []
        for start in starts:
            check_slug(start.slug)
            with self._cond:
                holder = self._holder(start.head)
                if holder is not None and holder != start.replace:
                    claims.append(SweepClaim("claimed", holder))
                    continue
                run = self._live(start.slug)
                if run is not None and (run.registered is not None or run.events):
                    claims.append(SweepClaim("taken", None))
                    continue
                now = self.clock()
                self._heads[start.head] = (start.slug, now + ttl)
                h = start.head
                pr = (h.forge, h.repo, h.number)
                kept = self._pr_runs[pr][0] if self._swept_runs(h) else []
                self._pr_runs[pr] = ([*kept, (now, next(self._order), start.slug)], now + ttl)
                self.append(start.slug, start.events)  # registers it too (the condition's lock is an RLock)
                self._active.add(start.slug)
            claims.append(SweepClaim("started", None))
        return claims

    def write_summary(self, slug: str, summary: RunSummary) -> None:
        with self._cond:
            self._summaries[check_slug(slug)] = summary.model_dump_json()

    def read_summary(self, slug: str) -> RunSummary | None:
        with self._cond:
            return parse_summary(slug, self._summaries.get(check_slug(slug)))

    def drop_summary(self, slug: str) -> None:
        with self._cond:
            self._summaries.pop(check_slug(slug), None)

    def summary_page(
        self, limit: int, cursor: str | None = None, state: str | None = None, repo: str | None = None
    ) -> SummaryPage:
        """A page of ``runs`` (``paging.page_of``), scored by creation time as in Redis."""
        with self._cond:
            index = [
                (run.registered[0], slug)
                for slug in list(self._runs)
                if (run := self._live(slug)) is not None and run.registered is not None
            ]
        return page_of(index, self.read_summary, limit, cursor, state, repo)

    def run_states(self, slugs: Sequence[str]) -> dict[str, str | None]:
        """Each run's ``target.state`` from its written fold; ``queued`` without one, None if unknown."""
        states: dict[str, str | None] = {}
        for slug in dict.fromkeys(slugs):
            if not self.exists(slug):
                states[slug] = None
                continue
            doc = self.read_state(slug) or {}
            target = doc.get("target")
            word = target.get("state") if isinstance(target, dict) else None
            states[slug] = word if isinstance(word, str) and word else "queued"
        return states
