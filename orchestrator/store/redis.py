"""The event log in Redis: a stream per run, a set of seen eids, a sorted-set index of runs.

Every key comes from ``orchestrator.store.keys``. Appends are one Lua script, so the dedupe check, the
stream write and the index registration happen atomically for any number of concurrent writers.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

import redis
import structlog
from pydantic_core import to_json
from redis.exceptions import LockError, RedisError

from orchestrator.domain import AgentAlive, Event, dump_event, parse_event
from orchestrator.errors import StoreError
from orchestrator.store import keys
from orchestrator.store.archive import RunArchived
from orchestrator.store.base import (
    SWEEP_TTL,
    PullHead,
    SweepClaim,
    SweptPR,
    SweptStart,
    Tail,
    alive_field,
    cap_bytes,
    check_artifact_name,
    check_slug,
)
from orchestrator.store.redis_codec import (
    Entries,
    as_bytes,
    json_object,
    reap_digest,
    script_entries,
    snapshot_doc,
    snapshot_record,
    stream_events,
    sweep_claim,
    target_state,
    text,
)
from orchestrator.store.redis_marks import RedisMarks, store_errors
from orchestrator.store.redis_scripts import (
    APPEND_LUA,
    EXPIRE_LUA,
    KEEP_WITH_RUN_LUA,
    LIST_RUNS_LUA,
    PERSIST_LUA,
    PRUNE_LUA,
    READ_FROM_SNAPSHOT_LUA,
    REAP_DIGEST_LUA,
    START_SWEPT_LUA,
)
from orchestrator.store.redis_summaries import RedisSummaries
from orchestrator.store.urls import normalize_url, redact_url, scrub

log = structlog.get_logger()

XRANGE_PAGE = 1000
STREAM_ID_RE = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")

SCAN_COUNT = 5000
PRUNE_BATCH = 1000  # the most expired runs one prune call forgets: each call is short, they loop until done
SWEEP_HISTORY = 20  # a PR's swept runs a lookup returns, newest first


class RedisStore(RedisSummaries, RedisMarks):
    """A ``LiveStore`` in Redis, shared by every host that reaches the server."""

    def __init__(
        self, client: redis.Redis, prefix: str = keys.PREFIX, artifact_cap: int = 8 * 1024 * 1024
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.artifact_cap = artifact_cap
        # Called with (slug, the events an append added) after each append: what this process appended,
        # each event once however often it was sent (a worker's metrics count from here).
        self.observers: list[Callable[[str, list[Event]], None]] = []
        self._append_script = client.register_script(APPEND_LUA)
        self._prune_script = client.register_script(PRUNE_LUA)
        self._list_runs_script = client.register_script(LIST_RUNS_LUA)
        self._expire_script = client.register_script(EXPIRE_LUA)
        self._persist_script = client.register_script(PERSIST_LUA)
        self._start_swept_script = client.register_script(START_SWEPT_LUA)
        self._keep_with_run_script = client.register_script(KEEP_WITH_RUN_LUA)
        self._read_from_snapshot_script = client.register_script(READ_FROM_SNAPSHOT_LUA)
        self._reap_digest_script = client.register_script(REAP_DIGEST_LUA)
        socket_timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
        # A blocking XREAD must return before the socket times out; None: block as long as asked.
        self._block_cap: float | None = socket_timeout / 2 if socket_timeout else None

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()

    # -- runs ----------------------------------------------------------------------------------------------

    def _run_script(self, slug: str, events: Sequence[Event]) -> tuple[int, int]:
        """Run the append script; tell the observers what it appended (new eids only)."""
        args: list[str] = [slug]
        for event in events:
            args += [event.eid, dump_event(event)]
        keys_ = [
            keys.events(self.prefix, slug),
            keys.eids(self.prefix, slug),
            keys.runs_index(self.prefix),
            keys.expiring_runs(self.prefix),
            keys.run_index(self.prefix, slug),
            keys.archived(self.prefix, slug),
        ]
        created, appended, *positions = cast(list[int], self._append_script(keys=keys_, args=args))
        if created < 0:  # its record is in the archive: ``redis_archive.ArchivingStore`` loads it back
            raise RunArchived(f"run {slug!r} is archived: open the store with its archive (JURY_ARCHIVE)")
        if positions and self.observers:
            self._tell(slug, [events[int(i)] for i in positions])
        return int(created), int(appended)

    def _tell(self, slug: str, appended: list[Event]) -> None:
        """Hand the events just appended to each observer; an observer's failure never fails an append."""
        for observer in self.observers:
            try:
                observer(slug, appended)
            except Exception:
                log.exception("store.observer_failed", slug=slug)

    def create_run(self, slug: str) -> bool:
        """Add the run to the index (score: server time); False if it was there."""
        with store_errors("create", check_slug(slug)):
            return self._run_script(slug, [])[0] == 1

    def prune(self, batch: int = PRUNE_BATCH) -> int:
        """Forget every run whose keys have expired (out of the index and the expiry set), ``batch`` at a
        time, each batch one short script, until a batch comes back short. Returns how many were forgotten.
        Listings call it; so does every reaper pass, so the index shrinks even when nobody lists."""
        index, expiring = keys.runs_index(self.prefix), keys.expiring_runs(self.prefix)
        forgotten = 0
        with store_errors("forget the expired runs", "*"):
            while True:
                gone = int(cast(int, self._prune_script(keys=[index, expiring], args=[batch])))
                forgotten += gone
                if gone < batch:
                    return forgotten

    def runs(self) -> list[str]:
        """Slugs from the index, newest first: expired runs are forgotten first (``prune``), and one that
        expires between the prune and the listing is left out (``LIST_RUNS_LUA``), so none is ever listed."""
        with store_errors("list runs", "*"):
            self.prune()
            members, expired = cast(
                list[list[bytes]],
                self._list_runs_script(keys=[keys.runs_index(self.prefix), keys.expiring_runs(self.prefix)]),
            )
        gone = set(expired)
        return [text(m) for m in members if m not in gone]

    def _live_scores(self, pipe: redis.client.Pipeline, slug: str) -> None:
        """Queue the run's index score and retention deadline, after the pipeline's ``TIME``."""
        pipe.zscore(keys.runs_index(self.prefix), slug)
        pipe.zscore(keys.expiring_runs(self.prefix), slug)

    def exists(self, slug: str) -> bool:
        """Whether the run is in the index and its keys have not expired (pruned or not yet)."""
        with store_errors("look up", check_slug(slug)):
            pipe = self.client.pipeline(transaction=True)
            pipe.time()
            self._live_scores(pipe, slug)
            (now, _), score, deadline = pipe.execute()
        return is_live(score, deadline, now)

    # -- events --------------------------------------------------------------------------------------------

    def append(self, slug: str, events: Sequence[Event]) -> int:
        """Append the events with unseen eids, atomically (one Lua script)."""
        with store_errors("append to", check_slug(slug)):
            return self._run_script(slug, events)[1]

    def _entries(self, slug: str) -> Entries:
        """Every entry of the run's stream, paging through XRANGE."""
        key = keys.events(self.prefix, slug)
        entries: Entries = []
        start: bytes | str = "-"
        while True:
            page = cast(Entries, self.client.xrange(key, start, "+", XRANGE_PAGE))
            entries += page
            if len(page) < XRANGE_PAGE:
                return entries
            start = b"(" + as_bytes(page[-1][0])

    def _parse(self, slug: str, entries: Entries) -> list[Event]:
        return [e for e in stream_events(slug, entries, first_line=1) if e is not None]

    def read(self, slug: str, after: int = 0) -> list[Event]:
        """The stream's events after the first ``after`` (unparseable entries skipped and logged)."""
        with store_errors("read", check_slug(slug)):
            return self._parse(slug, self._entries(slug))[max(after, 0) :]

    def wait(self, slug: str, after: int, timeout: float) -> list[Event]:
        """``read(after)``; if empty, XREAD BLOCK past the stream's last entry until news or the timeout."""
        check_slug(slug)
        key = keys.events(self.prefix, slug)
        deadline = time.monotonic() + timeout
        with store_errors("wait on", slug):
            while True:
                entries = self._entries(slug)
                found = self._parse(slug, entries)[max(after, 0) :]
                if found:
                    return found
                last_id: bytes | str = entries[-1][0] if entries else "0-0"
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return []
                    if self._block_cap is not None:
                        remaining = min(remaining, self._block_cap)
                    if self.client.xread({key: last_id}, count=1, block=max(1, int(remaining * 1000))):
                        break  # something new: read again (it may be garbage, or still short of ``after``)

    def read_after(self, slug: str, position: str | None) -> list[tuple[str, Event]] | None:
        """The stream's entries after the id ``position`` (None: all), each with its id; None when no entry
        has that id (trimmed, expired, or from another stream)."""
        check_slug(slug)
        key = keys.events(self.prefix, slug)
        if position is not None and not STREAM_ID_RE.fullmatch(position):
            return None
        with store_errors("read", slug):
            start: bytes | str = "-" if position is None else "(" + position
            if position is None:
                first = self.client.xrange(key, start, "+", XRANGE_PAGE)
            else:  # one round trip: is the position there, and the first page after it
                pipe = self.client.pipeline(transaction=False)
                pipe.xrange(key, position, position, 1)
                pipe.xrange(key, start, "+", XRANGE_PAGE)
                there, first = pipe.execute()
                if not there:
                    return None
            return self._from_page(slug, cast(Entries, first))

    # -- the coordinator's snapshot and the agents' liveness ---------------------------------------------

    def write_snapshot(self, slug: str, doc: dict[str, Any]) -> None:
        """One SET of the snapshot: its position, a newline, its JSON (``READ_FROM_SNAPSHOT_LUA`` reads the
        position without parsing the JSON); an ended run's expiry is kept."""
        check_slug(slug)
        with store_errors("write the snapshot of", slug):
            self.client.set(keys.snapshot(self.prefix, slug), snapshot_record(doc), keepttl=True)

    def read_snapshot(self, slug: str) -> dict[str, Any] | None:
        """The snapshot, or None if absent or unreadable (logged)."""
        with store_errors("read the snapshot of", check_slug(slug)):
            raw = cast(bytes | None, self.client.get(keys.snapshot(self.prefix, slug)))
        return snapshot_doc(slug, raw)

    def read_from_snapshot(self, slug: str) -> tuple[str | None, dict[str, Any] | None, Tail]:
        """The log's origin, the snapshot and the log after its position, in one script
        (``READ_FROM_SNAPSHOT_LUA``); a tail longer than a page is read on by XRANGE."""
        check_slug(slug)
        key = keys.events(self.prefix, slug)
        with store_errors("read", slug):
            first, raw, page = cast(
                list[Any],
                self._read_from_snapshot_script(
                    keys=[key, keys.snapshot(self.prefix, slug)], args=[XRANGE_PAGE]
                ),
            )
            origin = text(first[0][0]) if first else None
            doc = snapshot_doc(slug, raw)
            return origin, doc, None if page is None else self._from_page(slug, script_entries(page))

    def read_from_snapshots(
        self, slugs: Sequence[str]
    ) -> list[tuple[str | None, dict[str, Any] | None, Tail]]:
        """``read_from_snapshot`` of each run: the scripts in one pipeline, one round trip for all (a tail
        longer than a page is read on by XRANGE, run by run)."""
        for slug in slugs:
            check_slug(slug)
        if not slugs:
            return []
        with store_errors("read the snapshots of", "*"):
            pipe = self.client.pipeline(transaction=False)
            for slug in slugs:
                self._read_from_snapshot_script(
                    keys=[keys.events(self.prefix, slug), keys.snapshot(self.prefix, slug)],
                    args=[XRANGE_PAGE],
                    client=pipe,
                )
            answers = cast(list[list[Any]], pipe.execute())
            found: list[tuple[str | None, dict[str, Any] | None, Tail]] = []
            for slug, (first, raw, page) in zip(slugs, answers, strict=True):
                tail = None if page is None else self._from_page(slug, script_entries(page))
                found.append((text(first[0][0]) if first else None, snapshot_doc(slug, raw), tail))
        return found

    def reap_digests(self, slugs: Sequence[str]) -> list[dict[str, Any] | None]:
        """Each run's reaper digest (``REAP_DIGEST_LUA``): one script call, one round trip, for them all."""
        names: list[str] = []
        for slug in slugs:
            names += [keys.events(self.prefix, check_slug(slug)), keys.snapshot(self.prefix, slug)]
        if not slugs:
            return []
        with store_errors("read the digests of", "*"):
            answers = cast(list[list[bytes] | None], self._reap_digest_script(keys=names))
        return [reap_digest(slug, answer) for slug, answer in zip(slugs, answers, strict=True)]

    def _from_page(self, slug: str, page: Entries) -> list[tuple[str, Event]]:
        """The events of ``page``, the first page of the log after a position, and of the pages after it
        (read on while a page is full), each with its id; unparseable entries skipped (and logged)."""
        key = keys.events(self.prefix, slug)
        found: list[tuple[str, Event]] = []
        while True:
            for (entry_id, _), event in zip(page, stream_events(slug, page), strict=True):
                if event is not None:
                    found.append((text(entry_id), event))
            if len(page) < XRANGE_PAGE:
                return found
            start = b"(" + as_bytes(page[-1][0])
            page = cast(Entries, self.client.xrange(key, start, "+", XRANGE_PAGE))

    def put_alive(self, slug: str, event: AgentAlive) -> None:
        """HSET the tick under its agent run's field: the hash holds one tick per agent run (in a MULTI
        that lets it expire with an ended run: a tick may come after the end)."""
        check_slug(slug)
        name = keys.alive(self.prefix, slug)

        def write(pipe: redis.client.Pipeline) -> None:
            pipe.hset(name, alive_field(event), dump_event(event))
            self._with_run(pipe, slug, name, listed=False)

        with store_errors("record a tick of", slug):
            self._multi(write)

    def alive(self, slug: str) -> list[AgentAlive]:
        """Every agent run's latest tick (unparseable ones skipped), oldest first."""
        with store_errors("read the ticks of", check_slug(slug)):
            raw = cast(dict[bytes, bytes], self.client.hgetall(keys.alive(self.prefix, slug)))
        ticks = [e for value in raw.values() if isinstance(e := parse_event(value), AgentAlive)]
        return sorted(ticks, key=lambda e: (e.ts, e.eid))

    # -- artifacts and state -------------------------------------------------------------------------------

    def put_artifact(self, slug: str, name: str, data: bytes) -> None:
        """Store the artifact; data over ``artifact_cap`` is cut, ending with a marker line."""
        self.put_artifacts(slug, {name: data})

    def put_artifacts(self, slug: str, artifacts: Mapping[str, bytes]) -> None:
        """Store each artifact (cut as ``put_artifact`` cuts it), all in one MULTI."""
        check_slug(slug)
        stored: dict[str, bytes] = {}
        for name, data in artifacts.items():
            key = keys.artifact(self.prefix, slug, check_artifact_name(name))
            stored[key], dropped = cap_bytes(bytes(data), self.artifact_cap)
            if dropped:
                log.warning("store.artifact_truncated", slug=slug, name=name, size=len(data), dropped=dropped)
        if not stored:
            return

        def write(pipe: redis.client.Pipeline) -> None:
            for key, value in stored.items():
                pipe.set(key, value, keepttl=True)
            self._with_run(pipe, slug, *stored)  # a new artifact of an ended run expires with it

        with store_errors("write artifact of", slug):
            self._multi(write)

    def get_artifact(self, slug: str, name: str) -> bytes | None:
        """The artifact's bytes, or None."""
        check_slug(slug)
        key = keys.artifact(self.prefix, slug, check_artifact_name(name))
        with store_errors("read artifact of", slug):
            value = cast(bytes | None, self.client.get(key))
        return as_bytes(value) if value is not None else None

    def write_state(self, slug: str, state: dict[str, Any]) -> None:
        """Replace the run's fold (one SET, so readers see the old or the new state; an ended run's expiry
        is kept). Printed by pydantic-core, as the snapshot is: every coordinator pass writes both, and
        the standard library's encoder took three times as long."""
        check_slug(slug)
        with store_errors("write state of", slug):
            self.client.set(keys.state(self.prefix, slug), to_json(state), keepttl=True)

    def write_fold(self, slug: str, state: dict[str, Any], snapshot: dict[str, Any]) -> None:
        """The run's fold and its snapshot in one MULTI (two SETs, each keeping an ended run's expiry)."""
        check_slug(slug)
        with store_errors("write state of", slug):
            pipe = self.client.pipeline(transaction=True)
            pipe.set(keys.state(self.prefix, slug), to_json(state), keepttl=True)
            pipe.set(keys.snapshot(self.prefix, slug), snapshot_record(snapshot), keepttl=True)
            pipe.execute()

    def read_state(self, slug: str) -> dict[str, Any] | None:
        """The run's fold, or None if absent or unreadable (logged)."""
        with store_errors("read state of", check_slug(slug)):
            raw = cast(bytes | None, self.client.get(keys.state(self.prefix, slug)))
        return json_object(slug, raw, "store.bad_state")

    @contextmanager
    def lock(self, slug: str, timeout: float = 60.0) -> Iterator[None]:
        """A redis-py Lock: wait up to ``timeout`` for it (else StoreError); it expires ``timeout`` after."""
        check_slug(slug)
        lock = self.client.lock(
            keys.lock(self.prefix, slug), timeout=timeout, blocking_timeout=timeout, thread_local=False
        )
        with store_errors("lock", slug):
            acquired = lock.acquire()
        if not acquired:
            raise StoreError(f"run {slug!r} is locked by another holder")
        try:
            yield
        finally:
            try:
                lock.release()
            except LockError:
                # It expired while held: someone else may have had it since. Nothing left to undo here.
                log.warning("store.lock_lost", slug=slug, timeout=timeout)
            except RedisError as exc:
                log.warning("store.unlock_failed", slug=slug, error=str(exc))

    # -- retention -----------------------------------------------------------------------------------------

    def origin(self, slug: str) -> str | None:
        """The id of the first entry of the run's stream, None when it has none (``LiveStore.origin``)."""
        with store_errors("read", check_slug(slug)):
            first = cast(
                list[tuple[bytes, Any]], self.client.xrange(keys.events(self.prefix, slug), "-", "+", 1)
            )
        return text(first[0][0]) if first else None

    def log_ends(self, slugs: Sequence[str]) -> dict[str, tuple[str, str] | None]:
        """Each run's first and last stream ids (None: an empty log), in one round trip: a reader that
        keeps folds tells an unchanged log (same ends) from one that grew or began again."""
        for slug in slugs:
            check_slug(slug)
        with store_errors("read the ends of runs", "*"):
            pipe = self.client.pipeline(transaction=False)
            for slug in slugs:
                key = keys.events(self.prefix, slug)
                pipe.xrange(key, "-", "+", 1)
                pipe.xrevrange(key, "+", "-", 1)
            replies = cast(list[list[tuple[bytes, Any]]], pipe.execute())
        ends: dict[str, tuple[str, str] | None] = {}
        for i, slug in enumerate(slugs):
            first, last = replies[2 * i], replies[2 * i + 1]
            ends[slug] = (text(first[0][0]), text(last[0][0])) if first and last else None
        return ends

    def run_key_names(self, slug: str) -> list[str]:
        """The name of every key the run may have now: its fixed names and what its key set lists
        (``keys.run_index``), one SMEMBERS however large the database. A run created before key sets
        were written has none, or one without its own name in it: its keys are SCANned for."""
        check_slug(slug)
        index = keys.run_index(self.prefix, slug)
        with store_errors("list the keys of", slug):
            listed = {text(m) for m in cast(set[bytes], self.client.smembers(index))}
        if index not in listed:
            return self.scan_run_keys(slug)
        return sorted(listed.union(keys.fixed_run_keys(self.prefix, slug)))

    def run_keys(self, slug: str) -> list[str]:
        """Every key of the run now in Redis (``run_key_names``, the ones that exist)."""
        names = self.run_key_names(slug)
        with store_errors("list the keys of", slug):
            pipe = self.client.pipeline(transaction=False)
            for name in names:
                pipe.exists(name)
            there = cast(list[int], pipe.execute())
        return [name for name, n in zip(names, there, strict=True) if n]

    def scan_run_keys(self, slug: str) -> list[str]:
        """Every key of the run now in Redis (``keys.RUN_KEY_SPACES``), found with one SCAN of the whole
        database: for a run without a key set, and for the tests that check the set lists them all."""
        check_slug(slug)
        belongs = keys.run_key_re(self.prefix, slug)
        found: set[str] = set()
        with store_errors("list the keys of", slug):
            for key in self.client.scan_iter(
                match=keys.run_scan_pattern(self.prefix, slug), count=SCAN_COUNT
            ):
                name = text(key)
                if belongs.match(name):
                    found.add(name)
        return sorted(found)

    def expire_run(self, slug: str, retention: int) -> int:
        """The run ended: all its keys expire ``retention`` seconds after it first ended (one Lua script,
        so they go together). Idempotent; a key written since the last call is caught by the next.
        Returns the deadline (epoch seconds)."""
        run_keys = self.run_key_names(slug)
        with store_errors("expire", slug):
            deadline = self._expire_script(
                keys=[keys.expiring_runs(self.prefix), *run_keys], args=[slug, retention]
            )
        log.info("store.run_expires", slug=slug, keys=len(run_keys), at=int(cast(int, deadline)))
        return int(cast(int, deadline))

    def activate(self, slug: str) -> None:
        """SADD to the active set and ZSCORE the expiring set, in one round trip; a run set to expire (it
        ended, then was resumed) is then kept (``keep_run``)."""
        with store_errors("activate", check_slug(slug)):
            pipe = self.client.pipeline(transaction=False)
            pipe.sadd(keys.active_runs(self.prefix), slug)
            pipe.zscore(keys.expiring_runs(self.prefix), slug)
            expiring = pipe.execute()[1] is not None
        if expiring:
            self.keep_run(slug)

    def keep_run(self, slug: str) -> bool:
        """The run is live (again): if it was set to expire, its record keys no longer do. Cheap when it
        was not (one ZSCORE). Returns whether anything changed."""
        with store_errors("keep", check_slug(slug)):
            if self.client.zscore(keys.expiring_runs(self.prefix), slug) is None:
                return False
        record = [k for k in self.run_key_names(slug) if keys.is_record_key(self.prefix, slug, k)]
        with store_errors("keep", slug):
            kept = int(
                cast(int, self._persist_script(keys=[keys.expiring_runs(self.prefix), *record], args=[slug]))
            )
        if kept:
            log.info("store.run_kept", slug=slug, keys=len(record))
        return kept == 1

    # -- sweeps --------------------------------------------------------------------------------------------

    def sweep_lookup(self, heads: Sequence[PullHead]) -> list[SweptPR]:
        """One pipeline: GET each head's claim and ZREVRANGE its PR's swept runs."""
        pipe = self.client.pipeline(transaction=False)
        for h in heads:
            pipe.get(keys.sweep_head(self.prefix, h.forge, h.repo, h.number, h.sha))
            pipe.zrevrange(keys.sweep_runs(self.prefix, h.forge, h.repo, h.number), 0, SWEEP_HISTORY - 1)
        with store_errors("look up the swept heads", "*"):
            answers = pipe.execute() if heads else []
        pairs = zip(answers[::2], answers[1::2], strict=True)
        return [SweptPR(None if h is None else text(h), [text(r) for r in runs]) for h, runs in pairs]

    def start_swept(self, starts: Sequence[SweptStart], ttl: int = SWEEP_TTL) -> list[SweepClaim]:
        """One pipeline of one Lua script per start (``START_SWEPT_LUA``): each start is atomic."""
        pipe = self.client.pipeline(transaction=False)
        for start in starts:
            check_slug(start.slug)
            h = start.head
            args: list[str | int] = [start.slug, ttl, start.replace or ""]
            for event in start.events:
                args += [event.eid, dump_event(event)]
            self._start_swept_script(
                keys=[
                    keys.sweep_head(self.prefix, h.forge, h.repo, h.number, h.sha),
                    keys.sweep_runs(self.prefix, h.forge, h.repo, h.number),
                    keys.events(self.prefix, start.slug),
                    keys.eids(self.prefix, start.slug),
                    keys.runs_index(self.prefix),
                    keys.expiring_runs(self.prefix),
                    keys.active_runs(self.prefix),
                    keys.run_index(self.prefix, start.slug),
                ],
                args=args,
                client=pipe,
            )
        with store_errors("start swept runs", "*"):
            answers = cast(list[list[bytes]], pipe.execute()) if starts else []
        return [sweep_claim(outcome, holder) for outcome, holder in answers]

    def run_states(self, slugs: Sequence[str]) -> dict[str, str | None]:
        """One transaction: the server's time, then each run's index entry, retention deadline and fold's
        ``target.state`` (None for a run not in the index or whose keys have expired)."""
        wanted = list(dict.fromkeys(slugs))
        for slug in wanted:
            check_slug(slug)
        with store_errors("read the states of runs", "*"):
            pipe = self.client.pipeline(transaction=True)
            pipe.time()
            for slug in wanted:
                self._live_scores(pipe, slug)
                pipe.get(keys.state(self.prefix, slug))
            (now, _), *answers = pipe.execute()
        rows = zip(wanted, answers[::3], answers[1::3], answers[2::3], strict=True)
        return {
            slug: target_state(slug, raw) if is_live(score, deadline, now) else None
            for slug, score, deadline, raw in rows
        }


def is_live(score: float | None, deadline: float | None, now: int) -> bool:
    """A run is listed while it is in the index (``score``) and its retention ``deadline``, if it has one,
    is still ahead of the server's clock ``now``: the rule ``PRUNE_LUA`` forgets runs by."""
    return score is not None and (deadline is None or deadline > now)


def from_url(url: str, prefix: str = keys.PREFIX) -> RedisStore:
    """A RedisStore on ``redis://host:port/db``, ``unix:///path/to/sock`` or ``redis+socket:///path/to/sock``."""
    try:
        client = redis.Redis.from_url(normalize_url(url), decode_responses=False)
    except ValueError as exc:
        raise StoreError(f"bad Redis URL {redact_url(url)!r}: {scrub(str(exc), url)}") from exc
    return RedisStore(client, prefix=prefix)
