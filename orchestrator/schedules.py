"""The operator's ``[[schedules]]``: what a scheduler fires, when, and the cron arithmetic of its slots.

A schedule is one ``[[schedules]]`` table of the operator's file (never a repository's: a PR must not
choose what the fleet sweeps). Its ``cron`` is five fields (minute hour day month weekday) or an @ macro
(``@hourly``, ``@daily``...), read by ``croniter`` in the schedule's ``timezone`` (an IANA name, default
UTC). A sixth field is refused: croniter reads it as seconds, *last*, where most crons that take six put
seconds first, so ``*/20 * * * * *`` would fire every second of minutes 0, 20 and 40. A schedule that
fires within a minute names its seconds field apart, ``seconds = "*/10"`` (every ten seconds).

A **slot** is one instant the cron names, as an integer epoch second: the scheduler fires each slot
once (``workers.fleet.scheduler``), and a slot is also what names a firing in Redis. ``slot_at_or_before``
and ``slot_after`` are the two questions the scheduler asks; both answer in UTC epoch seconds, whatever
the schedule's timezone, so every host agrees on a slot's name.

``parse_schedules`` checks every table strictly: an unknown key, a bad cron or timezone, or a key that
does not apply to the schedule's kind is a ``ConfigError`` naming the file, the schedule and the key.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, tzinfo
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import ConfigError

ScheduleKind = Literal["review", "verify"]
KINDS: tuple[str, ...] = ("review", "verify")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
COMMON_KEYS: tuple[str, ...] = ("name", "cron", "kind", "repos", "timezone", "seconds")
CRON_FIELDS = ("minute", "hour", "day", "month", "weekday")
SECONDS_RE = re.compile(r"[0-9*/,-]{1,40}")  # one croniter seconds field: no space, so never two fields
NEXT_SHOWN = 3  # how many next firings a listing shows
# What a review schedule passes to the sweep: its filters (as `jury sweep --label/--base/--include-drafts`)
# and the jury options of a sweep.
REVIEW_KEYS: tuple[str, ...] = (
    "label",
    "base",
    "include_drafts",
    "publish",
    "push",
    "retry",
    "reviewers",
    "judge",
    "rounds",
    "budget",
)
VERIFY_KEYS: tuple[str, ...] = ("trunk",)
KIND_KEYS: dict[str, tuple[str, ...]] = {"review": REVIEW_KEYS, "verify": VERIFY_KEYS}
ALL_KEYS: tuple[str, ...] = (*COMMON_KEYS, *REVIEW_KEYS, *VERIFY_KEYS)


class Schedule(BaseModel):
    """One ``[[schedules]]`` table, checked. ``repos`` are what ``jury sweep`` takes (review) or what
    ``jury verify`` takes (verify); the review keys are None/empty for a verify schedule and the other
    way round."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    cron: str
    kind: ScheduleKind
    repos: tuple[str, ...]
    timezone: str = "UTC"
    seconds: str | None = None  # croniter's seconds field, apart from the five (None: at second 0)
    labels: tuple[str, ...] = ()
    base: str | None = None
    include_drafts: bool = False
    publish: bool = False
    push: bool | None = None  # the runs push jury/<slug> to the PR's repository; None: the [jury] push
    retry: bool = False  # a head whose run ended human/failed/cancelled is swept again (`jury sweep --retry`)
    reviewers: tuple[str, ...] | None = None
    judge: str | None = None
    rounds: int | None = Field(default=None, ge=1)
    budget: float | None = Field(default=None, ge=0)
    trunk: str | None = None

    @property
    def tz(self) -> tzinfo:
        return UTC if self.timezone == "UTC" else ZoneInfo(self.timezone)

    @property
    def expression(self) -> str:
        """What croniter reads: the five fields, then the seconds field if any (croniter's order)."""
        return self.cron if self.seconds is None else f"{self.cron} {self.seconds}"

    def cron_text(self) -> str:
        """The cron as a listing shows it: the expression, its seconds and the timezone unless UTC."""
        text = self.cron if self.seconds is None else f"{self.cron} at seconds {self.seconds}"
        return text if self.timezone == "UTC" else f"{text} ({self.timezone})"


def slot_at_or_before(schedule: Schedule, now: float) -> int:
    """The latest slot at or before ``now`` (epoch seconds): the one a scheduler would fire now.

    croniter's ``get_prev`` is strict, so it starts one second past ``now``'s whole second: cron slots
    fall on whole seconds, and the latest before that instant is the latest at or before ``now``.
    """
    start = datetime.fromtimestamp(math.floor(now) + 1, schedule.tz)
    return int(croniter(schedule.expression, start).get_prev(datetime).timestamp())


def slot_after(schedule: Schedule, now: float) -> int:
    """The first slot strictly after ``now`` (epoch seconds): when the schedule fires next."""
    return next_slots(schedule, now, 1)[0]


def next_slots(schedule: Schedule, now: float, count: int = NEXT_SHOWN) -> list[int]:
    """The first ``count`` slots strictly after ``now``: what a listing shows, so an operator sees what
    the cron means (``*/20 * * * *``: :00, :20, :40) rather than what it looks like. Fewer when the cron
    stops firing (a year field)."""
    it = croniter(schedule.expression, datetime.fromtimestamp(now, schedule.tz))
    found: list[int] = []
    try:
        while len(found) < count:
            found.append(int(it.get_next(datetime).timestamp()))
    except CroniterBadDateError:
        pass
    return found


def parse_schedules(source: str, tables: object, *, now: float | None = None) -> list[Schedule]:
    """The ``[[schedules]]`` array of ``source``, every table checked (see the module docstring).

    ``now`` (default: the clock) is when a cron must still fire after: an expression whose every slot
    is past (a year field in the past, the 30th of February) is refused rather than never firing.
    """
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{source}: schedules: must be an array of tables, [[schedules]]")
    found: list[Schedule] = []
    seen: set[str] = set()
    for index, table in enumerate(tables, start=1):
        schedule = _parse_one(source, index, table, now)
        if schedule.name in seen:
            raise ConfigError(f"{source}: [[schedules]] {schedule.name!r}: name: used by another schedule")
        seen.add(schedule.name)
        found.append(schedule)
    return found


def _parse_one(source: str, index: int, table: dict[str, Any], now: float | None) -> Schedule:
    name = table.get("name")
    label = f"{name!r}" if isinstance(name, str) and name else f"#{index}"
    where = f"{source}: [[schedules]] {label}"

    def bad(key: str, why: str) -> ConfigError:
        return ConfigError(f"{where}: {key}: {why}")

    for key in table:
        if key not in ALL_KEYS:
            raise bad(key, f"unknown key (allowed: {', '.join(ALL_KEYS)})")
    for key in ("name", "cron", "kind", "repos"):
        if key not in table:
            raise bad(key, "missing (every schedule needs name, cron, kind and repos)")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise bad("name", "must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit")
    kind = table["kind"]
    if kind not in KINDS:
        raise bad("kind", f"must be one of {', '.join(KINDS)}")
    for key in table:
        other = next((k for k, keys in KIND_KEYS.items() if key in keys and k != kind), None)
        if other is not None:
            raise bad(key, f"applies to kind = {other!r} only, this schedule is kind = {kind!r}")
    timezone = _string(table.get("timezone", "UTC"), lambda why: bad("timezone", why))
    tz = _zone(timezone, lambda why: bad("timezone", why))
    cron = " ".join(_string(table["cron"], lambda why: bad("cron", why)).split())
    _check_fields(cron, lambda why: bad("cron", why))
    seconds = None
    if "seconds" in table:
        seconds = _string(table["seconds"], lambda why: bad("seconds", why)).strip()
        if cron.startswith("@") or not SECONDS_RE.fullmatch(seconds):
            raise bad(
                "seconds",
                f"{seconds!r}: one cron field for the second of the minute ('*/10', '0,30', '15'), "
                "beside a five-field cron (not an @ macro)",
            )
    _check_cron(cron if seconds is None else f"{cron} {seconds}", tz, now, lambda why: bad("cron", why))
    fields: dict[str, Any] = {
        "name": name,
        "cron": cron,
        "seconds": seconds,
        "kind": kind,
        "timezone": timezone,
        "repos": tuple(_strings(table["repos"], lambda why: bad("repos", why), non_empty=True)),
    }
    if "label" in table:
        value = table["label"]
        labels = [value] if isinstance(value, str) else value
        fields["labels"] = tuple(_strings(labels, lambda why: bad("label", why + " (or one string)")))
    for key in ("base", "judge", "trunk"):
        if key in table:
            fields[key] = _string(table[key], lambda why, k=key: bad(k, why))
    for key in ("include_drafts", "publish", "push", "retry"):
        if key in table:
            if not isinstance(table[key], bool):
                raise bad(key, "must be true or false")
            fields[key] = table[key]
    if "reviewers" in table:
        fields["reviewers"] = tuple(
            _strings(table["reviewers"], lambda why: bad("reviewers", why), non_empty=True)
        )
    if "rounds" in table:
        rounds = table["rounds"]
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise bad("rounds", "must be a whole number >= 1")
        fields["rounds"] = rounds
    if "budget" in table:
        budget = table["budget"]
        if isinstance(budget, bool) or not isinstance(budget, int | float) or not budget >= 0:
            raise bad("budget", "must be a number of US dollars >= 0")
        fields["budget"] = float(budget)
    return Schedule(**fields)


def _string(value: object, bad: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise bad("must be a non-empty string")
    return value.strip()


def _strings(value: object, bad: Any, *, non_empty: bool = False) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise bad("must be a list of non-empty strings")
    if non_empty and not value:
        raise bad("must name at least one")
    if len(set(value)) != len(value):
        raise bad("lists the same entry twice")
    return [v.strip() for v in value]


def _zone(name: str, bad: Any) -> tzinfo:
    if name == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise bad(f"unknown time zone {name!r} (an IANA name, e.g. 'Europe/Paris' or 'UTC')") from None


def _check_fields(cron: str, bad: Any) -> None:
    """Five fields or an @ macro, nothing else: a sixth is where croniter and the reader part ways."""
    if cron.startswith("@"):
        return
    count = len(cron.split())
    if count == 6:
        raise bad(
            f"{cron!r} has 6 fields: croniter reads a sixth as seconds, last "
            f"('{' '.join(CRON_FIELDS)} second'), not first as some crons do, so '*/20 * * * * *' fires "
            'every second of minutes 0, 20 and 40; write five fields, and seconds = "..." apart to '
            "fire within a minute"
        )
    if count != 5:
        raise bad(
            f"{cron!r} is not a cron expression: {count} field{'s' if count != 1 else ''}; "
            f"a cron here is five ('{' '.join(CRON_FIELDS)}') "
            "or an @ macro (@hourly, @daily, @weekly, @monthly, @yearly)"
        )


def _check_cron(cron: str, tz: tzinfo, now: float | None, bad: Any) -> None:
    start = datetime.fromtimestamp(now, tz) if now is not None else datetime.now(tz)
    try:
        croniter(cron, start).get_next(datetime)
    except CroniterBadDateError:
        raise bad(f"{cron!r} never fires again") from None
    except (CroniterError, ValueError, KeyError, IndexError) as exc:
        raise bad(
            f"{cron!r} is not a cron expression ({exc}); five fields 'minute hour day month weekday' "
            '(seconds = "..." apart), or @hourly, @daily, @weekly...'
        ) from None
