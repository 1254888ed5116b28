"""Fair sharing: the operator's ``[limits]`` as fleet-wide semaphores, held under leases.

A run's configuration carries the operator's ``[limits]`` (``orchestrator.spec.Limits``). Before an
agent task runs its agent, ``admit`` takes one slot of every semaphore that limits it:

- ``repo:<identity>`` with ``per_repo`` slots: the run's repository, the same on every host (its forge
  identity ``host/owner/repo`` for a PR URL, its top-level path for a local one:
  ``orchestrator.target.repo_identity``);
- ``model:<pattern>`` with ``per_model[pattern]`` slots, for each pattern that matches the agent (see
  ``subjects``): one semaphore per pattern, shared by every agent it matches.

All or none: a task that finds one of them full takes none, and is put back with a short countdown
(``workers.runtime.coordinator.run_task``) instead of waiting in its worker slot, so a busy repository or
model never holds a worker that another run could use. A slot is held by the task's lease token with a TTL
(the lease's), renewed by a heartbeat thread while the task runs and released when it ends; a holder that
dies stops renewing, and its slot expires with its lease (the next taker drops expired holders first).

A task put back waits in line: the take that found a semaphore full also adds the task (``waiter_id``:
its kind, run and action) to that semaphore's waiters, oldest first, and a release that frees a slot
pops the oldest waiter and hands it to the releasing worker, which sends that task again at once
(``workers.runtime.coordinator.wake_waiters``). So a freed slot is taken as soon as it frees, not after the
put-back's countdown. The countdown copy stays the guarantee: a waiter whose wake was lost (its worker
died between release and send, or the woken copy found the waiting task still holding its lease and
went away as busy) is taken when its countdown ends, and whichever copy comes second finds the action
done or held and does nothing. A take that succeeds drops the task from the waiters of every semaphore
it took.

Where the semaphores live is a ``Slots``: ``RedisSlots`` for a fleet (one sorted set per semaphore,
holder -> expiry on the Redis server's clock; every take, renewal and count one Lua script) and
``MemorySlots`` for one process (the same rules under a lock, by a clock a test moves). Both pass
``tests/integration/test_slots.py``.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import NamedTuple, Protocol, cast

import redis
import structlog
from redis.exceptions import RedisError

from orchestrator.errors import StoreError
from orchestrator.fold import RunState
from orchestrator.refute.families import spec_family
from orchestrator.spec import TERMINAL_STATES, AgentSpec, Limits
from orchestrator.store import keys as store_keys
from orchestrator.store.memory import Clock
from orchestrator.store.redis_codec import text
from orchestrator.target import repo_identity

log = structlog.get_logger()

# The longest a task sleeps in its worker slot for a model's Retry-After, once a call; a model that asks for
# longer, answers 429 without saying how long, or refuses the same call again sends the task back to the
# queue (``workers.agents.run.RateLimited``).
SLEEP_AT_MOST = 5.0
# A model's refusals (``RateLimited``) of one action after which it is not put back again: the action fails
# as any whose models keep failing (``workers.runtime.coordinator.run_task``), so a quota that never comes
# back ends the run in time, and no back-off is slept out in a worker slot.
# (``workers.runtime.seating.defer_after`` stops deferring at this count; ``run_task`` gives up at it first.)
MAX_BACKOFFS = 30
# The longest countdown a rate-limited task is put back with: a longer Retry-After is cut to it. The message
# waits that long in a worker's ETA queue, which must stay within the visibility timeout (``put_back_cap``).
PUT_BACK_AT_MOST = 900.0
# The longest countdown of a 429 that names no wait (no Retry-After): its back-off doubles up to it.
BACKOFF_AT_MOST = 300.0


@dataclass(frozen=True)
class Slot:
    """One semaphore a task needs a slot of: its name, its size, and how a message names it."""

    name: str  # "repo:<identity>" or "model:<pattern>"
    limit: int
    what: str  # e.g. "[limits] per_repo = 4 (/src/app)"


def subjects(spec: AgentSpec) -> list[str]:
    """What a ``per_model`` pattern is matched against, lower case: the agent's model as its
    configuration names it (``model``, e.g. ``anthropic/claude-sonnet-4`` through a router), and
    ``FAMILY/MODEL`` with the agent's family (``family``, else the vendor the model names, else the CLI's
    own: ``orchestrator.refute.families.spec_family``) and ``default`` for an agent that names no model.

    So ``anthropic/*`` limits an HTTP agent whose model is ``anthropic/claude-sonnet-4`` and the
    ``claude`` CLI with ``model = "sonnet"`` or with no model at all. Only the agent's configured model
    counts, not its ``fallback`` models. An agent with neither a model nor a family is matched by no
    pattern.
    """
    model = (spec.model or "").strip().lower()
    found = [model] if model else []
    family = spec_family(spec)
    if family:
        qualified = f"{family}/{model or 'default'}"
        if not model.startswith(f"{family}/"):
            found.append(qualified)
    return found


def wanted(state: RunState, key: str) -> list[Slot]:
    """The slots the action ``key`` of the run needs before it runs its agent; none when nothing limits
    it, when it has no agent (a push), or when it will not run (done, or the run ended or cancelled)."""
    cfg, action = state.config, state.actions.get(key)
    if cfg is None or action is None or action.agent is None or action.agent not in cfg.agents:
        return []
    if action.done or state.cancel_requested or state.state in TERMINAL_STATES:
        return []
    return slots_for(cfg.limits, repo_identity(state.target), cfg.agents[action.agent])


def slots_for(limits: Limits, repo: str | None, spec: AgentSpec) -> list[Slot]:
    """The semaphores ``limits`` puts on an agent task of ``spec`` in the repository ``repo``."""
    found: list[Slot] = []
    if limits.per_repo is not None and repo:
        found.append(Slot(f"repo:{repo}", limits.per_repo, f"[limits] per_repo = {limits.per_repo} ({repo})"))
    names = subjects(spec)
    for pattern, n in sorted(limits.per_model.items()):
        if any(fnmatchcase(s, pattern.lower()) for s in names):
            found.append(Slot(f"model:{pattern}", n, f'[limits] per_model "{pattern}" = {n} ({spec.name})'))
    return found


class Waiter(NamedTuple):
    """A task put back because a semaphore was full: what a release sends again."""

    kind: str
    slug: str
    key: str


def waiter_id(kind: str, slug: str, key: str) -> str:
    """How a waiting task is named in a semaphore's waiters: ``[kind, slug, key]`` as JSON (a slug or key
    may hold any character, a JSON list parses back whatever they hold)."""
    return json.dumps([kind, slug, key], separators=(",", ":"))


def parse_waiter(member: str) -> Waiter | None:
    """The task ``waiter_id`` named, or None for a member that is not one (nothing is sent for it)."""
    try:
        found = json.loads(member)
    except ValueError:
        return None
    if not (isinstance(found, list) and len(found) == 3 and all(isinstance(v, str) and v for v in found)):
        return None
    return Waiter(*found)


# -- where the semaphores live ---------------------------------------------------------------------------


class Slots(Protocol):
    """The fleet's semaphores: one per name, each a set of holders that expire."""

    def take(self, slots: Sequence[Slot], holder: str, ttl: float, waiter: str | None = None) -> Slot | None:
        """Take a slot of every one of ``slots`` for ``holder`` until ``ttl`` seconds from now, or none of
        them: None when taken (a holder that has one already keeps it, renewed), else the first that was
        full. Expired holders are dropped first: a slot whose holder died is free again.

        With a ``waiter`` (``waiter_id``): a full semaphore adds it to its waiters, keeping the time it
        first waited (the waiters expire ``ttl`` after the last one joined); a take that succeeds drops it
        from the waiters of every one of ``slots``."""
        ...

    def renew(self, slots: Sequence[Slot], holder: str, ttl: float) -> int:
        """Extend ``holder``'s unexpired slots to ``ttl`` from now; how many it still held."""
        ...

    def release(self, slots: Sequence[Slot], holder: str) -> list[str]:
        """Give ``holder``'s slots back (none held: nothing happens) and pop the oldest waiter of each
        semaphore where that freed a slot: the waiters to send again now, each once, in order."""
        ...

    def holders(self, name: str) -> list[str]:
        """The unexpired holders of the semaphore ``name``, for tests and the fleet's views."""
        ...

    def waiters(self, name: str) -> list[str]:
        """The waiters of the semaphore ``name``, oldest first, for tests and the fleet's views."""
        ...


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


# Take a slot of every semaphore, or none.
#   KEYS[i]      the semaphores, i = 1..n        (store_keys.slots)
#   KEYS[n+i]    the waiters of KEYS[i]          (store_keys.waiters)
#   ARGV[1]      the holder's token
#   ARGV[2]      the TTL, milliseconds
#   ARGV[3]      the waiter (waiter_id), or '' for none
#   ARGV[3+i]    the size of KEYS[i]
# Returns 0 when every slot is taken (or was held already: renewed), else i, the first full semaphore,
# whose waiters the waiter joined (NX: it keeps the time it first waited).
# The clock is the Redis server's, the same for every worker whatever their own clocks say.
TAKE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local waiter = ARGV[3]
local n = #KEYS / 2
for i = 1, n do
  local key = KEYS[i]
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if not redis.call('ZSCORE', key, ARGV[1]) and redis.call('ZCARD', key) >= tonumber(ARGV[3 + i]) then
    if waiter ~= '' then
      redis.call('ZADD', KEYS[n + i], 'NX', now, waiter)
      if redis.call('PTTL', KEYS[n + i]) < ttl then redis.call('PEXPIRE', KEYS[n + i], ttl) end
    end
    return i
  end
end
for i = 1, n do
  redis.call('ZADD', KEYS[i], now + ttl, ARGV[1])
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
  if waiter ~= '' then redis.call('ZREM', KEYS[n + i], waiter) end
end
return 0
"""

# Give the holder's slots back, and wake the oldest waiter of each semaphore where that freed a slot.
#   KEYS[i]      the semaphores, i = 1..n
#   KEYS[n+i]    the waiters of KEYS[i]
#   ARGV[1]      the holder's token
# Returns the waiters popped, in the order of KEYS.
RELEASE_LUA = """
local n = #KEYS / 2
local woken = {}
for i = 1, n do
  if redis.call('ZREM', KEYS[i], ARGV[1]) == 1 then
    local popped = redis.call('ZPOPMIN', KEYS[n + i])
    if popped[1] then table.insert(woken, popped[1]) end
  end
end
return woken
"""

# Extend the holder's unexpired slots.
#   KEYS[i]  the semaphores
#   ARGV[1]  the holder's token
#   ARGV[2]  the TTL, milliseconds
# Returns how many of them it still held.
RENEW_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local kept = 0
for _, key in ipairs(KEYS) do
  local until_ = redis.call('ZSCORE', key, ARGV[1])
  if until_ and tonumber(until_) > now then
    redis.call('ZADD', key, now + ttl, ARGV[1])
    if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
    kept = kept + 1
  end
end
return kept
"""

# The unexpired holders of one semaphore (expired ones dropped).
#   KEYS[1]  the semaphore
HOLDERS_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""


class RedisSlots:
    """``Slots`` in Redis under ``prefix``: ``slots:<name>``, a sorted set of holder -> expiry (ms), and
    ``waiters:<name>``, a sorted set of waiter -> when it first waited (ms)."""

    def __init__(self, client: redis.Redis, prefix: str = store_keys.PREFIX) -> None:
        self.client = client
        self.prefix = prefix
        self._take = client.register_script(TAKE_LUA)
        self._renew = client.register_script(RENEW_LUA)
        self._release = client.register_script(RELEASE_LUA)
        self._holders = client.register_script(HOLDERS_LUA)

    def _keys(self, slots: Sequence[Slot]) -> list[str]:
        return [store_keys.slots(self.prefix, s.name) for s in slots]

    def _with_waiters(self, slots: Sequence[Slot]) -> list[str]:
        return self._keys(slots) + [store_keys.waiters(self.prefix, s.name) for s in slots]

    def take(self, slots: Sequence[Slot], holder: str, ttl: float, waiter: str | None = None) -> Slot | None:
        """TAKE_LUA: all of them or none."""
        if not slots:
            return None
        args: list[str | int] = [holder, _ms(ttl), waiter or "", *(s.limit for s in slots)]
        try:
            full = self._take(keys=self._with_waiters(slots), args=args)
        except RedisError as exc:
            raise StoreError(f"cannot take a slot of {slots[0].name!r}: {exc}") from exc
        i = int(cast(int, full))
        return slots[i - 1] if i else None

    def renew(self, slots: Sequence[Slot], holder: str, ttl: float) -> int:
        """RENEW_LUA."""
        if not slots:
            return 0
        try:
            return int(cast(int, self._renew(keys=self._keys(slots), args=[holder, _ms(ttl)])))
        except RedisError as exc:
            raise StoreError(f"cannot renew the slot of {slots[0].name!r}: {exc}") from exc

    def release(self, slots: Sequence[Slot], holder: str) -> list[str]:
        """RELEASE_LUA."""
        if not slots:
            return []
        try:
            woken = cast(list[bytes | str], self._release(keys=self._with_waiters(slots), args=[holder]))
        except RedisError as exc:
            raise StoreError(f"cannot release the slot of {slots[0].name!r}: {exc}") from exc
        return list(dict.fromkeys(text(w) for w in woken))

    def holders(self, name: str) -> list[str]:
        """HOLDERS_LUA."""
        try:
            found = cast(list[bytes | str], self._holders(keys=[store_keys.slots(self.prefix, name)]))
        except RedisError as exc:
            raise StoreError(f"cannot read the slots of {name!r}: {exc}") from exc
        return [text(h) for h in found]

    def waiters(self, name: str) -> list[str]:
        """ZRANGE of ``waiters:<name>``: oldest first."""
        try:
            found = cast(list[bytes | str], self.client.zrange(store_keys.waiters(self.prefix, name), 0, -1))
        except RedisError as exc:
            raise StoreError(f"cannot read the waiters of {name!r}: {exc}") from exc
        return [text(w) for w in found]


class MemorySlots:
    """``Slots`` in this process's memory, expiring by ``clock`` (epoch seconds): the scripts' rules
    under a lock. Thread-safe."""

    def __init__(self, clock: Clock = time.time) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.sems: dict[str, dict[str, float]] = {}  # name -> holder -> expiry
        self.lines: dict[str, dict[str, float]] = {}  # name -> waiter -> when it first waited
        self.lines_until: dict[str, float] = {}  # name -> when its waiters expire (as the Redis key does)

    def _line(self, name: str) -> dict[str, float]:
        line = self.lines.setdefault(name, {})
        if line and self.lines_until.get(name, 0.0) <= self.clock():
            line.clear()
        return line

    def _live(self, name: str) -> dict[str, float]:
        now = self.clock()
        sem = self.sems.setdefault(name, {})
        for holder in [h for h, until in sem.items() if until <= now]:
            del sem[holder]
        return sem

    def take(self, slots: Sequence[Slot], holder: str, ttl: float, waiter: str | None = None) -> Slot | None:
        """All of them or none, as TAKE_LUA."""
        with self.lock:
            now = self.clock()
            for s in slots:
                sem = self._live(s.name)
                if holder not in sem and len(sem) >= s.limit:
                    if waiter:
                        self._line(s.name).setdefault(waiter, now)
                        self.lines_until[s.name] = max(self.lines_until.get(s.name, 0.0), now + ttl)
                    return s
            for s in slots:
                self.sems[s.name][holder] = now + ttl
                if waiter:
                    self._line(s.name).pop(waiter, None)
            return None

    def renew(self, slots: Sequence[Slot], holder: str, ttl: float) -> int:
        """As RENEW_LUA."""
        with self.lock:
            kept = 0
            for s in slots:
                sem = self._live(s.name)
                if holder in sem:
                    sem[holder] = self.clock() + ttl
                    kept += 1
            return kept

    def release(self, slots: Sequence[Slot], holder: str) -> list[str]:
        """As RELEASE_LUA: ZPOPMIN orders by time, then by member."""
        with self.lock:
            woken: list[str] = []
            for s in slots:
                if self.sems.get(s.name, {}).pop(holder, None) is None:
                    continue
                line = self._line(s.name)
                if line:
                    oldest = min(line, key=lambda w: (line[w], w))
                    del line[oldest]
                    woken.append(oldest)
            return list(dict.fromkeys(woken))

    def holders(self, name: str) -> list[str]:
        with self.lock:
            return sorted(self._live(name))

    def waiters(self, name: str) -> list[str]:
        with self.lock:
            line = self._line(name)
            return sorted(line, key=lambda w: (line[w], w))


# -- a task's admission ----------------------------------------------------------------------------------


@dataclass
class Admission:
    """What ``admit`` found: ``full`` (the semaphore that had no slot; nothing was taken) or the slots
    now held, renewed by a heartbeat thread until ``release``."""

    slots: Slots
    held: list[Slot]
    holder: str
    ttl: float
    full: Slot | None = None
    attempt: int = 0  # the action's attempt: how many times a model sent it back
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Admission:
        if self.held:
            self._thread = threading.Thread(target=self._beat, name=f"slots:{self.holder}", daemon=True)
            self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                if self.slots.renew(self.held, self.holder, self.ttl) < len(self.held):
                    # Frozen past the TTL: another task may have its slot now. The lease decides whether
                    # this task may still record anything; the limit is over by one until it ends.
                    log.warning("limits.slot_lost", holder=self.holder, slots=[s.name for s in self.held])
            except StoreError as exc:
                log.warning("limits.renew_failed", holder=self.holder, error=str(exc))

    def release(self) -> list[Waiter]:
        """Stop renewing and give the slots back (a store error leaves them to expire); the waiting tasks
        the freed slots woke, for the caller to send again now (none when nothing was held)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            woken = self.slots.release(self.held, self.holder)
        except StoreError as exc:
            log.warning("limits.release_failed", holder=self.holder, error=str(exc))
            return []
        found: list[Waiter] = []
        for member in woken:
            waiter = parse_waiter(member)
            if waiter is None:
                log.warning("limits.bad_waiter", holder=self.holder, waiter=member[:200])
            else:
                found.append(waiter)
        return found


def admit(
    slots: Slots, state: RunState, key: str, holder: str, ttl: float, waiter: str | None = None
) -> Admission:
    """Take ``holder``'s slots for the action ``key`` (all or none) and start renewing them; with a
    ``waiter`` (``waiter_id``), a full semaphore keeps it in line to be woken by the next release."""
    action = state.actions.get(key)
    attempt = action.backoffs if action is not None else 0
    need = wanted(state, key)
    full = slots.take(need, holder, ttl, waiter) if need else None
    if full is not None:
        return Admission(slots, [], holder, ttl, full=full, attempt=attempt)
    return Admission(slots, need, holder, ttl, attempt=attempt).start()


def slot_wait(limit_wait: float, reap_after: float) -> float:
    """The countdown of a task put back for a full slot: ``limit_wait`` jittered by up to half either way
    (the tasks of a sweep do not come back in step), and under ``reap_after / 2``: a slot frees within one
    task, so the task is soon back in the queue (its sent mark carries the countdown for the reaper)."""
    return clamp(limit_wait * random.uniform(0.5, 1.5), reap_after)


def clamp(seconds: float, reap_after: float) -> float:
    """A slot's put-back countdown: at least a tenth of a second, under ``reap_after / 2``."""
    return round(max(0.1, min(seconds, reap_after / 2)), 3)


def put_back_cap(visibility_timeout: float) -> float:
    """The longest countdown a task is put back with: ``PUT_BACK_AT_MOST``, and under half the broker's
    visibility timeout (after which Redis hands an unacknowledged message, an ETA one too, out again)."""
    return min(PUT_BACK_AT_MOST, visibility_timeout / 2)


def rate_limit_wait(asked: float | None, attempt: int, limit_wait: float, cap: float) -> float:
    """The countdown of a task whose model refused it (``RateLimited``) for the ``attempt``-th time (0: the
    first): the model's Retry-After when it named one, honoured up to ``cap`` (``put_back_cap``); else,
    a 429 that named no wait, the ``attempt``-th of ``limit_wait`` x 2^n (jittered by up to half either way:
    a storm's tasks do not come back in step), under ``BACKOFF_AT_MOST`` and ``cap``. The task's sent mark
    carries the countdown, so the reaper does not take it for lost before it ends."""
    if asked is None:
        asked = min(limit_wait * 2 ** min(attempt, 32), BACKOFF_AT_MOST) * random.uniform(0.5, 1.5)
        asked = min(asked, BACKOFF_AT_MOST)
    return round(max(0.1, min(asked, cap)), 3)
