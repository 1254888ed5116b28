"""The scheduler: fires the operator's ``[[schedules]]`` (``orchestrator.schedules``), once per slot, from
any number of scheduler processes sharing the fleet's Redis.

**How a slot is fired.** Every scheduler process ticks at each schedule's next slot. For the latest slot
at or before now it runs one Lua script (``CLAIM_LUA``): if the schedule's ``last`` record already holds
this slot (or a later one) the slot is done; otherwise ``SET NX PX`` a claim key for (schedule, slot) with
a random token. The one that gets the claim fires, renewing the claim every third of its TTL while the
firing runs, then records the firing (``RECORD_LUA``: ``last`` raised to the slot, an entry on the
schedule's ``firings`` stream, the claim deleted) in one step. The others see the claim held and look
again every ``recheck`` seconds: a claimer that dies before recording stops renewing, its claim expires
after ``JURY_SCHEDULE_CLAIM_TTL`` (30 s), and the next scheduler to look claims the slot and fires it.

**The guarantee: at least once per slot, and the firing is idempotent.** Exactly once cannot be had: a
firing reaches outside Redis (a forge's API, the run queue), so "fired" cannot be written in the same
step as the firing. Writing it after (what we do) means a claimer that dies, or stalls longer than the
claim TTL, after its firing's effect but before the record lets another fire the slot again; writing it
before would lose the slot instead. A second firing of a slot does no harm: a review sweep skips every PR
whose head already has a run in flight or converged (an atomic check in Redis), and verify re-runs
accepted regression tests, which only adds ``verify.ran`` evidence. The claim and the fired check are one
atomic script, and the record raises ``last`` before it deletes the claim, so two live schedulers never
both fire a slot; a duplicate needs a claimer stalled past its TTL, and shows as two entries for one slot
on the ``firings`` stream.

**Missed slots.** A scheduler only ever fires the *latest* slot at or before now. After the whole fleet was
down across several slots, the first scheduler back fires the latest missed slot once, not one firing per
missed slot (no storm); if a slot's claimer died and the next slot came before its claim expired, the two
fire as one (the later). A schedule the fleet has never seen starts with its next slot: the first
scheduler to see it writes ``since`` (now), and no slot before it fires. A firing that fails (the forge
is down, a repository is gone) is recorded as fired, with its error: the next slot tries again, a retry
loop would hammer the forge.

**celery beat.** ``JuryBeat`` is this scheduler as a celery beat scheduler class (``celery -A
workers.runtime.app
beat -S workers.fleet.scheduler:JuryBeat``): beat runs the loop, the claims and the firings are the ones
above, so beats and ``jury scheduler`` processes mix. Beat's own entries and its schedule file are not used: a
shelve file per beat is exactly the state several beats cannot share, which is why Jury claims each
slot in Redis itself rather than through beat (or a beat scheduler package, which would add a dependency
to do what one Lua script does).

**Where the firing runs.** In the scheduler process, in a thread per firing (one at a time per schedule):
the sweep enqueues runs from one process (``workers.fleet.sweep``), and verify runs the regression tests in
the sandbox (``workers.verification.reverify``), both designed to run from a command. What each kind does is a
``FireFn`` in ``FIRINGS`` (kind -> callable), which tests replace with one that records.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

import redis
import structlog
from celery import beat
from redis.exceptions import RedisError

from orchestrator.config import Settings
from orchestrator.errors import StoreError
from orchestrator.schedules import Schedule, slot_after, slot_at_or_before
from orchestrator.store import keys

log = structlog.get_logger()

FIRINGS_KEPT = 1000  # entries of a schedule's firings stream (approximately: MAXLEN ~)
OUTCOME_MAX = 500  # characters of a firing's outcome kept in Redis
MAX_SLEEP = 60.0  # the loop looks at the clock at least this often (a clock step, a config of hours)
BACKOFF = 2.0  # seconds between attempts while Redis cannot be reached

# Claim a slot unless it was fired already.
#   KEYS[1]  the schedule's last record    (keys.schedule_last)
#   KEYS[2]  the slot's claim              (keys.schedule_claim)
#   ARGV[1]  the slot (epoch seconds)
#   ARGV[2]  our token
#   ARGV[3]  the claim's TTL in milliseconds
# Returns 'fired' when the record holds this slot or a later one, 'claimed' when the claim is now ours,
# 'held' when another scheduler holds it.
CLAIM_LUA = """
local last = tonumber(redis.call('HGET', KEYS[1], 'slot') or '-1')
if last >= tonumber(ARGV[1]) then
  return 'fired'
end
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then
  return 'claimed'
end
return 'held'
"""

# Extend our claim while the firing runs (never someone else's).
#   KEYS[1]  the slot's claim;  ARGV[1] our token;  ARGV[2] the TTL in milliseconds
# Returns 1 if extended, 0 if the claim is gone or another's.
RENEW_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# Record a firing: raise the last record to this slot (never lower it), add the firing to the stream,
# then drop our claim. Raising ``last`` before the claim goes is what keeps a late claimer from firing
# the slot again: CLAIM_LUA reads ``last`` first.
#   KEYS[1]  the schedule's last record;  KEYS[2]  the slot's claim;  KEYS[3]  the firings stream
#   ARGV[1]  slot;  ARGV[2]  our token;  ARGV[3]  at (epoch seconds);  ARGV[4]  by (host:pid)
#   ARGV[5]  ok ('1' or '0');  ARGV[6]  outcome;  ARGV[7]  the stream's length cap
# Returns 1 if the claim was still ours, 0 if it had been lost (expired, taken over).
RECORD_LUA = """
local last = tonumber(redis.call('HGET', KEYS[1], 'slot') or '-1')
if tonumber(ARGV[1]) > last then
  redis.call('HSET', KEYS[1], 'slot', ARGV[1], 'at', ARGV[3], 'by', ARGV[4], 'ok', ARGV[5],
             'outcome', ARGV[6])
end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'slot', ARGV[1], 'at', ARGV[3],
           'by', ARGV[4], 'ok', ARGV[5], 'outcome', ARGV[6])
if redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
"""

ClaimResult = Literal["claimed", "fired", "held"]


@dataclass(frozen=True)
class FiringRecord:
    """One firing of a schedule: the slot, when it ended, who fired it, and how it went."""

    slot: int
    at: float
    by: str
    ok: bool
    outcome: str

    @classmethod
    def from_fields(cls, fields: Mapping[Any, Any]) -> FiringRecord:
        def text(name: str) -> str:
            value = fields.get(name.encode(), fields.get(name, b""))
            return value.decode(errors="replace") if isinstance(value, bytes) else str(value)

        return cls(
            slot=int(text("slot") or 0),
            at=float(text("at") or 0),
            by=text("by"),
            ok=text("ok") == "1",
            outcome=text("outcome"),
        )


@contextmanager
def _errors(what: str, name: str) -> Iterator[None]:
    try:
        yield
    except RedisError as exc:
        raise StoreError(f"cannot {what} of schedule {name!r}: {exc}") from exc


class ScheduleStore:
    """The schedules' keys in Redis (``orchestrator.store.keys``: ``schedule:<name>:...``)."""

    def __init__(self, client: redis.Redis, prefix: str = keys.PREFIX) -> None:
        self.client = client
        self.prefix = prefix
        self._claim = client.register_script(CLAIM_LUA)
        self._renew = client.register_script(RENEW_LUA)
        self._record = client.register_script(RECORD_LUA)

    def since(self, name: str, now: float) -> float:
        """When the fleet first saw the schedule: ``now`` if this is the first time (SET NX)."""
        key = keys.schedule_since(self.prefix, name)
        with _errors("read the first sighting", name):
            self.client.set(key, f"{now:.3f}", nx=True)
            value = self.client.get(key)
        return float(cast(bytes, value)) if value is not None else now

    def claim(self, name: str, slot: int, token: str, ttl: float) -> ClaimResult:
        """CLAIM_LUA: the slot is ours to fire, fired already, or held by another scheduler."""
        with _errors("claim a slot", name):
            result = self._claim(
                keys=[keys.schedule_last(self.prefix, name), keys.schedule_claim(self.prefix, name, slot)],
                args=[slot, token, _ms(ttl)],
            )
        text = result.decode() if isinstance(result, bytes) else str(result)
        if text not in ("claimed", "fired", "held"):
            raise StoreError(f"unexpected answer {text!r} claiming a slot of schedule {name!r}")
        return cast(ClaimResult, text)

    def renew(self, name: str, slot: int, token: str, ttl: float) -> bool:
        """Extend our claim on the slot by ``ttl``; False when it is no longer ours."""
        with _errors("renew the claim", name):
            kept = self._renew(keys=[keys.schedule_claim(self.prefix, name, slot)], args=[token, _ms(ttl)])
        return int(cast(int, kept)) == 1

    def record(self, name: str, token: str, firing: FiringRecord) -> bool:
        """RECORD_LUA: the firing recorded and our claim dropped; False when the claim had been lost."""
        with _errors("record a firing", name):
            kept = self._record(
                keys=[
                    keys.schedule_last(self.prefix, name),
                    keys.schedule_claim(self.prefix, name, firing.slot),
                    keys.schedule_firings(self.prefix, name),
                ],
                args=[
                    firing.slot,
                    token,
                    f"{firing.at:.3f}",
                    firing.by,
                    "1" if firing.ok else "0",
                    firing.outcome[:OUTCOME_MAX],
                    FIRINGS_KEPT,
                ],
            )
        return int(cast(int, kept)) == 1

    def last(self, name: str) -> FiringRecord | None:
        """The latest slot fired, None when the schedule never fired."""
        with _errors("read the last firing", name):
            fields = cast(dict[bytes, bytes], self.client.hgetall(keys.schedule_last(self.prefix, name)))
        return FiringRecord.from_fields(fields) if fields else None

    def firings(self, name: str) -> list[FiringRecord]:
        """Every firing the stream still holds, oldest first (a slot fired twice appears twice)."""
        with _errors("read the firings", name):
            entries = cast(
                list[tuple[bytes, dict[bytes, bytes]]],
                self.client.xrange(keys.schedule_firings(self.prefix, name)),
            )
        return [FiringRecord.from_fields(fields) for _id, fields in entries]


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


# --- what a firing does -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Firing:
    """What a kind's firing gets: the schedule, the slot it fires for, and this process's settings and
    operator file (the sweep's agents and options come from it)."""

    schedule: Schedule
    slot: int
    settings: Settings
    config_file: Path | None


FireFn = Callable[[Firing], str]  # returns one line saying what the firing did; raises when it failed


# What each kind of schedule does, bound by the runtime (``workers.runtime.firings``, imported with the
# Celery app): a firing starts work through the runtime, which the fleet does not import. Tests bind their
# own through ``Scheduler(firings=...)``.
FIRINGS: dict[str, FireFn] = {}


# --- the loop ---------------------------------------------------------------------------------------------


def who_am_i() -> str:
    """How this process names itself in a firing's record: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def slot_time(slot: float) -> str:
    """A slot or an instant as people read it: UTC, to the second."""
    return datetime.fromtimestamp(slot, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class Scheduler:
    """One scheduler process's view: ``tick`` fires what is due and says how long to wait; ``run`` loops.

    Several ``Scheduler``s (in several processes or hosts) share one ``ScheduleStore`` safely; see the
    module docstring for the rules.
    """

    def __init__(
        self,
        store: ScheduleStore,
        schedules: Sequence[Schedule],
        *,
        settings: Settings,
        config_file: Path | None = None,
        firings: Mapping[str, FireFn] | None = None,
        claim_ttl: float | None = None,
        who: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.schedules = list(schedules)
        self.settings = settings
        self.config_file = config_file
        self.firings = dict(firings if firings is not None else FIRINGS)
        self.claim_ttl = claim_ttl if claim_ttl is not None else settings.schedule_claim_ttl
        self.recheck = min(1.0, self.claim_ttl / 2)  # how soon to look again at a slot another holds
        self.who = who or who_am_i()
        self.clock = clock
        self._since: dict[str, float] = {}
        self._busy: dict[str, threading.Thread] = {}
        missing = {s.kind for s in self.schedules} - set(self.firings)
        if missing:
            raise ValueError(f"no firing for kind(s) {', '.join(sorted(missing))}")

    def tick(self) -> float:
        """Claim and start firing every schedule's due slot; the seconds until the next tick is due."""
        now = self.clock()
        wake = now + MAX_SLEEP
        for schedule in self.schedules:
            wake = min(wake, self._tick_one(schedule, now))
        return max(0.01, wake - self.clock())

    def _tick_one(self, schedule: Schedule, now: float) -> float:
        name = schedule.name
        upcoming = float(slot_after(schedule, now))
        busy = self._busy.get(name)
        if busy is not None and busy.is_alive():
            return min(upcoming, now + self.recheck)  # one firing of a schedule at a time per process
        if name not in self._since:
            self._since[name] = self.store.since(name, now)
        slot = slot_at_or_before(schedule, now)
        if slot < self._since[name]:
            return upcoming  # a slot from before the fleet knew the schedule: never fired
        token = f"{self.who}:{uuid.uuid4().hex[:12]}"
        claimed = self.store.claim(name, slot, token, self.claim_ttl)
        if claimed == "held":
            log.debug("schedule.held", schedule=name, slot=slot)
            return min(upcoming, now + self.recheck)  # its claimer may die: look again soon
        if claimed == "claimed":
            log.info(
                "schedule.claimed", schedule=name, slot=slot, at=slot_time(slot), late=round(now - slot, 3)
            )
            thread = threading.Thread(
                target=self.fire, args=(schedule, slot, token), name=f"schedule:{name}:{slot}", daemon=True
            )
            self._busy[name] = thread
            thread.start()
        return upcoming

    def fire(self, schedule: Schedule, slot: int, token: str) -> FiringRecord:
        """Fire ``slot`` under our claim (renewed while it runs) and record it; never raises for the
        firing failing (that is recorded), only when Redis cannot take the record."""
        name = schedule.name
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self.claim_ttl / 3):
                try:
                    if not self.store.renew(name, slot, token, self.claim_ttl):
                        log.warning("schedule.claim_lost", schedule=name, slot=slot)
                        return
                except StoreError as exc:
                    log.warning("schedule.renew_failed", schedule=name, slot=slot, error=str(exc))

        beat = threading.Thread(target=renew, name=f"schedule-claim:{name}:{slot}", daemon=True)
        beat.start()
        started = time.monotonic()
        try:
            outcome = self.firings[schedule.kind](
                Firing(schedule=schedule, slot=slot, settings=self.settings, config_file=self.config_file)
            )
            ok = True
        except Exception as exc:  # a failed firing is recorded, the scheduler goes on
            ok, outcome = False, f"{type(exc).__name__}: {exc}"
        finally:
            stop.set()
            beat.join()
        record = FiringRecord(
            slot=slot, at=self.clock(), by=self.who, ok=ok, outcome=" ".join(outcome.split())
        )
        for attempt in range(3):
            try:
                kept = self.store.record(name, token, record)
                break
            except StoreError as exc:
                if attempt == 2:
                    log.error("schedule.unrecorded", schedule=name, slot=slot, error=str(exc))
                    raise
                time.sleep(BACKOFF)
        (log.info if ok else log.warning)(
            "schedule.fired",
            schedule=name,
            kind=schedule.kind,
            slot=slot,
            ok=ok,
            outcome=record.outcome,
            seconds=round(time.monotonic() - started, 3),
            claim_kept=kept,
        )
        return record

    def step(self) -> float:
        """``tick``, never raising: Redis away or a bug is logged, and the next look is soon."""
        try:
            return self.tick()
        except StoreError as exc:  # Redis away: try again soon, the slots wait in the cron
            log.warning("scheduler.store_error", error=str(exc))
        except Exception:  # a bug must not silence every schedule of the fleet: say it, go on
            log.exception("scheduler.tick_failed")
        return BACKOFF

    def join(self) -> None:
        """Wait for the firings in flight (their records matter: an unrecorded firing is fired again by
        another scheduler once its claim expires)."""
        for thread in list(self._busy.values()):
            thread.join()

    def run(self, stop: threading.Event) -> None:
        """Tick until ``stop`` is set, then wait for the firings in flight."""
        log.info("scheduler.start", who=self.who, schedules=[s.name for s in self.schedules])
        while not stop.is_set():
            stop.wait(self.step())
        self.join()
        log.info("scheduler.stop", who=self.who)


def store_for(settings: Settings, prefix: str = keys.PREFIX) -> ScheduleStore:
    """The schedules' store on the fleet's Redis (``JURY_REDIS_URL``)."""
    from orchestrator.store.redis import from_url

    if not settings.redis_url:
        raise StoreError("the scheduler needs the fleet's Redis: set JURY_REDIS_URL")
    return ScheduleStore(from_url(settings.redis_url).client, prefix=prefix)


def run_scheduler(
    settings: Settings,
    schedules: Sequence[Schedule],
    stop: threading.Event,
    *,
    config_file: Path | None = None,
    firings: Mapping[str, FireFn] | None = None,
    store: ScheduleStore | None = None,
) -> None:
    """Fire ``schedules`` from this process until ``stop`` is set (``jury scheduler``, ``jury worker
    --scheduler``). Any number of processes may run this against one Redis."""
    scheduler = Scheduler(
        store or store_for(settings), schedules, settings=settings, config_file=config_file, firings=firings
    )
    scheduler.run(stop)


class JuryBeat(beat.Scheduler):
    """The scheduler as a celery beat scheduler class: ``celery -A workers.runtime.app beat -S
    workers.fleet.scheduler:JuryBeat`` fires the operator's ``[[schedules]]`` (``JURY_CONFIG``, else
    ``$JURY_DIR/config.toml``) against ``JURY_REDIS_URL`` with the very ``Scheduler`` of ``jury
    scheduler``: the same claim per schedule and slot, the same firings in the beat's process. Any number
    of beats and ``jury scheduler`` processes share a fleet, each slot fired once (at least once, see the
    module docstring).

    Beat's own machinery is not used: its entries (``beat_schedule``; Jury's app has none) and its
    persistence (a shelve file per beat process, which is what several beats cannot share) stay out;
    beat only runs the loop, calling ``tick`` and sleeping for what it answers.
    """

    jury: Scheduler | None = None

    def setup_schedule(self) -> None:
        from orchestrator.config import load_schedules, load_settings, operator_config_file

        settings = load_settings()
        path = operator_config_file(settings)
        schedules = load_schedules(path)
        if not schedules:
            where = str(path) if path else f"{settings.dir / 'config.toml'} (not found)"
            log.warning("scheduler.nothing", reason=f"no [[schedules]] in the operator's config {where}")
        self.jury = Scheduler(store_for(settings), schedules, settings=settings, config_file=path)
        log.info("scheduler.start", who=self.jury.who, schedules=[s.name for s in schedules], via="beat")

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if self.jury is None:  # built lazily (``lazy=True``), or closed: (again) now
            self.setup_schedule()
        assert self.jury is not None
        return self.jury.step()

    def close(self) -> None:  # beat calls it on SIGTERM, and again as its loop ends
        jury, self.jury = self.jury, None
        if jury is not None:
            jury.join()
            log.info("scheduler.stop", who=jury.who, via="beat")

    @property
    def info(self) -> str:
        names = ", ".join(s.name for s in self.jury.schedules) if self.jury else "JURY_CONFIG's"
        return f"    . jury schedules -> {names} (one claim per schedule and slot in JURY_REDIS_URL)"
