"""The budget ledger: one contract, run against ``Ledger`` (the test Redis, ``JURY_TEST_REDIS_URL``,
db 0, under a random key prefix) and ``MemoryLedger`` (no Redis; its TTLs and its "today" run on a
``ManualClock``). Then each one's own details."""

from __future__ import annotations

import re
import threading

import pytest
import redis
from structlog.testing import capture_logs

from orchestrator.store import keys
from orchestrator.store.memory import ManualClock
from workers.fleet.ledger import (
    PROJECTION_NOTE,
    Ledger,
    LedgerError,
    LedgerTotals,
    MemoryLedger,
    Reservation,
    to_micro,
    utc_day,
)

DAY = "20990101"

AnyLedger = Ledger | MemoryLedger


@pytest.fixture(params=["redis", "memory"])
def ledger(request: pytest.FixtureRequest) -> AnyLedger:
    if request.param == "redis":
        return Ledger(request.getfixturevalue("client"), request.getfixturevalue("prefix"))
    return MemoryLedger(ManualClock())


def reserve(
    ledger: AnyLedger,
    call_id: str,
    projection: float,
    *,
    slug: str = "run-a",
    run: float | None = None,
    call: float | None = None,
    day: float | None = None,
) -> Reservation:
    return ledger.reserve(
        slug=slug,
        call_id=call_id,
        projection=projection,
        run_ceiling=run,
        call_ceiling=call,
        day_ceiling=day,
        day=DAY,
    )


def totals(spent: float, reserved: float, unknown: int = 0) -> LedgerTotals:
    return LedgerTotals(spent=spent, reserved=reserved, unknown_calls=unknown)


def test_reserve_reconcile_release_arithmetic(ledger: AnyLedger) -> None:
    assert reserve(ledger, "c1", 1.5) == Reservation(ok=True, reason=None, call_id="c1", projection=1.5)
    assert reserve(ledger, "c2", 0.75).ok
    assert reserve(ledger, "c3", 0.25, slug="run-b").ok
    assert ledger.spent("run-a") == totals(0, 2.25)
    assert ledger.spent("run-b") == totals(0, 0.25)
    assert ledger.day_totals(DAY) == totals(0, 2.5)

    ledger.reconcile("c1", 1.2)  # cost less than projected: the whole reservation leaves, 1.2 is spent
    assert ledger.spent("run-a") == totals(1.2, 0.75)
    assert ledger.day_totals(DAY) == totals(1.2, 1.0)

    assert ledger.release("c2")  # did not happen: reservation given back, nothing spent
    assert ledger.spent("run-a") == totals(1.2, 0)
    assert ledger.day_totals(DAY) == totals(1.2, 0.25)

    ledger.reconcile("c3", 2.0)  # cost more than projected: all of it counts
    assert ledger.spent("run-b") == totals(2.0, 0)
    assert ledger.day_totals(DAY) == totals(3.2, 0)
    assert ledger.call("c3")["state"] == "reconciled"
    assert ledger.call("c2")["state"] == "released"


def test_amounts_are_integer_micro_dollars(ledger: AnyLedger) -> None:
    for n in range(30):
        assert reserve(ledger, f"tiny-{n}", 0.1).ok
        ledger.reconcile(f"tiny-{n}", 0.1)
    assert ledger.spent("run-a") == totals(3.0, 0)  # 30 × 0.1 with floats would be 3.0000000000000013
    assert ledger.call("tiny-0")["actual"] == "100000"
    assert to_micro(0.000_000_4) == 0 and to_micro(1.000_000_6) == 1_000_001


def test_untouched_totals_are_zero(ledger: AnyLedger) -> None:
    assert ledger.spent("nobody") == totals(0, 0)
    assert ledger.day_totals("20000101") == totals(0, 0)


@pytest.mark.parametrize(
    ("projection", "ceilings", "ok", "names"),
    [
        (2.0, {"call": 1.0}, False, ("call ceiling: this call's projected cost $2.00 > ceiling $1.00",)),
        (1.0, {"call": 1.0}, True, ()),
        (
            2.0,
            {"run": 3.0},
            False,
            ("run ceiling: spent $1.00 + reserved $0.50 + this call's projected cost $2.00 > ceiling $3.00",),
        ),
        (1.5, {"run": 3.0}, True, ()),
        (
            2.0,
            {"day": 3.0},
            False,
            ("day ceiling: spent $1.00 + reserved $0.75 + this call's projected cost $2.00 > ceiling $3.00",),
        ),
        (1.25, {"day": 3.0}, True, ()),
        (2.0, {"call": 1.0, "run": 0.1, "day": 0.1}, False, ("call ceiling",)),  # checked in this order
        (2.0, {"run": 0.1, "day": 0.1}, False, ("run ceiling",)),
    ],
)
def test_ceilings_refuse_with_a_reason(
    ledger: AnyLedger, projection: float, ceilings: dict[str, float], ok: bool, names: tuple[str, ...]
) -> None:
    # run-a: spent 1.0, reserved 0.5. The day also holds run-b's 0.25 reservation.
    assert reserve(ledger, "spent", 1.0).ok
    ledger.reconcile("spent", 1.0)
    assert reserve(ledger, "pending", 0.5).ok
    assert reserve(ledger, "other-run", 0.25, slug="run-b").ok
    before_run, before_day = ledger.spent("run-a"), ledger.day_totals(DAY)

    got = reserve(
        ledger, "new", projection, run=ceilings.get("run"), call=ceilings.get("call"), day=ceilings.get("day")
    )
    assert got.ok is ok
    if ok:
        assert got.reason is None
        assert ledger.spent("run-a").reserved == pytest.approx(before_run.reserved + projection)
    else:
        assert got.reason is not None
        for name in names:
            assert name in got.reason
        # every refusal says what the projection is, and no amount has more than cents
        assert got.reason.endswith(PROJECTION_NOTE) and "projected: what the call may cost" in got.reason
        assert not re.search(r"\d\.\d{3}", got.reason), got.reason
        assert ledger.spent("run-a") == before_run  # a refusal reserves nothing
        assert ledger.day_totals(DAY) == before_day
        assert ledger.call("new")["state"] == "refused"


def test_zero_run_ceiling_refuses_any_positive_projection(ledger: AnyLedger) -> None:
    got = reserve(ledger, "c", 0.000_001, run=0.0)
    assert not got.ok and got.reason is not None and got.reason.startswith("run ceiling")
    assert reserve(ledger, "free", 0.0, run=0.0).ok  # nothing asked, nothing passed
    assert ledger.spent("run-a") == totals(0, 0)


def test_reserve_is_idempotent_per_call_id(ledger: AnyLedger) -> None:
    first = reserve(ledger, "c1", 1.0, run=5)
    again = reserve(ledger, "c1", 3.0, run=5)  # a redelivered task, maybe with a new projection
    assert again == first
    assert ledger.spent("run-a") == totals(0, 1.0)
    assert ledger.day_totals(DAY) == totals(0, 1.0)

    refused = reserve(ledger, "big", 10.0, run=5)
    assert not refused.ok
    assert reserve(ledger, "big", 0.1, run=5) == refused  # the first answer, refusals included

    ledger.reconcile("c1", 0.5)
    assert reserve(ledger, "c1", 1.0, run=5) == first  # even after reconcile: no new reservation
    assert ledger.spent("run-a") == totals(0.5, 0)


def test_reconcile_is_idempotent_per_call_id(ledger: AnyLedger) -> None:
    assert reserve(ledger, "c1", 1.0).ok
    ledger.reconcile("c1", 0.4)
    with capture_logs() as logs:
        ledger.reconcile("c1", 0.4)
        ledger.reconcile("c1", 9.0)
        ledger.reconcile("c1", None)
        assert not ledger.release("c1")
    assert ledger.spent("run-a") == totals(0.4, 0)
    assert ledger.day_totals(DAY) == totals(0.4, 0)
    assert [e["event"] for e in logs] == ["ledger.reconcile_repeat"] * 3 + ["ledger.release_noop"]


def test_release_is_idempotent_and_final(ledger: AnyLedger) -> None:
    assert reserve(ledger, "c1", 1.0).ok
    assert ledger.release("c1")
    assert not ledger.release("c1")
    ledger.reconcile("c1", 2.0)  # settled already: ignored
    assert ledger.spent("run-a") == totals(0, 0)
    assert not ledger.release("never-reserved")


def test_unknown_cost_is_counted_not_zero(ledger: AnyLedger) -> None:
    assert reserve(ledger, "c1", 1.0).ok
    with capture_logs() as logs:
        ledger.reconcile("c1", None)
    assert ledger.spent("run-a") == totals(0, 0, unknown=1)
    assert ledger.day_totals(DAY) == totals(0, 0, unknown=1)
    assert ledger.call("c1")["state"] == "unknown"
    assert "ledger.unknown_cost" in [e["event"] for e in logs]
    ledger.reconcile("c1", None)  # idempotent: still one unknown call
    assert ledger.spent("run-a").unknown_calls == 1


def test_unknown_cost_with_fallback_charge(ledger: AnyLedger) -> None:
    assert reserve(ledger, "c1", 1.0).ok
    assert reserve(ledger, "c2", 1.0).ok
    ledger.reconcile("c1", None, unknown_charge=0.8)  # e.g. usd_per_minute × minutes
    ledger.reconcile("c2", 0.3)
    assert ledger.spent("run-a") == totals(1.1, 0, unknown=1)
    assert ledger.day_totals(DAY) == totals(1.1, 0, unknown=1)
    assert ledger.call("c1")["charge"] == "800000"


def test_reconcile_of_unreserved_or_refused_call_is_an_error(ledger: AnyLedger) -> None:
    with pytest.raises(LedgerError, match="never reserved"):
        ledger.reconcile("ghost", 1.0)
    assert not reserve(ledger, "no", 5.0, call=1.0).ok
    with pytest.raises(LedgerError, match="refused"):
        ledger.reconcile("no", 1.0)
    assert ledger.spent("run-a") == totals(0, 0)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_bad_amounts_are_refused_before_redis(ledger: AnyLedger, bad: float) -> None:
    with pytest.raises(ValueError, match="projection"):
        reserve(ledger, "c", bad)
    assert reserve(ledger, "c", 1.0).ok
    with pytest.raises(ValueError, match="actual"):
        ledger.reconcile("c", bad)
    assert ledger.spent("run-a") == totals(0, 1.0)


def test_day_defaults_to_today_utc(ledger: AnyLedger) -> None:
    got = ledger.reserve(
        slug="run-a", call_id="today", projection=0.5, run_ceiling=None, call_ceiling=None, day_ceiling=None
    )
    assert got.ok
    assert ledger.call("today")["day"] == ledger.today()
    assert ledger.day_totals() == totals(0, 0.5)
    with pytest.raises(ValueError, match="YYYYMMDD"):
        ledger.reserve(
            slug="r",
            call_id="x",
            projection=1,
            run_ceiling=None,
            call_ceiling=None,
            day_ceiling=None,
            day="2099-01-01",
        )


def test_concurrent_reservations_never_pass_the_day_ceiling(ledger: AnyLedger) -> None:
    start = threading.Barrier(17)
    results: list[Reservation] = []
    lock = threading.Lock()
    done = threading.Event()
    seen_reserved: list[float] = []

    def worker(n: int) -> None:
        start.wait()
        got = reserve(ledger, f"c{n}", 1.0, slug=f"run-{n % 2}", day=5.0)
        with lock:
            results.append(got)

    def watcher() -> None:
        start.wait()
        while True:  # at least one look, however soon the reservations are over
            seen_reserved.append(ledger.day_totals(DAY).reserved)
            if done.is_set():
                break

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    observer = threading.Thread(target=watcher)
    observer.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    observer.join()

    assert sum(r.ok for r in results) == 5
    assert all(r.reason is not None and r.reason.startswith("day ceiling") for r in results if not r.ok)
    assert seen_reserved and max(seen_reserved) <= 5.0
    assert ledger.day_totals(DAY) == totals(0, 5.0)
    run0, run1 = ledger.spent("run-0"), ledger.spent("run-1")
    assert run0.reserved + run1.reserved == 5.0
    assert run0.reserved > 0 or run1.reserved > 0


# -- Redis only ----------------------------------------------------------------------------------------------


def test_redis_books_are_integer_hashes(client: redis.Redis, prefix: str) -> None:
    ledger = Ledger(client, prefix)
    assert reserve(ledger, "c1", 0.1).ok
    ledger.reconcile("c1", 0.1)
    assert client.hget(keys.ledger_run(prefix, "run-a"), "spent") == b"100000"
    assert client.hget(keys.ledger_day(prefix, DAY), "spent") == b"100000"
    assert 0 < client.ttl(keys.ledger_call(prefix, "c1")) <= 30 * 86400
    assert 0 < client.ttl(keys.ledger_day(prefix, DAY)) <= 400 * 86400
    assert ledger.today() == utc_day()


# -- memory only ---------------------------------------------------------------------------------------------


def test_memory_today_is_the_clock_s_day() -> None:
    clock = ManualClock(start=4_102_444_800.0)  # 2100-01-01T00:00:00Z
    ledger = MemoryLedger(clock)
    assert ledger.today() == "21000101"

    def today(call_id: str) -> Reservation:
        return ledger.reserve(
            slug="r", call_id=call_id, projection=1.0, run_ceiling=None, call_ceiling=None, day_ceiling=1.5
        )

    assert today("c1").ok
    assert not today("c2").ok
    clock.advance(86400)  # a new UTC day: a new day's ceiling
    assert today("c3").ok
    assert ledger.call("c3")["day"] == "21000102"
    assert ledger.day_totals("21000101") == totals(0, 1.0) and ledger.day_totals() == totals(0, 1.0)


def test_memory_records_expire_after_their_ttls() -> None:
    clock = ManualClock()
    ledger = MemoryLedger(clock)
    assert reserve(ledger, "c1", 1.0).ok
    clock.advance(30 * 86400)  # the call record is gone: its reservation can no longer be booked
    assert ledger.call("c1") == {}
    with pytest.raises(LedgerError, match="never reserved"):
        ledger.reconcile("c1", 1.0)
    assert ledger.day_totals(DAY) == totals(0, 1.0)
    clock.advance(370 * 86400)  # the day's books go 400 days after its last reservation
    assert ledger.day_totals(DAY) == totals(0, 0)
    assert ledger.spent("run-a") == totals(0, 1.0)  # a run's books go with the run, not by themselves
