"""Every Redis key Jury uses, in one place: this docstring is the key map (docs/architecture.md).

All keys start with a prefix (``jury`` unless configured), so one Redis can hold several installations
and a test can use a random prefix and delete exactly its own keys.

    <prefix>:schema                        string: the fleet's key schema, ``MAJOR.MINOR`` (the newest
                                           worker's; one knowing an older major refuses to start)
    <prefix>:runs                          sorted set: slug -> creation time (server clock, seconds)
    <prefix>:run:<slug>:events             stream: one entry per event, field ``e`` = the event JSON
    <prefix>:run:<slug>:eids               set: every eid appended to the run (the dedupe memory)
    <prefix>:run:<slug>:artifact:<name>    string: an artifact's bytes
    <prefix>:run:<slug>:state              string: the fold (``run.json``)
    <prefix>:run:<slug>:snapshot           string: the coordinator's fold and the stream id it covers
    <prefix>:run:<slug>:alive              hash: agent run -> its latest ``agent.alive`` tick (JSON)
    <prefix>:run:<slug>:lock               string: redis-py Lock token
    <prefix>:run:<slug>:ledger             hash: the run's budget (spent, reserved, unknown_calls)
    <prefix>:run:<slug>:cancel             string: present when the run is to be cancelled
    <prefix>:run:<slug>:kick               string: present while a coordinate task of the run is queued
    <prefix>:run:<slug>:archived           string: the stub of a run whose record was moved to the archive
                                           (``JURY_ARCHIVE``): where, when, its log's ends (JSON)
    <prefix>:run:<slug>:keys               set: the names of the run's keys outside these fixed ones
                                           (artifacts, its actions' and calls' keys) and its own name,
                                           written with each such key: what the run's expiry reads
    <prefix>:ledger:day:<yyyymmdd>         hash: the fleet's budget for one UTC day (same fields)
    <prefix>:ledger:call:<call_id>         hash: one reservation (run, day, amount, state, ...)
    <prefix>:lease:<key>                   string: the holder's random token, with a TTL
    <prefix>:done:<key>                    string: the effect named ``key`` happened (with a TTL)
    <prefix>:sent:<key>                    string: when an action's task was last enqueued, plus its
                                           countdown when it was put back (epoch seconds, with a TTL)
    <prefix>:taken:<key>                   string: present when a worker took the action's task (its
                                           lease) since it was last enqueued (with a TTL)
    <prefix>:resent:<key>                  string: how often the reaper enqueued it again, untaken,
                                           since it was last enqueued otherwise (with a TTL)
    <prefix>:runs:active                   set: slugs of the runs not yet ended (the reaper's list)
    <prefix>:runs:expiring                 sorted set: slug -> epoch second its keys expire (ended runs)
    <prefix>:schedule:<name>:since         string: epoch second the fleet first saw the schedule
    <prefix>:schedule:<name>:claim:<slot>  string: the token of the scheduler firing the slot, with a TTL
    <prefix>:schedule:<name>:last          hash: the latest slot fired (slot, at, by, ok, outcome)
    <prefix>:schedule:<name>:firings       stream: one entry per firing (slot, at, by, ok, outcome), capped
    <prefix>:slots:<name>                  sorted set: one ``[limits]`` semaphore (``repo:<identity>``,
                                           ``model:<pattern>``): holder token -> expiry (server ms)
    <prefix>:waiters:<name>                sorted set: the tasks put back because that semaphore was
                                           full (``[kind, slug, key]`` JSON) -> when they first waited
    <prefix>:reaper                        string: the id of the worker reaping this period (PX: the period)
    <prefix>:workers                       sorted set: worker id -> when its presence was last refreshed
    <prefix>:worker:<id>                   string: a live worker's presence (JSON), with a TTL
    <prefix>:sweep:<forge>:<repo>:<n>:head:<sha>   string: the slug of the run that holds the PR head
                                           (a sweep's dedupe, SET with the rest of the run's start)
    <prefix>:sweep:<forge>:<repo>:<n>:runs sorted set: the PR's swept runs, slug -> when started
    <prefix>:forge:etag:<sha256>           string: one forge listing's ETag and answer (zlib JSON, a TTL);
                                           the digest of its cache key, so no URL or token is in a key
    <prefix>:summary:<slug>                string: the run's summary (``orchestrator.summary``, JSON), no
                                           TTL: it outlives the run's keys (outside the run's key spaces)
    <prefix>:summaries                     sorted set: every slug with a summary -> when the run ended
                                           (epoch seconds): the summaries left after the runs expired

Ledger amounts are integer micro-dollars (see ``workers.fleet.ledger``).

Only the Redis implementations build these keys: ``orchestrator.store.redis`` (``RedisStore``) and
``orchestrator.store.redis_archive`` (``ArchivingStore``: the ``archived`` stubs),
``workers.runtime.lease`` (``RedisLeases``), ``workers.fleet.ledger`` (``Ledger``),
``workers.isolation.limits`` (``RedisSlots``), ``workers.fleet.presence`` (the workers' presence),
``workers.fleet.reaper`` (the reaper's lock), ``orchestrator.store.redis_summaries`` (the summaries),
``workers.fleet.schema`` (the schema gate), ``workers.fleet.forge_cache`` (``RedisETagCache``: the
``forge:etag:`` keys) and ``workers.fleet.scheduler`` (``ScheduleStore``: the ``schedule:`` keys; a
schedule's name holds no ``:`` and no glob character). Everyone else goes through their named methods,
which the in-memory twins implement too.

Celery's broker keeps its own keys in the same database, outside the prefix: one list per queue
(``control``, ``review`` ...), ``_kombu.binding.*`` and, while tasks run, ``unacked``, ``unacked_index``
and ``unacked_mutex``; only Celery touches them.

A run's keys: everything under ``run:<slug>:``, and the ``lease``, ``done``, ``sent``, ``taken``,
``resent`` and ``ledger:call`` keys whose name starts with ``<slug>:`` (actions and agent calls are named
``<slug>:<key>``). A new key that belongs to one run must live in one of these key spaces
(``RUN_KEY_SPACES``), and be a fixed name (``fixed_run_keys``) or be added to the run's key set
(``run_index``) by whoever writes it, in the same transaction (``redis_scripts.name_in_run``), or it
outlives the run's retention: an ended run's expiry reads that set, so its cost is the run's own keys,
not the whole database's. One without a TTL of its own is also given its run's expiry when written
after the run ended (``redis_scripts.expire_with_run``). Slugs hold no ``:`` and no glob character, so
``<key space>:<slug>:`` names one run's keys only.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "jury"

_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


def schema(prefix: str) -> str:
    """The fleet's key schema version (``workers.fleet.schema``)."""
    return f"{prefix}:schema"


def runs_index(prefix: str) -> str:
    """The sorted set of every run, scored by creation time."""
    return f"{prefix}:runs"


def _run(prefix: str, slug: str) -> str:
    return f"{prefix}:run:{slug}"


def events(prefix: str, slug: str) -> str:
    """The run's event stream."""
    return f"{_run(prefix, slug)}:events"


def eids(prefix: str, slug: str) -> str:
    """The set of eids already appended to the run."""
    return f"{_run(prefix, slug)}:eids"


def artifact(prefix: str, slug: str, name: str) -> str:
    """One artifact of the run (``name`` is already validated)."""
    return f"{_run(prefix, slug)}:artifact:{name}"


def state(prefix: str, slug: str) -> str:
    """The run's folded state (``run.json``)."""
    return f"{_run(prefix, slug)}:state"


def snapshot(prefix: str, slug: str) -> str:
    """The coordinator's snapshot: the fold with the stream id it covers."""
    return f"{_run(prefix, slug)}:snapshot"


def alive(prefix: str, slug: str) -> str:
    """The latest liveness tick of each agent run of the run."""
    return f"{_run(prefix, slug)}:alive"


def lock(prefix: str, slug: str) -> str:
    """The run's exclusive lock."""
    return f"{_run(prefix, slug)}:lock"


def ledger_run(prefix: str, slug: str) -> str:
    """The run's budget hash: ``spent``, ``reserved``, ``unknown_calls``."""
    return f"{_run(prefix, slug)}:ledger"


def cancel(prefix: str, slug: str) -> str:
    """The run's cancel flag."""
    return f"{_run(prefix, slug)}:cancel"


def kick(prefix: str, slug: str) -> str:
    """The run's pending-kick mark: a coordinate task for it is queued and has not started yet."""
    return f"{_run(prefix, slug)}:kick"


def archived(prefix: str, slug: str) -> str:
    """The run's archive stub: present while its record lives in the archive instead of Redis
    (``orchestrator.store.redis_archive``)."""
    return f"{_run(prefix, slug)}:archived"


def run_index(prefix: str, slug: str) -> str:
    """The run's key set: the name of every key of the run outside its fixed names (``fixed_run_keys``),
    and its own name, added when the run is created. A run's end expires what it lists instead of
    SCANning the database. Writers add to it only while it is there (``redis_scripts.name_in_run``): a run
    created before the set existed has none (``RedisStore.run_key_names`` SCANs for its keys), and a late
    write to a run whose keys expired makes none that would never expire."""
    return f"{_run(prefix, slug)}:keys"


def index_of(prefix: str, name: str) -> str:
    """The key set of the run that owns ``name`` (an action's or an agent call's, ``<slug>:<key>``)."""
    return run_index(prefix, name.partition(":")[0])


def events_of(prefix: str, name: str) -> str:
    """The log of the run that owns ``name`` (as ``index_of``)."""
    return events(prefix, name.partition(":")[0])


def fixed_run_keys(prefix: str, slug: str) -> list[str]:
    """The run's keys whose names are fixed by its slug (some may not exist now); every other key of the
    run is listed in its key set (``run_index``)."""
    return [
        f(prefix, slug)
        for f in (events, eids, state, snapshot, alive, lock, ledger_run, cancel, kick, run_index, archived)
    ]


def ledger_day(prefix: str, yyyymmdd: str) -> str:
    """The fleet's budget hash for one UTC day (``YYYYMMDD``)."""
    return f"{prefix}:ledger:day:{yyyymmdd}"


def ledger_call(prefix: str, call_id: str) -> str:
    """One agent call's reservation hash: ``run``, ``day``, ``amount``, ``state`` and its outcome."""
    return f"{prefix}:ledger:call:{call_id}"


def lease(prefix: str, key: str) -> str:
    """The lease on the effect named ``key`` (its value is the holder's token)."""
    return f"{prefix}:lease:{key}"


def done(prefix: str, key: str) -> str:
    """The marker that the effect named ``key`` happened."""
    return f"{prefix}:done:{key}"


def scan_pattern(prefix: str) -> str:
    """A SCAN ``MATCH`` pattern for every key under ``prefix`` (glob characters in it escaped)."""
    return _GLOB_SPECIAL.sub(r"\\\1", prefix) + ":*"


def active_runs(prefix: str) -> str:
    """Set of the slugs of runs not yet ended: what the reaper looks at."""
    return f"{prefix}:runs:active"


def sent(prefix: str, key: str) -> str:
    """When an action's task was last enqueued, plus the countdown it was put back with (epoch seconds:
    when it is due), for the reaper."""
    return f"{prefix}:sent:{key}"


def taken(prefix: str, key: str) -> str:
    """Present when a worker took the action's task (acquired its lease) since it was last enqueued."""
    return f"{prefix}:taken:{key}"


def resent(prefix: str, key: str) -> str:
    """How often the reaper enqueued the action again though no worker had taken it (an integer)."""
    return f"{prefix}:resent:{key}"


def expiring_runs(prefix: str) -> str:
    """Sorted set of ended runs, scored by the epoch second their keys expire (pruned from the index)."""
    return f"{prefix}:runs:expiring"


def slots(prefix: str, name: str) -> str:
    """A ``[limits]`` semaphore: its holders (lease tokens) scored by when they expire (fleet-wide)."""
    return f"{prefix}:slots:{name}"


def waiters(prefix: str, name: str) -> str:
    """The tasks put back because the semaphore ``name`` was full, oldest first: a release sends one on."""
    return f"{prefix}:waiters:{name}"


def reaper(prefix: str) -> str:
    """The reaper's lock: whoever sets it (NX, expiring after one reap period) reaps this period."""
    return f"{prefix}:reaper"


def workers(prefix: str) -> str:
    """Sorted set of worker ids, scored by when each last refreshed its presence (epoch seconds)."""
    return f"{prefix}:workers"


def worker(prefix: str, worker_id: str) -> str:
    """One worker's presence (JSON), expiring unless its worker refreshes it."""
    return f"{prefix}:worker:{worker_id}"


def sweep_head(prefix: str, forge: str, repo: str, number: int, sha: str) -> str:
    """Which run holds a PR head (``repo`` lower-cased; a forge path holds no ``:``)."""
    return f"{prefix}:sweep:{forge}:{repo}:{number}:head:{sha}"


def sweep_runs(prefix: str, forge: str, repo: str, number: int) -> str:
    """The PR's swept runs, scored by when each started."""
    return f"{prefix}:sweep:{forge}:{repo}:{number}:runs"


def summary(prefix: str, slug: str) -> str:
    """The run's summary: outside ``RUN_KEY_SPACES``, so a run's expiry never takes it."""
    return f"{prefix}:summary:{slug}"


def summaries(prefix: str) -> str:
    """Every run with a summary, scored by when it ended: what a scoreboard walks once runs expired."""
    return f"{prefix}:summaries"


def forge_etag(prefix: str, cache_key: str) -> str:
    """One forge answer kept for conditional requests: a digest of the transport's cache key, so neither
    the URL nor the credentials' fingerprint appear in the key space."""
    return f"{prefix}:forge:etag:{hashlib.sha256(cache_key.encode()).hexdigest()}"


# The key spaces that hold one run's keys, as ``<prefix>:<key space>:<slug>:...`` ("family" is a model's
# vendor, docs/glossary.md).
RUN_KEY_SPACES: tuple[str, ...] = ("run", "lease", "done", "sent", "taken", "resent", "ledger:call")
# Keys of a run with a lifetime of their own (a lock's timeout, a lease's TTL, ...): an ended run's expiry
# may shorten it, a resumed run must not make it permanent.
SELF_EXPIRING: tuple[str, ...] = ("lock", "cancel")


def run_scan_pattern(prefix: str, slug: str) -> str:
    """A SCAN ``MATCH`` pattern that every key of the run matches (filter with ``run_key_re``)."""
    return _GLOB_SPECIAL.sub(r"\\\1", prefix) + f":*:{slug}:*"


def run_key_re(prefix: str, slug: str) -> re.Pattern[str]:
    """Whether a key belongs to the run: one of ``RUN_KEY_SPACES`` followed by ``<slug>:``."""
    spaces = "|".join(re.escape(f) for f in RUN_KEY_SPACES)
    return re.compile(rf"{re.escape(prefix)}:(?:{spaces}):{re.escape(slug)}:")


def is_record_key(prefix: str, slug: str, key: str) -> bool:
    """Whether ``key`` is part of the run's record (``run:<slug>:...``, not the lock or cancel flag): the
    keys that live as long as the run does, and expire only after it ended."""
    head = f"{prefix}:run:{slug}:"
    return key.startswith(head) and key[len(head) :] not in SELF_EXPIRING


def _schedule(prefix: str, name: str) -> str:
    return f"{prefix}:schedule:{name}"


def schedule_since(prefix: str, name: str) -> str:
    """When the fleet first saw the schedule: slots before it are never fired (a new schedule does not
    fire its past)."""
    return f"{_schedule(prefix, name)}:since"


def schedule_claim(prefix: str, name: str, slot: int) -> str:
    """The claim of one scheduler on one slot of the schedule (its token, with a TTL)."""
    return f"{_schedule(prefix, name)}:claim:{slot}"


def schedule_last(prefix: str, name: str) -> str:
    """The record of the latest slot of the schedule that was fired."""
    return f"{_schedule(prefix, name)}:last"


def schedule_firings(prefix: str, name: str) -> str:
    """Every firing of the schedule, oldest first (a capped stream): a slot fired twice shows twice."""
    return f"{_schedule(prefix, name)}:firings"
