"""The Redis store with an archive: an ended run's record moves out of Redis, and is read from there.

``ArchivingStore.archive_run`` (the coordinator calls it once a run ended and its publish is done) copies
the run's record keys (its log, seen eids, fold, snapshot, ticks, budget hash, key set and artifacts) to
the archive (``orchestrator.store.archive``), durably, and only then, in one script, deletes them and
leaves a stub (``keys.archived``: a few hundred bytes). The script deletes nothing if any of those keys
changed since they were read (it compares a digest of each), so a write that lands meanwhile is never
lost: the run stays in Redis and a later pass archives it. A crash after the copy and before the script
leaves the run whole in Redis; the copy is rewritten by the next archiving.

The reaper's marks of the run (``sent``, ``taken``, ``resent``) go with the record: the run is no longer
active, nothing hands its actions out again. Its leases, done markers and ledger calls stay with their own
expiry: they guard effects (a copy of a task that comes late must still find its effect done).

Reads are transparent: each reader of a run (``read``, ``read_after``, ``read_from_snapshot``, ``origin``,
``read_state``, ``get_artifact``, ``alive``, ``run_states`` ...) asks Redis first, as before, and only
when Redis holds nothing of the run's log looks for a stub and reads the archive. A live run costs nothing
more.

A later event (a nightly ``verify.ran``, a cancel, a resume) is appended by loading the run back
(``restore``: one script puts every key back with its stream ids, so the snapshot's position and the log's
origin stay valid), appending, and archiving it again if it is still ended. The append script refuses an
archived run (``RunArchived``), so no event ever lands in a log that lost its beginning.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any, cast

import structlog

from orchestrator.domain import AgentAlive, Event, parse_event
from orchestrator.errors import StoreError
from orchestrator.store import keys
from orchestrator.store.archive import Archive, ArchivedRun, RunArchived, archive_from, archive_from_env
from orchestrator.store.base import Tail, check_slug
from orchestrator.store.redis import RedisStore, from_url
from orchestrator.store.redis_codec import Entries, json_object, snapshot_doc, stream_events, text
from orchestrator.store.redis_marks import store_errors

log = structlog.get_logger()

# Delete an ended run's record once its copy is in the archive, unless the run changed since it was read.
#   KEYS[1]  the stub (keys.archived)   KEYS[2]  the active set   KEYS[3]  the expiry set
#   KEYS[4 .. 3+n]  the record keys as read    KEYS[4+n ..]  the run's reaper marks (deleted as well)
#   ARGV[1]  the slug   ARGV[2]  the stub's value   ARGV[3]  n   ARGV[4 .. 3+n]  sha1 of each key's DUMP
# Returns 1 when the run now lives in the archive, 0 when nothing was done (active again, not ended,
# already archived, or a key changed: the caller reads again on a later pass).
DROP_LUA = """
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 0 end
local deadline = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not deadline or redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local n = tonumber(ARGV[3])
for i = 1, n do
  local blob = redis.call('DUMP', KEYS[3 + i])
  local sum = blob and redis.sha1hex(blob) or ''
  if sum ~= ARGV[3 + i] then return 0 end
end
for i = 4, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('EXPIREAT', KEYS[1], math.floor(tonumber(deadline)))
return 1
"""

# Drop the fold a coordinator pass wrote for an archived run whose log it did not change (a late kick of
# an ended run): derived from the archived log, which the archive holds whole.
#   KEYS[1]  the stub   KEYS[2]  the log   KEYS[3]  run.json   KEYS[4]  the snapshot
# Returns how many keys went (0: not archived, or the run has a log in Redis again).
DROP_REFOLD_LUA = """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
return redis.call('DEL', KEYS[3], KEYS[4])
"""

# Load an archived run back into Redis: every record key as it was, the stub gone, in one step.
#   KEYS[1] the stub  KEYS[2] log  KEYS[3] eids  KEYS[4] state  KEYS[5] snapshot  KEYS[6] ticks
#   KEYS[7] budget hash  KEYS[8] key set  KEYS[9..] the artifacts
#   ARGV[1] the stub as read (another value: someone else restored or archived it again; nothing done)
#   ARGV[2] state ('' none)  ARGV[3] snapshot ('' none), then counted sections: the log's (id, entry)
#   pairs, the eids, the ticks' and the budget's (field, value) pairs, the key set's members; then each
#   artifact's bytes, in the order of KEYS[9..].
# What Redis holds already (written after the run was archived: a fold, a late artifact) is kept (NX);
# each key takes the stub's expiry, so the run still ends when its retention does. Returns 1, or 0.
RESTORE_LUA = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return redis.error_reply('archived run has a log in Redis too')
end
local ttl = redis.call('PTTL', KEYS[1])
local i = 4
local function take() local v = ARGV[i]; i = i + 1; return v end
local n = tonumber(take())
for _ = 1, n do local id = take(); redis.call('XADD', KEYS[2], id, 'e', take()) end
n = tonumber(take())
for _ = 1, n do redis.call('SADD', KEYS[3], take()) end
if ARGV[2] ~= '' then redis.call('SET', KEYS[4], ARGV[2], 'NX') end
if ARGV[3] ~= '' then redis.call('SET', KEYS[5], ARGV[3], 'NX') end
for k = 6, 7 do
  n = tonumber(take())
  for _ = 1, n do local f = take(); redis.call('HSETNX', KEYS[k], f, take()) end
end
n = tonumber(take())
for _ = 1, n do redis.call('SADD', KEYS[8], take()) end
for k = 9, #KEYS do redis.call('SET', KEYS[k], take(), 'NX') end
if ttl > 0 then
  for k = 2, #KEYS do
    if redis.call('PTTL', KEYS[k]) == -1 then redis.call('PEXPIRE', KEYS[k], ttl) end
  end
end
redis.call('DEL', KEYS[1])
return 1
"""


def _digest(blob: bytes | None) -> str:
    """What the drop script compares (``redis.sha1hex`` of the same DUMP): whether a key changed."""
    return hashlib.sha1(blob).hexdigest() if blob is not None else ""


def _target_state(slug: str, raw: bytes | None) -> str | None:
    """The run's state as its stored fold says (kept in the stub: a listing needs no archive read)."""
    target = (json_object(slug, raw, "store.bad_state") or {}).get("target")
    state = target.get("state") if isinstance(target, dict) else None
    return state if isinstance(state, str) else None


class ArchivingStore(RedisStore):
    """A ``RedisStore`` that moves ended runs to ``archive`` and reads archived runs from it. Without an
    archive (``JURY_ARCHIVE`` unset) it archives nothing, and still reads a run archived by another
    host from the archive its stub names."""

    def __init__(
        self,
        client: Any,
        prefix: str = keys.PREFIX,
        archive: Archive | None = None,
        artifact_cap: int = 8 * 1024 * 1024,
    ) -> None:
        super().__init__(client, prefix=prefix, artifact_cap=artifact_cap)
        self.archive = archive
        self._drop_script = client.register_script(DROP_LUA)
        self._restore_script = client.register_script(RESTORE_LUA)
        self._drop_refold_script = client.register_script(DROP_REFOLD_LUA)
        self._loaded: tuple[str, bytes, ArchivedRun] | None = None  # the last run read: slug, stub, copy

    # -- the stub and the copy ---------------------------------------------------------------------------

    def stub(self, slug: str) -> dict[str, Any] | None:
        """The run's archive stub (where, when, its log's ends, its state), None when not archived."""
        with store_errors("read the archive stub of", check_slug(slug)):
            raw = cast(bytes | None, self.client.get(keys.archived(self.prefix, slug)))
        return json_object(slug, raw, "store.bad_archive_stub")

    def _copy(self, slug: str) -> tuple[bytes, ArchivedRun] | None:
        """The stub as stored and the run's copy, None when the run is not archived. The copy is read from
        this store's archive, else from the one the stub names (a host that mounts the archive elsewhere
        sets ``JURY_ARCHIVE``); StoreError when neither has it."""
        with store_errors("read the archive stub of", check_slug(slug)):
            raw = cast(bytes | None, self.client.get(keys.archived(self.prefix, slug)))
        if raw is None:
            return None
        if self._loaded is not None and self._loaded[:2] == (slug, raw):
            return raw, self._loaded[2]
        where = (json_object(slug, raw, "store.bad_archive_stub") or {}).get("where")
        places = [a for a in (self.archive, archive_from(where) if isinstance(where, str) else None) if a]
        for place in places:
            blob = place.get(slug)
            if blob is not None:
                run = ArchivedRun.decode(slug, blob)
                self._loaded = (slug, raw, run)
                return raw, run
        raise StoreError(f"run {slug!r} is archived in {where!r}, but no copy of it is there")

    def _archived(self, slug: str) -> ArchivedRun | None:
        found = self._copy(slug)
        return found[1] if found else None

    def _events(self, slug: str, entries: list[tuple[str, bytes]]) -> list[tuple[str, Event]]:
        page: Entries = [(i.encode(), {b"e": e}) for i, e in entries]
        pairs = zip(entries, stream_events(slug, page), strict=True)
        return [(i, e) for (i, _), e in pairs if e is not None]

    # -- archiving -------------------------------------------------------------------------------------------

    def archive_run(self, slug: str) -> bool:
        """Move the ended run's record to the archive (see the module's docstring); True when it now lives
        there. Does nothing (False) without an archive, for a run that is active, not ended (no retention
        deadline), already archived, has no log, or changed while it was copied."""
        if self.archive is None:
            return False
        if self._drop_refold(slug):
            return False
        names = self.run_key_names(slug)
        skip = {keys.kick(self.prefix, slug), keys.archived(self.prefix, slug)}
        record = [k for k in names if keys.is_record_key(self.prefix, slug, k) and k not in skip]
        heads = tuple(space(self.prefix, f"{slug}:") for space in (keys.sent, keys.taken, keys.resent))
        marks = [k for k in names if k.startswith(heads)]
        read = self._read_record(slug, record)
        if read is None:
            return False
        run, digests = read
        blob = run.encode()
        self.archive.put(slug, blob)  # durable before anything in Redis goes
        stub = {
            "where": self.archive.where,
            "at": round(time.time(), 3),
            "origin": run.origin,
            "last": run.last,
            "events": len(run.entries),
            "state": _target_state(slug, run.state),
            "bytes": len(blob),
        }
        args = [slug, json.dumps(stub, separators=(",", ":")), len(record), *digests]
        fixed = [
            keys.archived(self.prefix, slug),
            keys.active_runs(self.prefix),
            keys.expiring_runs(self.prefix),
        ]
        with store_errors("archive", slug):
            done = int(cast(int, self._drop_script(keys=[*fixed, *record, *marks], args=args))) == 1
        log.info("store.run_archived" if done else "store.run_not_archived", slug=slug, bytes=len(blob))
        return done

    def _drop_refold(self, slug: str) -> bool:
        """For an archived run without a log in Redis: drop the fold a later pass wrote (``DROP_REFOLD_LUA``),
        so a kick of an ended run does not bring 30 KB back. True when the run is archived."""
        p = self.prefix
        names = [keys.archived(p, slug), keys.events(p, slug), keys.state(p, slug), keys.snapshot(p, slug)]
        with store_errors("archive", slug):
            dropped = int(cast(int, self._drop_refold_script(keys=names)))
            return dropped > 0 or bool(self.client.exists(names[0]))

    def _read_record(self, slug: str, record: list[str]) -> tuple[ArchivedRun, list[str]] | None:
        """The run's record read at one instant (a MULTI), with a digest of each key's DUMP; None when the
        run is not to be archived (active, not ended, already archived, no log)."""
        p = self.prefix
        arts = [k for k in record if k.startswith(keys.artifact(p, slug, ""))]
        pipe = self.client.pipeline(transaction=True)
        pipe.sismember(keys.active_runs(p), slug)
        pipe.zscore(keys.expiring_runs(p), slug)
        pipe.exists(keys.archived(p, slug))
        pipe.xrange(keys.events(p, slug), "-", "+")
        pipe.smembers(keys.eids(p, slug))
        pipe.get(keys.state(p, slug))
        pipe.get(keys.snapshot(p, slug))
        pipe.hgetall(keys.alive(p, slug))
        pipe.hgetall(keys.ledger_run(p, slug))
        pipe.smembers(keys.run_index(p, slug))
        for k in arts:
            pipe.get(k)
        for k in record:
            pipe.dump(k)
        with store_errors("read for the archive", slug):
            active, deadline, stubbed, entries, eids, state, snap, alive, ledger, key_set, *rest = (
                pipe.execute()
            )
        if active or deadline is None or stubbed or not entries:
            return None
        values, dumps = rest[: len(arts)], rest[len(arts) :]
        run = ArchivedRun(
            slug=slug,
            entries=[(text(i), fields.get(b"e", b"")) for i, fields in entries],
            eids=sorted(eids),
            state=state,
            snapshot=snap,
            alive=alive,
            ledger=ledger,
            key_set=sorted(key_set),
            artifacts={
                k[len(keys.artifact(p, slug, "")) :]: v
                for k, v in zip(arts, values, strict=True)
                if v is not None
            },
        )
        return run, [_digest(d) for d in dumps]

    def restore(self, slug: str) -> bool:
        """Load the archived run back into Redis (``RESTORE_LUA``); False when it was not archived (or
        someone else restored it meanwhile). The copy stays in the archive."""
        found = self._copy(slug)
        if found is None:
            return False
        raw, run = found
        p = self.prefix
        names = list(run.artifacts)
        args: list[bytes | str | int] = [raw, run.state or b"", run.snapshot or b"", len(run.entries)]
        for entry_id, entry in run.entries:
            args += [entry_id, entry]
        args += [len(run.eids), *run.eids]
        for table in (run.alive, run.ledger):
            args.append(len(table))
            for f, v in table.items():
                args += [f, v]
        args += [len(run.key_set), *run.key_set, *(run.artifacts[n] for n in names)]
        fixed = [keys.archived(p, slug), keys.events(p, slug), keys.eids(p, slug), keys.state(p, slug)]
        fixed += [
            keys.snapshot(p, slug),
            keys.alive(p, slug),
            keys.ledger_run(p, slug),
            keys.run_index(p, slug),
        ]
        with store_errors("load back the archived", slug):
            done = int(
                cast(
                    int,
                    self._restore_script(
                        keys=[*fixed, *(keys.artifact(p, slug, n) for n in names)], args=args
                    ),
                )
            )
        log.info("store.run_restored", slug=slug, restored=bool(done))
        return done == 1

    # -- writes that meet an archived run --------------------------------------------------------------------

    def create_run(self, slug: str) -> bool:
        try:
            return super().create_run(slug)
        except RunArchived:
            return False  # registered: its record is in the archive

    def append(self, slug: str, events: Sequence[Event]) -> int:
        """``RedisStore.append``; to an archived run: load it back, append, and archive it again if it is
        still ended (a nightly ``verify.ran``); a run the events made live again stays in Redis."""
        try:
            return super().append(slug, events)
        except RunArchived:
            pass
        self.restore(slug)
        appended = super().append(slug, events)
        self.archive_run(slug)
        return appended

    def run_key_names(self, slug: str) -> list[str]:
        """An archived run's key set went to the archive: its fixed names (the stub among them), never a
        SCAN of the database for the run's keys."""
        if self.stub(slug) is not None and not self.client.exists(keys.run_index(self.prefix, slug)):
            return sorted(keys.fixed_run_keys(self.prefix, slug))
        return super().run_key_names(slug)

    # -- reads: Redis first, then the archive ----------------------------------------------------------------

    def read(self, slug: str, after: int = 0) -> list[Event]:
        found = super().read(slug, after)
        run = None if found else self._archived(slug)
        if run is None:
            return found
        return [e for _, e in self._events(slug, run.entries)][max(after, 0) :]

    def wait(self, slug: str, after: int, timeout: float) -> list[Event]:
        return self.read(slug, after) or super().wait(slug, after, timeout)

    def read_after(self, slug: str, position: str | None) -> list[tuple[str, Event]] | None:
        found = super().read_after(slug, position)
        run = None if found else self._archived(slug)
        if run is None:
            return found
        entries = run.after(position)
        return None if entries is None else self._events(slug, entries)

    def read_from_snapshot(self, slug: str) -> tuple[str | None, dict[str, Any] | None, Tail]:
        origin, doc, tail = super().read_from_snapshot(slug)
        run = None if origin is not None else self._archived(slug)
        if run is None:
            return origin, doc, tail
        doc = doc or snapshot_doc(slug, run.snapshot)  # a fold written since the archiving wins
        position = doc.get("position") if doc else None
        entries = run.after(position) if isinstance(position, str) else None
        return run.origin, doc, None if entries is None else self._events(slug, entries)

    def read_from_snapshots(
        self, slugs: Sequence[str]
    ) -> list[tuple[str | None, dict[str, Any] | None, Tail]]:
        found = super().read_from_snapshots(slugs)
        return [
            f if f[0] is not None else self.read_from_snapshot(s) for s, f in zip(slugs, found, strict=True)
        ]

    def origin(self, slug: str) -> str | None:
        first = super().origin(slug)
        run = None if first is not None else self._archived(slug)
        return first if run is None else run.origin

    def log_ends(self, slugs: Sequence[str]) -> dict[str, tuple[str, str] | None]:
        ends = super().log_ends(slugs)
        for slug, pair in ends.items():
            run = None if pair is not None else self._archived(slug)
            if run is not None and run.origin is not None and run.last is not None:
                ends[slug] = (run.origin, run.last)
        return ends

    def read_state(self, slug: str) -> dict[str, Any] | None:
        state = super().read_state(slug)
        run = None if state is not None else self._archived(slug)
        return state if run is None else json_object(slug, run.state, "store.bad_state")

    def read_snapshot(self, slug: str) -> dict[str, Any] | None:
        doc = super().read_snapshot(slug)
        run = None if doc is not None else self._archived(slug)
        return doc if run is None else snapshot_doc(slug, run.snapshot)

    def get_artifact(self, slug: str, name: str) -> bytes | None:
        data = super().get_artifact(slug, name)
        run = None if data is not None else self._archived(slug)
        return data if run is None else run.artifacts.get(name)

    def alive(self, slug: str) -> list[AgentAlive]:
        ticks = super().alive(slug)
        run = None if ticks else self._archived(slug)
        if run is None:
            return ticks
        found = [e for v in run.alive.values() if isinstance(e := parse_event(v), AgentAlive)]
        return sorted(found, key=lambda e: (e.ts, e.eid))

    def run_states(self, slugs: Sequence[str]) -> dict[str, str | None]:
        """``RedisStore.run_states``; an archived run's state from its stub (a run without a fold in Redis
        reads ``queued`` there), without reading the archive."""
        states = super().run_states(slugs)
        bare = [s for s, state in states.items() if state == "queued"]
        if bare:
            with store_errors("read the archive stubs of runs", "*"):
                raws = cast(
                    list[bytes | None], self.client.mget([keys.archived(self.prefix, s) for s in bare])
                )
            for slug, raw in zip(bare, raws, strict=True):
                stub = json_object(slug, raw, "store.bad_archive_stub")
                if stub is not None and isinstance(stub.get("state"), str):
                    states[slug] = stub["state"]
        return states


def open_store(url: str, prefix: str = keys.PREFIX, archive: Archive | None = None) -> ArchivingStore:
    """The fleet's store on ``url`` (as ``redis.from_url``) with the archive ``archive``, else the one
    ``JURY_ARCHIVE`` names: what every process that reads or ends runs opens, so an archived run reads the
    same on each."""
    plain = from_url(url, prefix)
    return ArchivingStore(plain.client, prefix=prefix, archive=archive or archive_from_env())
