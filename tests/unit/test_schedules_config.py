"""``[[schedules]]``: the strict check of each table (every error names the file, the schedule and the key),
the operator-only rule, and the cron arithmetic of slots (seconds fields, exact slots, time zones and
daylight saving)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from orchestrator.config import RepoFile, load_config, load_schedules
from orchestrator.errors import ConfigError
from orchestrator.schedules import Schedule, next_slots, parse_schedules, slot_after, slot_at_or_before

SRC = "/etc/jury/config.toml"
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC).timestamp()


def table(**keys: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": "nightly",
        "cron": "0 2 * * *",
        "kind": "verify",
        "repos": ["acme/app"],
    }
    base.update(keys)
    return {k: v for k, v in base.items() if v is not None}


def one(**keys: object) -> Schedule:
    [schedule] = parse_schedules(SRC, [table(**keys)], now=NOW)
    return schedule


def refused(tables: object) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_schedules(SRC, tables, now=NOW)
    return str(caught.value)


def at(text: str, tz: str = "UTC") -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC if tz == "UTC" else ZoneInfo(tz)).timestamp()


# --- the tables -------------------------------------------------------------------------------------------


def test_a_review_schedule_with_every_key() -> None:
    s = one(
        kind="review",
        cron="*/15 * * * *",
        repos=["acme/app", "gitlab:acme/sub/lib"],
        label=["jury", "ready"],
        base="main",
        include_drafts=True,
        publish=True,
        retry=True,
        reviewers=["codex"],
        judge="codex",
        rounds=3,
        budget=2,
        timezone="Europe/Paris",
    )
    assert s.repos == ("acme/app", "gitlab:acme/sub/lib")
    assert s.labels == ("jury", "ready") and s.base == "main" and s.include_drafts and s.publish and s.retry
    assert s.reviewers == ("codex",) and s.judge == "codex" and s.rounds == 3 and s.budget == 2.0
    assert s.cron_text() == "*/15 * * * * (Europe/Paris)"


def test_defaults_and_a_single_label() -> None:
    s = one()
    assert (s.timezone, s.labels, s.base, s.include_drafts, s.publish, s.trunk) == (
        "UTC",
        (),
        None,
        False,
        False,
        None,
    )
    assert s.cron_text() == "0 2 * * *"
    assert one(kind="review", label="jury").labels == ("jury",)


@pytest.mark.parametrize(
    ("keys", "key", "why"),
    [
        ({"crons": "x"}, "crons", "unknown key"),
        ({"cron": "61 * * * *"}, "cron", "is not a cron expression"),
        ({"cron": "every night"}, "cron", "is not a cron expression"),
        ({"cron": ""}, "cron", "non-empty string"),
        ({"cron": 5}, "cron", "non-empty string"),
        ({"cron": "0 0 30 2 *"}, "cron", "never fires again"),
        ({"cron": "0 0 1 1 * 0 2020"}, "cron", "7 fields; a cron here is five"),
        ({"cron": "0 2 * *"}, "cron", "4 fields"),
        ({"cron": "*/20 * * * * *"}, "cron", "has 6 fields: croniter reads a sixth as seconds, last"),
        ({"cron": "0 * * * * *"}, "cron", "('minute hour day month weekday second')"),
        ({"seconds": "*/2 *"}, "seconds", "one cron field for the second"),
        ({"cron": "@hourly", "seconds": "*/2"}, "seconds", "not an @ macro"),
        ({"seconds": 5}, "seconds", "non-empty string"),
        ({"timezone": "Mars/Olympus"}, "timezone", "unknown time zone"),
        ({"kind": "deploy"}, "kind", "must be one of review, verify"),
        ({"repos": []}, "repos", "at least one"),
        ({"repos": "acme/app"}, "repos", "list of non-empty strings"),
        ({"repos": ["a/b", "a/b"]}, "repos", "same entry twice"),
        ({"label": "jury"}, "label", "applies to kind = 'review' only"),
        ({"kind": "review", "trunk": "main"}, "trunk", "applies to kind = 'verify' only"),
        ({"kind": "review", "publish": "yes"}, "publish", "true or false"),
        ({"kind": "review", "rounds": 0}, "rounds", ">= 1"),
        ({"kind": "review", "budget": -1}, "budget", ">= 0"),
        ({"kind": "review", "label": [1]}, "label", "list of non-empty strings"),
    ],
)
def test_a_bad_key_names_the_file_the_schedule_and_the_key(
    keys: dict[str, object], key: str, why: str
) -> None:
    message = refused([table(**keys)])
    assert message.startswith(f"{SRC}: [[schedules]] 'nightly': {key}: "), message
    assert why in message


def test_missing_keys_names_and_duplicates() -> None:
    assert "[[schedules]] 'nightly': cron: missing" in refused(
        [{"name": "nightly", "kind": "verify", "repos": ["a/b"]}]
    )
    assert "[[schedules]] #2: name: missing" in refused([table(), {"cron": "* * * * *"}])
    assert "[[schedules]] 'a:b': name: must be" in refused([table(name="a:b")])
    assert "[[schedules]] 'nightly': name: used by another schedule" in refused([table(), table()])
    assert "must be an array of tables" in refused({"name": "x"})


def test_the_operators_file_is_checked_strictly(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[[schedules]]\nname = "n"\ncron = "0 2 * * *"\nkind = "verify"\nrepos = ["a/b"]\n')
    assert [s.name for s in load_schedules(path)] == ["n"]
    assert load_schedules(None) == []
    path.write_text(
        '[[schedules]]\nname = "n"\ncron = "0 2 * * *"\nkind = "verify"\nrepos = ["a/b"]\nevery = 1\n'
    )
    with pytest.raises(ConfigError, match=r"\[\[schedules\]\] 'n': every: unknown key"):
        load_schedules(path)
    with pytest.raises(ConfigError, match="every: unknown key"):  # any command reading the file says so
        load_config(None, path)


def test_a_review_schedules_agents_must_exist(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[[schedules]]\nname = "prs"\ncron = "*/5 * * * *"\nkind = "review"\nrepos = ["a/b"]\n'
        'reviewers = ["nobody"]\n'
    )
    with pytest.raises(ConfigError, match=r"\[\[schedules\]\] 'prs': reviewer: unknown agent 'nobody'"):
        load_schedules(path)


def test_a_repository_cannot_schedule() -> None:
    text = '[[schedules]]\nname = "x"\ncron = "* * * * *"\nkind = "review"\nrepos = ["evil/repo"]\n'
    cfg = load_config(RepoFile(source="jury.toml", identity="/src/app", local=True, text=text))
    assert any("schedules: ignored: only the operator's configuration may set it" in n for n in cfg.notes)


# --- slots ------------------------------------------------------------------------------------------------


def test_a_six_field_cron_is_refused_with_croniters_order_and_the_trap() -> None:
    """``*/20 * * * * *`` reads as "every 20 seconds" and croniter fires it every second of minutes 0, 20
    and 40: refused, with croniter's order, the trap and the way to name seconds."""
    message = refused([table(cron="*/20 * * * * *")])
    assert "croniter reads a sixth as seconds, last ('minute hour day month weekday second')" in message
    assert "fires every second of minutes 0, 20 and 40" in message and 'seconds = "..."' in message
    assert one(cron="@daily").cron == "@daily"  # a macro is fine
    assert one(cron="  */20  *  * * * ").cron == "*/20 * * * *"  # spacing is not a field


def test_the_next_three_firings_say_what_a_cron_means() -> None:
    base = at("2026-12-01T09:05:00")
    every20 = one(cron="*/20 * * * *")
    assert next_slots(every20, base) == [
        at("2026-12-01T09:20:00"),
        at("2026-12-01T09:40:00"),
        at("2026-12-01T10:00:00"),
    ]
    paris = one(cron="0 3 * * *", timezone="Europe/Paris")
    assert next_slots(paris, at("2026-03-28T12:00:00"), 2) == [
        at("2026-03-29T01:00:00"),
        at("2026-03-30T01:00:00"),
    ]


def test_slots_of_a_seconds_cron() -> None:
    every3 = one(cron="* * * * *", seconds="*/3")
    assert every3.cron_text() == "* * * * * at seconds */3"
    base = at("2026-12-01T09:00:00")
    assert slot_at_or_before(every3, base) == base  # on a slot: that slot
    assert slot_at_or_before(every3, base + 0.999) == base
    assert slot_at_or_before(every3, base + 2.999) == base
    assert slot_at_or_before(every3, base + 3) == base + 3
    assert slot_after(every3, base) == base + 3  # strictly after
    assert slot_after(every3, base + 2.5) == base + 3
    assert slot_after(every3, base - 0.5) == base


def test_slots_of_a_daily_cron_in_a_time_zone_across_daylight_saving() -> None:
    paris = one(cron="0 3 * * *", timezone="Europe/Paris")
    # Winter: 03:00 in Paris is 02:00 UTC; summer (from 29 March 2026): 01:00 UTC.
    assert slot_after(paris, at("2026-03-28T12:00:00")) == at("2026-03-29T01:00:00")
    assert slot_after(paris, at("2026-03-27T12:00:00")) == at("2026-03-28T02:00:00")
    assert slot_at_or_before(paris, at("2026-03-29T00:59:59")) == at("2026-03-28T02:00:00")
    assert slot_at_or_before(paris, at("2026-03-29T01:00:00")) == at("2026-03-29T03:00:00", "Europe/Paris")
    # 02:30 does not exist on 29 March (fires at 03:00 CEST) and occurs twice on 25 October (fires twice).
    half_past_two = one(cron="30 2 * * *", timezone="Europe/Paris")
    assert slot_after(half_past_two, at("2026-03-28T12:00:00")) == at("2026-03-29T01:00:00")
    first = slot_after(half_past_two, at("2026-10-24T12:00:00"))
    assert (first, slot_after(half_past_two, first)) == (at("2026-10-25T00:30:00"), at("2026-10-25T01:30:00"))
    utc = one(cron="0 3 * * *")
    assert slot_after(utc, at("2026-03-28T12:00:00")) == at("2026-03-29T03:00:00")


def test_the_latest_slot_is_the_one_after_a_long_outage() -> None:
    hourly = one(cron="@hourly")
    # The fleet was down from 09:10 to 14:20: the slot a scheduler fires when it is back is 14:00 alone.
    assert slot_at_or_before(hourly, at("2026-12-01T14:20:00")) == at("2026-12-01T14:00:00")
    assert slot_after(hourly, at("2026-12-01T14:20:00")) == at("2026-12-01T15:00:00")


# --- what a firing says -----------------------------------------------------------------------------------


def test_a_verify_firing_leads_with_its_regressions() -> None:
    from workers.runtime.firings import verify_outcome
    from workers.verification.reverify import VerifyReport, VerifyRow

    def row(finding: str, status: str, passed: bool = True) -> VerifyRow:
        return VerifyRow(
            slug="app-1",
            finding=finding,
            claim="c",
            loc="a.py:1",
            command="pytest",
            trunk="main",
            trunk_sha="b" * 40,
            status=status,  # type: ignore[arg-type]
            passed_at_acceptance=passed,
            since="a" * 40,
        )

    assert (
        verify_outcome(VerifyReport())
        == "0 regression test(s) of 0 run(s) on trunk: 0 passed, 0 failed, 0 could not run"
    )
    report = VerifyReport(
        rows=[
            row("F1", "passed"),
            row("F2", "failed"),
            row("F3", "error"),
            row("F4", "failed", passed=False),
        ],
        runs=["app-1"],
        notes=["app-2: its repository is not on this host"],
    )
    assert verify_outcome(report) == (
        f"1 REGRESSION(S): F2 of app-1 ({'a' * 12}..{'b' * 12}); 4 regression test(s) of 1 run(s) on trunk: "
        "1 passed, 2 failed, 1 could not run; 1 not re-verified: app-2: its repository is not on this host"
    )
