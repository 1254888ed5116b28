"""The budget ledger: an agent call reserves its projected cost before it starts and reconciles after.

Three hashes hold the money (keys from ``orchestrator.store.keys``): the run's (``ledger_run``), the
fleet's per UTC day (``ledger_day``), each with ``spent``, ``reserved`` and ``unknown_calls``; and one per
call (``ledger_call``) with its ``run``, ``day``, ``amount`` and ``state``:

    reserve ──> reserved ──reconcile(actual)──> reconciled
       │            ├────reconcile(None)──────> unknown      (unknown_calls += 1, never counted as $0)
       │            └────release─────────────> released     (the call did not happen)
       └──────> refused                                       (a ceiling said no; nothing reserved)

Every write is one Lua script, so concurrent workers never overshoot a ceiling and a redelivered task
that reserves or reconciles the same ``call_id`` again changes nothing. ``MemoryLedger`` keeps the same
books in one process (the scripts' rules in Python under a lock, TTLs by an injectable clock), so the
workers' code is tested without Redis; both pass ``tests/integration/test_ledger.py``.

Amounts are USD floats at the API and integer micro-dollars (USD × 1e6) in Redis: HINCRBY is exact, so
thousands of small charges never drift the way HINCRBYFLOAT's doubles do. Lua's numbers are doubles,
exact for integers below 2**53 µ$ (about $9 billion).
"""

from __future__ import annotations

import math
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Literal, Protocol, cast

import redis
import structlog
from pydantic import BaseModel, ConfigDict
from redis.exceptions import RedisError

from orchestrator.cost import FLOOR_USD
from orchestrator.errors import StoreError
from orchestrator.store import keys
from orchestrator.store.memory import Clock
from orchestrator.store.redis_scripts import expire_with_run, name_in_run

log = structlog.get_logger()

MICRO = 1_000_000
# What a refusal says the projection is, after the amounts (in cents: ``usd``): the reader of "budget
# exhausted" sees a sum over a ceiling and must know where the sum's last term came from.
PROJECTED = "this call's projected cost"
PROJECTION_NOTE = (  # no double quote nor backslash: RESERVE_LUA holds it in a Lua string
    f" (projected: what the call may cost, reserved before it runs and settled to its real cost after; "
    f"${FLOOR_USD:.2f} for an agent whose price is not known)"
)
DAY_RE = re.compile(r"\d{8}")
CALL_TTL_DAYS = 30
DAY_TTL_DAYS = 400

# Reserve a call's projected cost against three ceilings, or refuse; idempotent per call.
#   KEYS[1]  the call hash      (keys.ledger_call)
#   KEYS[2]  the run's hash     (keys.ledger_run)
#   KEYS[3]  the day's hash     (keys.ledger_day)
#   KEYS[4]  the run's key set  (keys.run_index): the call hash is named there, if the run keeps one
#   KEYS[5]  the run's log      (keys.events): with KEYS[4], when the run's hash expires (expire_with_run)
#   ARGV[1]  the run's slug
#   ARGV[2]  the day, YYYYMMDD
#   ARGV[3]  the projection, µ$
#   ARGV[4]  the call ceiling, µ$ ('' = none)
#   ARGV[5]  the run ceiling, µ$ ('' = none)
#   ARGV[6]  the day ceiling, µ$ ('' = none)
#   ARGV[7]  the call hash's TTL, seconds
#   ARGV[8]  the day hash's TTL, seconds
# Returns {1 reserved | 0 refused, reason ('' when reserved), amount µ$, 1 if the call existed else 0};
# for an existing call it returns the first answer and writes nothing.
RESERVE_LUA = (
    """
local state = redis.call('HGET', KEYS[1], 'state')
if state then
  local reason = redis.call('HGET', KEYS[1], 'reason') or ''
  return {state == 'refused' and 0 or 1, reason, redis.call('HGET', KEYS[1], 'amount'), 1}
end
"""
    + name_in_run("KEYS[4]", "KEYS[1]")
    + f'local PROJECTED, NOTE = "{PROJECTED}", "{PROJECTION_NOTE}"\n'
    + """local p = tonumber(ARGV[3])
local function usd(m) return string.format('$%.2f', m / 1000000) end
local function check(key, ceiling, name)
  if ceiling == '' then return nil end
  local c = tonumber(ceiling)
  local s = tonumber(redis.call('HGET', key, 'spent') or '0')
  local r = tonumber(redis.call('HGET', key, 'reserved') or '0')
  if s + r + p > c then
    return name .. ' ceiling: spent ' .. usd(s) .. ' + reserved ' .. usd(r) .. ' + ' .. PROJECTED
      .. ' ' .. usd(p) .. ' > ceiling ' .. usd(c) .. NOTE
  end
  return nil
end
local reason = nil
if ARGV[4] ~= '' and p > tonumber(ARGV[4]) then
  reason = 'call ceiling: ' .. PROJECTED .. ' ' .. usd(p) .. ' > ceiling ' .. usd(tonumber(ARGV[4])) .. NOTE
end
reason = reason or check(KEYS[2], ARGV[5], 'run') or check(KEYS[3], ARGV[6], 'day')
if reason then
  redis.call('HSET', KEYS[1], 'run', ARGV[1], 'day', ARGV[2], 'amount', ARGV[3], 'state', 'refused',
    'reason', reason)
  redis.call('EXPIRE', KEYS[1], ARGV[7])
  return {0, reason, ARGV[3], 0}
end
redis.call('HINCRBY', KEYS[2], 'reserved', ARGV[3])
"""
    + expire_with_run("KEYS[4]", "KEYS[5]", "KEYS[2]")
    + """redis.call('HINCRBY', KEYS[3], 'reserved', ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[8])
redis.call('HSET', KEYS[1], 'run', ARGV[1], 'day', ARGV[2], 'amount', ARGV[3], 'state', 'reserved')
redis.call('EXPIRE', KEYS[1], ARGV[7])
return {1, '', ARGV[3], 0}
"""
)

# Settle a reserved call: give back its reservation, then record what it cost, or that nobody knows.
#   KEYS[1]  the call hash      (keys.ledger_call)
#   KEYS[2]  the run's hash     (keys.ledger_run, of the call's run)
#   KEYS[3]  the day's hash     (keys.ledger_day, of the call's day)
#   KEYS[4]  the run's key set and KEYS[5] its log (keys.run_index, keys.events): when the run's hash
#            expires (expire_with_run)
#   ARGV[1]  the run's slug and ARGV[2] the day, as read from the call hash (checked again here)
#   ARGV[3]  'reconcile' or 'release'
#   ARGV[4]  the actual cost, µ$ ('' = unknown)                       (reconcile only)
#   ARGV[5]  the charge to book for an unknown cost, µ$ ('' = none)   (reconcile only)
# Returns {state after, 1 if this call changed it else 0}; state 'missing' if there is no such call,
# 'mismatch' if the call hash does not name this run and day. A settled call is left as it is.
SETTLE_LUA = (
    """
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {'missing', 0} end
if state ~= 'reserved' then return {state, 0} end
if redis.call('HGET', KEYS[1], 'run') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'day') ~= ARGV[2] then
  return {'mismatch', 0}
end
local function add(key, field, n)
  if n ~= 0 then redis.call('HINCRBY', key, field, string.format('%d', n)) end
end
local amount = tonumber(redis.call('HGET', KEYS[1], 'amount'))
add(KEYS[2], 'reserved', -amount)
add(KEYS[3], 'reserved', -amount)
local after
if ARGV[3] == 'release' then
  after = 'released'
elseif ARGV[4] ~= '' then
  after = 'reconciled'
  add(KEYS[2], 'spent', tonumber(ARGV[4]))
  add(KEYS[3], 'spent', tonumber(ARGV[4]))
  redis.call('HSET', KEYS[1], 'actual', ARGV[4])
else
  after = 'unknown'
  add(KEYS[2], 'unknown_calls', 1)
  add(KEYS[3], 'unknown_calls', 1)
  if ARGV[5] ~= '' then
    add(KEYS[2], 'spent', tonumber(ARGV[5]))
    add(KEYS[3], 'spent', tonumber(ARGV[5]))
    redis.call('HSET', KEYS[1], 'charge', ARGV[5])
  end
end
redis.call('HSET', KEYS[1], 'state', after)
"""
    + expire_with_run("KEYS[4]", "KEYS[5]", "KEYS[2]")
    + """return {after, 1}
"""
)


class LedgerError(StoreError):
    """The ledger refused an operation on a call (unknown, refused or inconsistent)."""


class Reservation(BaseModel):
    """The answer to ``reserve``: ``reason`` names the ceiling that refused, with its numbers."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    reason: str | None
    call_id: str
    projection: float


class LedgerTotals(BaseModel):
    """A run's or a day's money in USD, and how many calls ended with an unknown cost."""

    model_config = ConfigDict(frozen=True)

    spent: float
    reserved: float
    unknown_calls: int


def to_micro(usd: float, what: str = "amount") -> int:
    """USD as integer micro-dollars; a negative, NaN or infinite amount is a ValueError."""
    if not math.isfinite(usd) or usd < 0:
        raise ValueError(f"{what} must be a finite amount >= 0 USD, got {usd!r}")
    return round(usd * MICRO)


def from_micro(micro: int) -> float:
    """Integer micro-dollars as USD."""
    return micro / MICRO


def utc_day(now: datetime | None = None) -> str:
    """The UTC day as ``YYYYMMDD``."""
    return (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%d")


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


@contextmanager
def _errors(what: str, name: str) -> Iterator[None]:
    try:
        yield
    except RedisError as exc:
        raise StoreError(f"cannot {what} {name!r}: {exc}") from exc


class BudgetLedger(Protocol):
    """What an agent call needs of the ledger; ``Ledger`` (Redis) and ``MemoryLedger`` (one process)."""

    def reserve(
        self,
        *,
        slug: str,
        call_id: str,
        projection: float,
        run_ceiling: float | None,
        call_ceiling: float | None,
        day_ceiling: float | None,
        day: str | None = None,
    ) -> Reservation:
        """Reserve ``projection`` for the call, or refuse naming the ceiling; idempotent per ``call_id``."""
        ...

    def reconcile(self, call_id: str, actual: float | None, *, unknown_charge: float | None = None) -> None:
        """Settle a reserved call at its actual cost (None: unknown); idempotent per ``call_id``."""
        ...

    def release(self, call_id: str) -> bool:
        """Give back a reserved call's reservation; False if there was none to give."""
        ...

    def spent(self, slug: str) -> LedgerTotals:
        """The run's totals."""
        ...

    def day_totals(self, day: str | None = None) -> LedgerTotals:
        """The fleet's totals for one UTC day (default today)."""
        ...

    def call(self, call_id: str) -> dict[str, str]:
        """The call's record as text (empty if unknown)."""
        ...


def refusal(
    amount: int, ceilings: Sequence[int | None], run: tuple[int, int], day: tuple[int, int]
) -> str | None:
    """Why ``amount`` µ$ may not be reserved, or None: RESERVE_LUA's rule and words, for ``MemoryLedger``.

    ``ceilings`` are the call's, the run's and the day's (None: none); ``run`` and ``day`` their books'
    (spent, reserved).
    """
    call_c, run_c, day_c = ceilings
    if call_c is not None and amount > call_c:
        return f"call ceiling: {PROJECTED} {_usd(amount)} > ceiling {_usd(call_c)}{PROJECTION_NOTE}"
    for name, ceiling, (spent, reserved) in (("run", run_c, run), ("day", day_c, day)):
        if ceiling is not None and spent + reserved + amount > ceiling:
            return (
                f"{name} ceiling: spent {_usd(spent)} + reserved {_usd(reserved)} + {PROJECTED} "
                f"{_usd(amount)} > ceiling {_usd(ceiling)}{PROJECTION_NOTE}"
            )
    return None


def _usd(micro: int) -> str:
    """Dollars and cents, as the Lua's ``usd``: a budget is read by a person, in cents."""
    return f"${micro / MICRO:.2f}"


Settled = tuple[str, bool, str | None]  # (the call's state after, whether this changed it, its slug)


class _LedgerBase(ABC):
    """What both ledgers do in Python: check amounts, turn USD into µ$ and back, log, raise on misuse.

    Subclasses keep the books: ``_reserve`` and ``_settle`` are each one atomic step (a Lua script in
    Redis, a lock in memory) with the semantics of RESERVE_LUA and SETTLE_LUA.
    """

    def today(self) -> str:
        """The UTC day a reservation without ``day`` is booked on."""
        return utc_day()

    @abstractmethod
    def _reserve(
        self, call_id: str, slug: str, day: str, amount: int, ceilings: list[int | None]
    ) -> tuple[bool, str, int, bool]:
        """RESERVE_LUA: (reserved, reason, amount µ$ booked for the call, whether the call existed)."""

    @abstractmethod
    def _settle(self, call_id: str, op: str, actual: int | None, charge: int | None) -> Settled:
        """SETTLE_LUA on the call's own run and day: (state after, changed, the call's slug)."""

    @abstractmethod
    def _totals(self, scope: Literal["run", "day"], name: str) -> tuple[int, int, int]:
        """(spent µ$, reserved µ$, unknown calls) of a run or a day."""

    @abstractmethod
    def call(self, call_id: str) -> dict[str, str]:
        """The call's record as text (empty if unknown): for inspection and tests."""

    def reserve(
        self,
        *,
        slug: str,
        call_id: str,
        projection: float,
        run_ceiling: float | None,
        call_ceiling: float | None,
        day_ceiling: float | None,
        day: str | None = None,
    ) -> Reservation:
        """Reserve ``projection`` for the call, or refuse if a ceiling would be passed (None: no ceiling).

        Refused when projection > call ceiling, or spent + reserved + projection > the run's or the day's
        ceiling. Idempotent per ``call_id``: a second reserve returns the first answer (refusals included:
        retry under a new ``call_id``) and counts nothing again.
        """
        day = day if day is not None else self.today()
        if not DAY_RE.fullmatch(day):
            raise ValueError(f"day must be YYYYMMDD, got {day!r}")
        amount = to_micro(projection, "projection")
        ceilings = [
            None if c is None else to_micro(c, name)
            for c, name in (
                (call_ceiling, "call_ceiling"),
                (run_ceiling, "run_ceiling"),
                (day_ceiling, "day_ceiling"),
            )
        ]
        ok, reason, stored, existed = self._reserve(call_id, slug, day, amount, ceilings)
        result = Reservation(ok=ok, reason=reason or None, call_id=call_id, projection=from_micro(stored))
        log.info(
            "ledger.reserved" if ok else "ledger.refused",
            slug=slug,
            call_id=call_id,
            day=day,
            projection=result.projection,
            reason=result.reason,
            repeat=existed,
        )
        return result

    def reconcile(self, call_id: str, actual: float | None, *, unknown_charge: float | None = None) -> None:
        """Settle the call: its reservation leaves ``reserved`` and ``actual`` joins ``spent``.

        ``actual=None`` records the cost as unknown: ``unknown_calls`` grows by one and ``unknown_charge``
        (a fallback estimate such as usd_per_minute × minutes), if given, joins ``spent``. Idempotent per
        ``call_id``. A call never reserved or refused is a ``LedgerError``.
        """
        actual_m = None if actual is None else to_micro(actual, "actual")
        charge_m = None if unknown_charge is None else to_micro(unknown_charge, "unknown_charge")
        state, changed, slug = self._settle(call_id, "reconcile", actual_m, charge_m)
        if state == "missing":
            raise LedgerError(f"ledger call {call_id!r} was never reserved: its cost cannot be booked")
        if state == "refused":
            raise LedgerError(f"ledger call {call_id!r} was refused: it should not have run")
        if not changed:
            log.info("ledger.reconcile_repeat", call_id=call_id, state=state)
            return
        if state == "unknown":
            log.warning("ledger.unknown_cost", slug=slug, call_id=call_id, charge=unknown_charge)
        else:
            log.info("ledger.reconciled", slug=slug, call_id=call_id, actual=actual)

    def release(self, call_id: str) -> bool:
        """Give back a reserved call's reservation (it did not happen); False if there was none to give."""
        state, changed, slug = self._settle(call_id, "release", None, None)
        if changed:
            log.info("ledger.released", slug=slug, call_id=call_id)
        else:
            log.info("ledger.release_noop", call_id=call_id, state=state)
        return changed

    def _as_totals(self, scope: Literal["run", "day"], name: str) -> LedgerTotals:
        spent, reserved, unknown = self._totals(scope, name)
        return LedgerTotals(spent=from_micro(spent), reserved=from_micro(reserved), unknown_calls=unknown)

    def spent(self, slug: str) -> LedgerTotals:
        """The run's totals."""
        return self._as_totals("run", slug)

    def day_totals(self, day: str | None = None) -> LedgerTotals:
        """The fleet's totals for one UTC day (default today)."""
        return self._as_totals("day", day if day is not None else self.today())


class Ledger(_LedgerBase):
    """Budget reservations in Redis, shared by every worker (see the module docstring)."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str = keys.PREFIX,
        *,
        call_ttl_days: float = CALL_TTL_DAYS,
        day_ttl_days: float = DAY_TTL_DAYS,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.call_ttl = max(1, int(call_ttl_days * 86400))
        self.day_ttl = max(1, int(day_ttl_days * 86400))
        self._reserve_script = client.register_script(RESERVE_LUA)
        self._settle_script = client.register_script(SETTLE_LUA)

    def _reserve(
        self, call_id: str, slug: str, day: str, amount: int, ceilings: list[int | None]
    ) -> tuple[bool, str, int, bool]:
        keys_ = [
            keys.ledger_call(self.prefix, call_id),
            keys.ledger_run(self.prefix, slug),
            keys.ledger_day(self.prefix, day),
            keys.run_index(self.prefix, slug),
            keys.events(self.prefix, slug),
        ]
        limits = ["" if c is None else str(c) for c in ceilings]
        args: list[str | int] = [slug, day, amount, *limits, self.call_ttl, self.day_ttl]
        with _errors("reserve for call", call_id):
            reply = cast(list[int | bytes | str], self._reserve_script(keys=keys_, args=args))
        reason, stored = _text(cast(bytes, reply[1])) or "", int(_text(cast(bytes, reply[2])) or 0)
        return int(reply[0]) == 1, reason, stored, int(reply[3]) == 1

    def _settle(self, call_id: str, op: str, actual: int | None, charge: int | None) -> Settled:
        call_key = keys.ledger_call(self.prefix, call_id)
        actual_a, charge_a = ("" if v is None else str(v) for v in (actual, charge))
        with _errors("settle call", call_id):
            run, day = (_text(v) for v in cast(list[bytes | None], self.client.hmget(call_key, "run", "day")))
            if run is None or day is None:
                return "missing", False, None
            keys_ = [call_key, keys.ledger_run(self.prefix, run), keys.ledger_day(self.prefix, day)]
            keys_ += [keys.run_index(self.prefix, run), keys.events(self.prefix, run)]
            reply = cast(
                list[bytes | int], self._settle_script(keys=keys_, args=[run, day, op, actual_a, charge_a])
            )
        state = _text(cast(bytes, reply[0])) or ""
        if state == "mismatch":
            raise LedgerError(f"ledger call {call_id!r} does not match its run and day: cannot {op} it")
        return state, int(reply[1]) == 1, run

    def _totals(self, scope: Literal["run", "day"], name: str) -> tuple[int, int, int]:
        key = keys.ledger_run(self.prefix, name) if scope == "run" else keys.ledger_day(self.prefix, name)
        with _errors("read ledger", key):
            values = cast(list[bytes | None], self.client.hmget(key, "spent", "reserved", "unknown_calls"))
        spent, reserved, unknown = (int(_text(v) or 0) for v in values)
        return spent, reserved, unknown

    def call(self, call_id: str) -> dict[str, str]:
        """The call's hash as text (empty if unknown): for inspection and tests."""
        with _errors("read call", call_id):
            raw = cast(dict[bytes, bytes], self.client.hgetall(keys.ledger_call(self.prefix, call_id)))
        return {str(_text(k)): str(_text(v)) for k, v in raw.items()}


class MemoryLedger(_LedgerBase):
    """The ledger in this process's memory: RESERVE_LUA and SETTLE_LUA in Python under one lock, the call
    and day records expiring by ``clock`` (epoch seconds) after the same TTLs as in Redis."""

    def __init__(
        self,
        clock: Clock = time.time,
        *,
        call_ttl_days: float = CALL_TTL_DAYS,
        day_ttl_days: float = DAY_TTL_DAYS,
    ) -> None:
        self.clock = clock
        self.call_ttl = max(1, int(call_ttl_days * 86400))
        self.day_ttl = max(1, int(day_ttl_days * 86400))
        self._lock = threading.Lock()
        self._calls: dict[str, tuple[dict[str, str], float]] = {}  # call id -> (record, expiry)
        self._runs: dict[str, dict[str, int]] = {}  # slug -> spent, reserved, unknown_calls
        self._days: dict[str, tuple[dict[str, int], float]] = {}  # day -> (totals, expiry)

    def today(self) -> str:
        """The clock's UTC day."""
        return utc_day(datetime.fromtimestamp(self.clock(), UTC))

    def _call(self, call_id: str) -> dict[str, str] | None:
        found = self._calls.get(call_id)
        if found is not None and found[1] <= self.clock():
            del self._calls[call_id]
            found = None
        return found[0] if found is not None else None

    def _day(self, day: str) -> dict[str, int]:
        found = self._days.get(day)
        if found is None or found[1] <= self.clock():
            found = self._days[day] = ({}, self.clock() + self.day_ttl)
        return found[0]

    def _reserve(
        self, call_id: str, slug: str, day: str, amount: int, ceilings: list[int | None]
    ) -> tuple[bool, str, int, bool]:
        with self._lock:
            if (record := self._call(call_id)) is not None:
                return record["state"] != "refused", record.get("reason", ""), int(record["amount"]), True
            run, day_books = self._runs.setdefault(slug, {}), self._day(day)
            reason = refusal(
                amount,
                ceilings,
                run=(run.get("spent", 0), run.get("reserved", 0)),
                day=(day_books.get("spent", 0), day_books.get("reserved", 0)),
            )
            record = {"run": slug, "day": day, "amount": str(amount)}
            if reason is not None:
                record |= {"state": "refused", "reason": reason}
            else:
                run["reserved"] = run.get("reserved", 0) + amount
                day_books["reserved"] = day_books.get("reserved", 0) + amount
                self._days[day] = (day_books, self.clock() + self.day_ttl)
                record["state"] = "reserved"
            self._calls[call_id] = (record, self.clock() + self.call_ttl)
            return reason is None, reason or "", amount, False

    def _settle(self, call_id: str, op: str, actual: int | None, charge: int | None) -> Settled:
        with self._lock:
            record = self._call(call_id)
            if record is None:
                return "missing", False, None
            slug = record["run"]
            if record["state"] != "reserved":
                return record["state"], False, slug
            run, day = self._runs.setdefault(slug, {}), self._day(record["day"])

            def add(field: str, n: int) -> None:
                for books in (run, day):
                    books[field] = books.get(field, 0) + n

            add("reserved", -int(record["amount"]))
            if op == "release":
                record["state"] = "released"
            elif actual is not None:
                add("spent", actual)
                record |= {"state": "reconciled", "actual": str(actual)}
            else:
                add("unknown_calls", 1)
                record["state"] = "unknown"
                if charge is not None:
                    add("spent", charge)
                    record["charge"] = str(charge)
            return record["state"], True, slug

    def _totals(self, scope: Literal["run", "day"], name: str) -> tuple[int, int, int]:
        with self._lock:
            if scope == "run":
                books = self._runs.get(name, {})
            else:
                found = self._days.get(name)
                books = found[0] if found is not None and found[1] > self.clock() else {}
            return books.get("spent", 0), books.get("reserved", 0), books.get("unknown_calls", 0)

    def call(self, call_id: str) -> dict[str, str]:
        """The call's record (empty if unknown or expired)."""
        with self._lock:
            return dict(self._call(call_id) or {})
