"""The store's interfaces: ``EventStore`` (the event log, by the file, Redis and memory stores) and
``LiveStore`` (the log plus the control plane's marks, by the Redis and memory stores).

The stores pass the same contract tests (``tests/integration/test_store_contract.py``); the rules they
must agree on beyond the method signatures live here too (slug and artifact-name validity, the cap on
an artifact's size).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from orchestrator.domain import AgentAlive, Event
from orchestrator.errors import BadName, JuryError, StoreError, UsageError
from orchestrator.summary import RunSummary

SLUG_RE = re.compile(r"[A-Za-z0-9._-]+")

# Files a run directory keeps for the store itself; an artifact may not take their names.
EVENTS_FILE = "events.ndjson"
STATE_FILE = "run.json"
SUMMARY_FILE = "summary.json"
LOCK_FILE = ".lock"
CREATED_FILE = ".created"
RESERVED_NAMES: frozenset[str] = frozenset({EVENTS_FILE, STATE_FILE, SUMMARY_FILE, LOCK_FILE, CREATED_FILE})

CANCEL_TTL = 7 * 86400  # a cancel flag outlives any agent run it must stop
SENT_TTL = 7 * 86400  # a sent mark outlives any action the reaper may still have to hand out again
SWEEP_TTL = 90 * 86400  # a PR head's claim, and a PR's list of swept runs, outlive many nightly sweeps
# A key that keeps no TTL of its own, written for a run whose keys are gone (a copy of a task days after the
# run ended): it expires this much later, which outlives any agent call that reserved and then settles.
LATE_WRITE_TTL = 86400


class SentMark(NamedTuple):
    """What the store knows of the last sending of an action's task, for the reaper (``sent_mark``)."""

    age: float  # seconds since the task was due: sent, plus the countdown it was put back with (below 0
    #             while that countdown runs)
    taken: bool  # a worker took the task (acquired its lease) since it was last sent
    resends: int  # how often the reaper sent it again though nobody had taken it, since it was last sent
    #               otherwise (dispatched, put back, handed back, recovered)


class PullHead(NamedTuple):
    """One head of one PR on one forge: what a sweep's dedupe is keyed by. ``repo`` is the forge's path,
    compared without case (forges do), so build it with ``pull_head``."""

    forge: str
    repo: str
    number: int
    sha: str


def pull_head(forge: str, repo: str, number: int, sha: str) -> PullHead:
    return PullHead(forge, repo.lower(), number, sha)


class SweptPR(NamedTuple):
    """What the store knows of a PR head a sweep looks at: the run that holds the head (None: no run
    has it), and the PR's swept runs (any head), newest first."""

    holder: str | None
    runs: list[str]


class SweptStart(NamedTuple):
    """A run a sweep starts for a PR head: its slug and first events; ``replace``: the ended run whose
    hold on the head it takes over (a retry), else None."""

    head: PullHead
    slug: str
    events: Sequence[Event]
    replace: str | None = None


class SweepClaim(NamedTuple):
    """What became of a ``SweptStart``: ``started`` (the run holds the head and is registered, logged and
    active), ``claimed`` (another run holds the head: ``holder``) or ``taken`` (the slug is in use)."""

    outcome: Literal["started", "claimed", "taken"]
    holder: str | None = None


class SummaryPage(NamedTuple):
    """One page of the run list (``EventStore.summary_page``): each run's slug and summary (None: none
    written, or unreadable: fold the run), newest first, and the next page's cursor (None: the last)."""

    rows: list[tuple[str, RunSummary | None]]
    next: str | None


class RunVanished(StoreError):
    """The run was in the live store and is not any more: its keys expired (``JURY_RETENTION`` after it
    ended) or were deleted. A reader stops here instead of waiting for a log that will not come back."""

    def __init__(self, slug: str, record: Path | None = None) -> None:
        self.slug, self.record = slug, record
        where = f"; its files record: {record}" if record is not None else ""
        super().__init__(
            f"run {slug} is no longer in the store: its keys expired after the retention time "
            f"(JURY_RETENTION) or were deleted{where}"
        )


@runtime_checkable
class EventStore(Protocol):
    """An append-only, deduplicating event log per run, plus its artifacts, fold and lock."""

    def create_run(self, slug: str) -> bool:
        """Register the run in the index; False if it already existed."""
        ...

    def runs(self) -> list[str]:
        """Every known slug, newest first (by creation)."""
        ...

    def exists(self, slug: str) -> bool:
        """Whether the run is registered."""
        ...

    def append(self, slug: str, events: Sequence[Event]) -> int:
        """Atomically append the events whose eid the run has not seen (deduping the batch too).

        Returns how many were appended. Appending to an unknown run registers it.
        """
        ...

    def read(self, slug: str, after: int = 0) -> list[Event]:
        """The run's events in append order, skipping the first ``after``.

        Unparseable or torn entries are skipped (and logged), never fatal; ``after`` counts events, not
        skipped entries. An unknown run reads as empty.
        """
        ...

    def wait(self, slug: str, after: int, timeout: float) -> list[Event]:
        """Like ``read(after)``, but block up to ``timeout`` seconds for at least one event; [] on timeout."""
        ...

    def put_artifact(self, slug: str, name: str, data: bytes) -> None:
        """Store an artifact (``name`` like ``round-1.codex.stdout.txt`` or ``patches/r1-codex-1.patch``)."""
        ...

    def put_artifacts(self, slug: str, artifacts: Mapping[str, bytes]) -> None:
        """``put_artifact`` of each (an agent run's output and errors): in Redis, one round trip."""
        ...

    def get_artifact(self, slug: str, name: str) -> bytes | None:
        """An artifact's bytes, or None if there is none."""
        ...

    def write_state(self, slug: str, state: dict[str, Any]) -> None:
        """Replace the run's fold (``run.json``) atomically."""
        ...

    def read_state(self, slug: str) -> dict[str, Any] | None:
        """The run's fold, or None if none was written (or it is unreadable: fold again from the events)."""
        ...

    def write_summary(self, slug: str, summary: RunSummary) -> None:
        """Replace the run's summary (``orchestrator.summary``): kept with no expiry, after the run's own
        keys or files are gone."""
        ...

    def read_summary(self, slug: str) -> RunSummary | None:
        """The run's summary; None if none was written, or it is unreadable or of another version."""
        ...

    def drop_summary(self, slug: str) -> None:
        """Forget the run's summary: the run is live again (resumed), and a listing folds it."""
        ...

    def summary_page(
        self, limit: int, cursor: str | None = None, state: str | None = None, repo: str | None = None
    ) -> SummaryPage:
        """A page of the runs listed (as ``runs``: expired ones never), newest first, after ``cursor``,
        with their summaries; filtered by ``state`` and ``repo`` (``orchestrator.store.paging``). The
        cost of a page does not grow with the number of runs."""
        ...

    def lock(self, slug: str, timeout: float = 60.0) -> AbstractContextManager[None]:
        """An exclusive per-run lock across processes; not reentrant.

        Waits up to ``timeout`` seconds, then raises StoreError. In Redis the lock also expires
        ``timeout`` seconds after it is taken, so a dead holder cannot keep it forever.
        """
        ...


Tail = list[tuple[str, Event]] | None  # a log's events after a position, each with its own; None: not there


@runtime_checkable
class LiveStore(EventStore, Protocol):
    """The store the workers share while runs are live: the event log plus the control plane's marks.

    The marks are what the coordinator, the reaper and ``jury cancel`` keep beside the log (which runs are
    active, which are to be cancelled, when each action's task was last sent) and the retention of an
    ended run. They are named methods, never raw keys, so ``coordinate``, ``run_task`` and ``reap`` run on
    ``RedisStore`` in a fleet and on ``MemoryStore`` in unit tests alike; both pass the contract suite in
    ``tests/integration/test_store_contract.py``.
    """

    def origin(self, slug: str) -> str | None:
        """An id of the run's log as first written, None when it has no events.

        A reader that saw the log compares it later: None or another id means the log it read is gone
        (expired, deleted, or deleted and begun again by a late writer).
        """
        ...

    def read_after(self, slug: str, position: str | None) -> list[tuple[str, Event]] | None:
        """The run's events after the log position ``position`` (None: from the start), each with its own
        position, in append order; None when ``position`` is not in the log (trimmed, expired, or never
        there), so the caller folds the whole log instead. Unparseable entries are skipped (and logged)."""
        ...

    def write_snapshot(self, slug: str, doc: dict[str, Any]) -> None:
        """Replace the coordinator's snapshot of the run's fold (``orchestrator.fold.snapshot``); written
        under the run's lock, it expires with the run."""
        ...

    def write_fold(self, slug: str, state: dict[str, Any], snapshot: dict[str, Any]) -> None:
        """``write_state`` and ``write_snapshot`` at once (readers see both or neither): a coordinator
        pass's closing write, one round trip."""
        ...

    def read_snapshot(self, slug: str) -> dict[str, Any] | None:
        """The run's snapshot, or None if none was written (or it is unreadable)."""
        ...

    def read_from_snapshot(self, slug: str) -> tuple[str | None, dict[str, Any] | None, Tail]:
        """``origin``, ``read_snapshot`` and ``read_after`` the snapshot's ``position`` at once (the last
        None when there is no snapshot, or its position is no longer in the log): what every reader of a
        run's fold asks first (``orchestrator.run_reader.read_state``), in one round trip."""
        ...

    def reap_digests(self, slugs: Sequence[str]) -> list[dict[str, Any] | None]:
        """For each run, in order, read at once: the ``reap`` digest of its snapshot
        (``workers.fleet.reaping``) when the snapshot is of this log and nothing was appended after its
        position, else None."""
        ...

    def read_from_snapshots(
        self, slugs: Sequence[str]
    ) -> list[tuple[str | None, dict[str, Any] | None, Tail]]:
        """``read_from_snapshot`` of each run, in order, read at once (the reaper reads every active run
        each period: one round trip a batch of runs, not one a run)."""
        ...

    def put_alive(self, slug: str, event: AgentAlive) -> None:
        """Keep ``event`` as the latest liveness tick of its agent (by ``key``, else agent and round), beside
        the log instead of in it: ticks come every few seconds for as long as an agent runs."""
        ...

    def alive(self, slug: str) -> list[AgentAlive]:
        """The latest liveness tick of each agent of the run, oldest first."""
        ...

    def expire_run(self, slug: str, retention: int) -> int:
        """The run ended: everything of it goes ``retention`` seconds after it first ended (the deadline is
        set once; later calls keep it). Returns the deadline, epoch seconds of the store's clock."""
        ...

    def keep_run(self, slug: str) -> bool:
        """The run is live (again): if it was set to expire, it no longer is. Returns whether it was."""
        ...

    def activate(self, slug: str) -> None:
        """Put the run in the active set: the reaper kicks it until it ends. An active run's keys do not
        expire: one set to expire (it ended, then was resumed) is kept (``keep_run``)."""
        ...

    def deactivate(self, slug: str) -> None:
        """Take the run out of the active set (it ended, or its log is gone)."""
        ...

    def active_runs(self) -> list[str]:
        """The slugs of the active set, sorted."""
        ...

    def set_cancel_flag(self, slug: str, ttl: int = CANCEL_TTL) -> None:
        """Ask every worker running an agent of the run to kill it (the flag lasts ``ttl`` seconds)."""
        ...

    def clear_cancel_flag(self, slug: str) -> None:
        """Take the run's cancel flag down: the run is resumed, and its new agents must run."""
        ...

    def cancel_flagged(self, slug: str) -> bool:
        """Whether the run's cancel flag is set."""
        ...

    def claim_kick(self, slug: str, ttl: float) -> bool:
        """Mark a coordinate task of the run as queued, unless one already is: True when this caller is to
        send it. The mark lasts ``ttl`` seconds (a lost message is sent again after it) or until the pass
        starts (``clear_kick``), so a run has at most one coordinate task waiting, however many of its
        actions end or reapers look at it meanwhile."""
        ...

    def claim_kicks(self, slugs: Sequence[str], ttl: float) -> list[bool]:
        """``claim_kick`` of each run, in order, at once (the reaper's batch of runs with nothing in
        flight)."""
        ...

    def clear_kick(self, slug: str) -> None:
        """A coordinate pass of the run starts: whatever happens from now on needs another pass."""
        ...

    def mark_sent(self, slug: str, key: str, ttl: int = SENT_TTL, *, delay: float = 0.0) -> None:
        """Remember that the task of the run's action ``key`` was enqueued now, due in ``delay`` seconds (a
        countdown), and that nobody has taken it yet (the ``taken`` and ``resends`` of its mark start over).
        Kept ``ttl`` seconds."""
        ...

    def mark_resent(self, slug: str, key: str, ttl: int = SENT_TTL) -> int:
        """The reaper enqueued the action's task again though nobody had taken it (its message may be lost):
        sent now, due now, one more resend. A ``taken`` mark set meanwhile stays. Returns the resends."""
        ...

    def mark_taken(self, slug: str, key: str, ttl: int = SENT_TTL) -> None:
        """A worker took the action's task (acquired its lease): a lease that lapses from now on without a
        done marker was a worker's that died, not a message still queued."""
        ...

    def sent_mark(self, slug: str, key: str) -> SentMark | None:
        """The action's sent mark by the store's clock; None if it was never sent (or the mark expired)."""
        ...

    def sent_marks(self, slug: str, action_keys: Sequence[str]) -> list[SentMark | None]:
        """``sent_mark`` of each of the run's ``action_keys``, in their order, read at once (the reaper
        reads every action in flight of every active run each period: one round trip a run, not one an
        action)."""
        ...

    def sent_marks_of(self, wanted: Sequence[tuple[str, Sequence[str]]]) -> list[list[SentMark | None]]:
        """``sent_marks`` of each (run, its action keys), in order, read at once: the reaper's batch."""
        ...

    def sent_age(self, slug: str, key: str) -> float | None:
        """Seconds since the action's task was last enqueued and due, by the store's clock, never below 0
        (0 while its countdown runs); None if never (or the mark has expired)."""
        ...

    def sweep_lookup(self, heads: Sequence[PullHead]) -> list[SweptPR]:
        """For each PR head (in order): the run that holds it and the PR's swept runs, newest first."""
        ...

    def start_swept(self, starts: Sequence[SweptStart], ttl: int = SWEEP_TTL) -> list[SweepClaim]:
        """Start each run unless its PR head is held, each atomically: the head is claimed for the slug
        (for ``ttl`` seconds) and the run joins the PR's swept runs, is registered, gets its first events
        and is activated, all or nothing. A head held by a run other than ``replace`` is ``claimed``; a
        slug already registered is ``taken`` (nothing changes). In order, one result per start."""
        ...

    def run_states(self, slugs: Sequence[str]) -> dict[str, str | None]:
        """Each run's state as its last written fold says (``queued`` for a registered run without one
        yet); None for a run the store does not hold (never, or its keys expired)."""
        ...


def alive_field(event: AgentAlive) -> str:
    """The field an agent's latest tick is kept under: one per agent run (its action key, else its agent
    and round), so a tick replaces the one before it."""
    return event.key or f"{event.agent}@{event.round}"


def check_slug(slug: str) -> str:
    """``slug`` if it is a valid run slug (``[A-Za-z0-9._-]+``, not ``.`` or ``..``), else BadName."""
    if not isinstance(slug, str) or not SLUG_RE.fullmatch(slug) or slug in {".", ".."}:
        raise BadName(f"invalid run slug {slug!r}: use letters, digits, '.', '_' and '-'")
    return slug


def check_artifact_name(name: str) -> str:
    """``name`` if it is a safe relative artifact path, else BadName (a StoreError).

    Refused: empty names, absolute paths, backslashes, NUL, ``.``/``..``/empty components, and the
    names the store keeps for itself (``events.ndjson``, ``run.json``, ``.lock``, ``.created``).
    """
    if not isinstance(name, str) or not name:
        raise BadName("empty artifact name")
    if name.startswith("/") or "\\" in name or "\x00" in name:
        raise BadName(f"invalid artifact name {name!r}: must be a relative path with '/' separators")
    parts = name.split("/")
    if any(part in {"", ".", ".."} for part in parts):
        raise BadName(f"invalid artifact name {name!r}: no '..', '.' or empty path components")
    if name in RESERVED_NAMES:
        raise BadName(f"invalid artifact name {name!r}: reserved by the store")
    return name


def put_each_artifact(
    put: Callable[[str, str, bytes], None], slug: str, artifacts: Mapping[str, bytes]
) -> None:
    """``put_artifacts`` for a store that writes one artifact at a time (``put``): every name is checked
    before any is written, so a refused name leaves none of them stored, as Redis's one MULTI does."""
    for name in artifacts:
        check_artifact_name(name)
    for name, data in artifacts.items():
        put(slug, name, data)


def read_run(store: EventStore, slug: str, record_root: Path | None = None) -> list[Event]:
    """The events of a run someone asked for by name: UsageError when no such run is known, RunVanished
    when the live store lost it, JuryError when its files record holds no readable event (nothing to show
    but nonsense: a run "queued" at no target).

    ``record_root`` is the state directory whose ``runs/<slug>`` holds the files record, when ``store`` is
    the live store (None when ``store`` is that record): a run the files know but the store does not, or a
    registered run whose log is empty, has vanished from the store.
    """
    check_slug(slug)
    record = record_root / "runs" / slug if record_root is not None else None
    kept = record if record is not None and (record / EVENTS_FILE).is_file() else None
    if store.exists(slug):
        events = store.read(slug)
        if events:
            return events
        if record is None:  # the files record itself: its log holds no event it can read
            raise JuryError(
                f"run {slug} has no readable events: its log is empty or unreadable (`jury runs` lists it "
                "as skipped)"
            )
        raise RunVanished(slug, kept)
    if kept is not None:
        raise RunVanished(slug, kept)
    raise UsageError(f"no run named {slug} (see `jury runs`)")


def cap_bytes(data: bytes, cap: int) -> tuple[bytes, int]:
    """``data`` cut to at most ``cap`` bytes, ending with a marker line, and how many bytes were dropped."""
    if len(data) <= cap:
        return data, 0
    dropped = len(data) - cap
    while True:  # the marker's length depends on the count it states: settle both
        marker = f"\n[jury: truncated, {dropped} bytes dropped]\n".encode()
        keep = max(cap - len(marker), 0)
        if len(data) - keep == dropped:
            return data[:keep] + marker, dropped
        dropped = len(data) - keep
