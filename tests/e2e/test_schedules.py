"""Schedules on real Redis: one firing per slot from several schedulers, none lost when one dies.

- A ``jury scheduler`` and a ``jury worker --scheduler`` (its loop in a thread) fire a schedule with a
  slot every three seconds (a seconds field in the cron): every slot is fired exactly once across both
  (the ``firings`` stream, where a slot fired twice would show twice), over at least three consecutive
  slots; the one that fired the latest slot is SIGKILLed, and the next slot is fired by the other.
- The same with two ``celery beat`` processes running Jury's scheduler class (``-S
  workers.fleet.scheduler:JuryBeat``).
- In one process, with a clock the test moves: a new schedule does not fire its past; after an outage
  of several slots only the latest fires, once; a slot whose claimer died (a claim nobody renews) is
  taken over once the claim expires; a failed firing is recorded as such and not retried.
- ``jury schedules`` lists each schedule with its kind, cron, repositories, last firing and next firing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import redis

from orchestrator.config import Settings
from orchestrator.domain import JuryConfigEvent
from orchestrator.schedules import Schedule, next_slots, parse_schedules, slot_after
from orchestrator.store import keys
from orchestrator.store.redis import from_url
from tests.conftest import outside_env
from tests.fakes.forge_server import FakePR, ForgeServer
from workers.fleet.scheduler import Firing, FiringRecord, Scheduler, ScheduleStore, slot_time

T = TypeVar("T")
EVERY = 3  # seconds between the slots of the multi-process test's schedule


def wait_for(what: str, check: Callable[[], T | None], timeout: float, why: Callable[[], str] = str) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}\n{why()}")
        time.sleep(0.05)


@pytest.fixture
def store(shared_redis: str) -> Iterator[ScheduleStore]:
    client = redis.Redis.from_url(shared_redis)
    yield ScheduleStore(client, prefix=keys.PREFIX)
    client.close()


def test_a_six_field_cron_is_refused_when_the_config_loads(jury, tmp_path: Path) -> None:
    """``*/20 * * * * *`` looks like every 20 seconds and croniter fires it every second of minutes 0, 20
    and 40: ``jury schedules`` and ``jury scheduler`` refuse the file, naming croniter's order (exit 2)."""
    config = config_file(tmp_path, "*/20 * * * * *", "acme/tools")
    for args in (("schedules",), ("scheduler",)):
        r = jury(*args, "--config", str(config), env={"JURY_REDIS_URL": "redis://127.0.0.1:1/0"})
        assert r.code == 2, r.out + r.err
        assert "[[schedules]] 'tick': cron: '*/20 * * * * *' has 6 fields" in r.err, r.err
        assert "('minute hour day month weekday second')" in r.err and "Traceback" not in r.err


def config_file(tmp_path: Path, cron: str, repo: Path | str, seconds: str | None = None) -> Path:
    path = tmp_path / "config.toml"
    every = f'seconds = "{seconds}"\n' if seconds else ""
    path.write_text(
        f'[[schedules]]\nname = "tick"\ncron = "{cron}"\n{every}kind = "verify"\nrepos = ["{repo}"]\n'
        f'\n[[schedules]]\nname = "nightly"\ncron = "0 2 * * *"\ntimezone = "Europe/Paris"\nkind = "review"\n'
        f'repos = ["acme/app", "acme/lib"]\nlabel = "jury"\n'
    )
    return path


def spawn(
    name: str,
    tmp_path: Path,
    url: str,
    config: Path,
    extra: dict[str, str] | None = None,
    *,
    worker: bool = False,
) -> subprocess.Popen[bytes]:
    """``jury scheduler``, or with ``worker`` a ``jury worker --scheduler`` (the loop in a worker's thread;
    its config from JURY_CONFIG)."""
    env = outside_env()
    env.update(extra or {})
    env.update(
        {
            "JURY_REDIS_URL": url,
            "JURY_DIR": str(tmp_path / f"state-{name}"),  # no shared disk between the two
            "JURY_SCHEDULE_CLAIM_TTL": "20",  # far above a stall of this machine: no take-over by accident
            "JURY_LOG_LEVEL": "INFO",
            "JURY_LOG_JSON": "true",
            "JURY_CONFIG": str(config),
            "NO_COLOR": "1",
        }
    )
    command = (
        ["worker", "--scheduler", "--queues", "control", "--concurrency", "1"] if worker else ["scheduler"]
    )
    log = open(tmp_path / f"scheduler-{name}.log", "wb")
    p = subprocess.Popen(
        [sys.executable, "-m", "jury_cli", *command],
        env=env,
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    return p


def test_two_schedulers_fire_each_slot_once_and_the_survivor_takes_over(
    tmp_path: Path, shared_redis: str, store: ScheduleStore
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    config = config_file(tmp_path, "* * * * *", repo, seconds=f"*/{EVERY}")
    # a: `jury scheduler`; b: a worker running the scheduler's loop in a thread (`jury worker --scheduler`)
    procs = {name: spawn(name, tmp_path, shared_redis, config, worker=name == "b") for name in ("a", "b")}
    pid_of = {p.pid: name for name, p in procs.items()}

    def firings() -> list[FiringRecord]:
        return store.firings("tick")

    def why() -> str:
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in tmp_path.glob("scheduler-*.log"))
        return f"firings: {firings()}\n{logs}"

    def firer(record: FiringRecord) -> str:
        return pid_of[int(record.by.rsplit(":", 1)[1])]

    try:
        # Both up (each has logged its start), then three slots fired after that.
        def up(name: str) -> bool:
            return b"scheduler.start" in (tmp_path / f"scheduler-{name}.log").read_bytes()

        for name in procs:
            wait_for(f"scheduler {name} to start", lambda: up(name), 60, why)  # noqa: B023 (waited here)
        started = time.time()
        # `jury scheduler` says at its start what each cron means: its next three firings
        said = (tmp_path / "scheduler-a.log").read_text()
        assert f"  tick (* * * * * at seconds */{EVERY}): next " in said, said[-2000:]
        assert "  nightly (0 2 * * * (Europe/Paris)): next " in said and said.count(" UTC, ") >= 4, said[
            -2000:
        ]

        def three_slots() -> list[FiringRecord] | None:
            found = [r for r in firings() if r.slot >= started]
            return found if len({r.slot for r in found}) >= 3 else None

        fired = wait_for("three slots fired while both schedulers run", three_slots, 60, why)
        slots = sorted(r.slot for r in fired)
        assert Counter(r.slot for r in firings()).most_common(1)[0][1] == 1, why()  # never twice
        # Each firing was a real `jury verify` of the repository (no converged run there: nothing to re-run).
        assert all(r.ok and r.outcome.startswith("0 regression test(s) of 0 run(s)") for r in fired), why()
        assert slots == list(range(slots[0], slots[0] + EVERY * len(slots), EVERY)), why()  # none skipped

        # SIGKILL the one that fired the latest slot: the next slot is fired by the other.
        latest = max(firings(), key=lambda r: r.slot)
        victim = firer(latest)
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait()
        killed_at = time.time()
        survivor = "b" if victim == "a" else "a"
        after = wait_for(
            "a slot fired after the kill",
            lambda: [r for r in firings() if r.slot > latest.slot],
            30,
            why,
        )
        assert {firer(r) for r in after} == {survivor}, why()
        if killed_at < latest.slot + EVERY:  # the victim died before the next slot came: it never claimed it
            assert after[0].slot == latest.slot + EVERY, why()
        assert Counter(r.slot for r in firings()).most_common(1)[0][1] == 1, why()
        assert procs[survivor].poll() is None, why()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    assert procs[survivor].returncode == 0, why()  # SIGTERM: a clean stop


def spawn_beat(name: str, tmp_path: Path, url: str, config: Path) -> subprocess.Popen[bytes]:
    """``celery -A workers.runtime.app beat -S workers.fleet.scheduler:JuryBeat``: celery beat running Jury's
    scheduler, in a directory of its own (where beat would keep a schedule file)."""
    home = tmp_path / f"beat-{name}"
    home.mkdir()
    env = outside_env()
    env.update(
        {
            "JURY_REDIS_URL": url,
            "JURY_DIR": str(home / "state"),
            "JURY_SCHEDULE_CLAIM_TTL": "20",
            "JURY_CONFIG": str(config),
            "NO_COLOR": "1",
        }
    )
    log = open(tmp_path / f"scheduler-beat-{name}.log", "wb")
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers.runtime.app",
        "beat",
        "-S",
        "workers.fleet.scheduler:JuryBeat",
    ]
    p = subprocess.Popen(
        [*argv, "--loglevel", "INFO"],
        cwd=home,
        env=env,
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    return p


def test_two_celery_beats_fire_each_slot_once_and_the_survivor_takes_over(
    tmp_path: Path, shared_redis: str, store: ScheduleStore
) -> None:
    """The issue's "several beat processes": two ``celery beat`` processes with Jury's scheduler class
    fire every slot once between them (the same claim as ``jury scheduler``); kill the one that fired,
    and the next slot is fired by the other."""
    repo = tmp_path / "repo"
    repo.mkdir()
    config = config_file(tmp_path, "* * * * *", repo, seconds=f"*/{EVERY}")
    procs = {name: spawn_beat(name, tmp_path, shared_redis, config) for name in ("a", "b")}
    pid_of = {p.pid: name for name, p in procs.items()}

    def why() -> str:
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in tmp_path.glob("scheduler-*.log"))
        return f"firings: {store.firings('tick')}\n{logs}"

    try:
        for name in procs:
            log = tmp_path / f"scheduler-beat-{name}.log"
            wait_for(f"beat {name} to start", lambda: b"scheduler.start" in log.read_bytes(), 60, why)  # noqa: B023
        started = time.time()

        def two_slots() -> list[FiringRecord] | None:
            found = [r for r in store.firings("tick") if r.slot >= started]
            return found if len({r.slot for r in found}) >= 2 else None

        fired = wait_for("two slots fired while both beats run", two_slots, 60, why)
        assert Counter(r.slot for r in store.firings("tick")).most_common(1)[0][1] == 1, why()
        assert all(r.ok and r.outcome.startswith("0 regression test(s) of 0 run(s)") for r in fired), why()
        assert {pid_of.get(int(r.by.rsplit(":", 1)[1])) for r in fired} <= {"a", "b"}, why()

        latest = max(store.firings("tick"), key=lambda r: r.slot)
        victim = pid_of[int(latest.by.rsplit(":", 1)[1])]
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait()
        survivor = "b" if victim == "a" else "a"
        after = wait_for(
            "a slot fired after the kill",
            lambda: [r for r in store.firings("tick") if r.slot > latest.slot],
            30,
            why,
        )
        assert {pid_of[int(r.by.rsplit(":", 1)[1])] for r in after} == {survivor}, why()
        assert Counter(r.slot for r in store.firings("tick")).most_common(1)[0][1] == 1, why()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_missed_slots_fire_once_and_a_dead_claimer_is_taken_over(
    store: ScheduleStore, tmp_path: Path
) -> None:
    hourly: Schedule = parse_schedules(
        "test", [{"name": "h", "cron": "@hourly", "kind": "verify", "repos": ["x"]}]
    )[0]
    fired: list[int] = []
    failing = threading.Event()

    def record(firing: Firing) -> str:
        fired.append(firing.slot)
        if failing.is_set():
            raise RuntimeError("the forge is down")
        return f"verified {len(firing.schedule.repos)} repository"

    clock = Clock(1_800_000_000.0 + 1800)  # half past an hour
    settings = Settings(dir=tmp_path)
    scheduler = Scheduler(
        store, [hourly], settings=settings, firings={"verify": record}, claim_ttl=1.0, clock=clock
    )

    def settle() -> None:
        for thread in list(scheduler._busy.values()):
            thread.join(30)

    # A schedule the fleet never saw does not fire its past; it waits for its next slot.
    delay = scheduler.tick()
    settle()
    assert fired == [] and delay == 60  # its next slot is 30 min away: it looks again within the minute

    # The fleet was down for five hours: back at 20 past, the latest slot fires, once.
    clock.now += 5 * 3600 - 600
    scheduler.tick()
    settle()
    latest = 1_800_000_000 + 5 * 3600
    assert fired == [latest]
    scheduler.tick()
    settle()
    assert fired == [latest] and store.last("h") is not None and store.last("h").slot == latest  # type: ignore[union-attr]

    # The next slot was claimed by a scheduler that then died (its claim is never renewed).
    clock.now = latest + 3600.5
    assert store.claim("h", latest + 3600, "dead-host:1:abc", 1.0) == "claimed"
    scheduler.tick()
    assert fired == [latest]  # held: not fired while the claim lives

    def taken_over() -> bool:
        scheduler.tick()
        settle()
        return fired[-1] == latest + 3600

    wait_for("the dead claimer's slot to be taken over", taken_over, 30)
    assert fired == [latest, latest + 3600]
    assert [r.slot for r in store.firings("h")] == [latest, latest + 3600]

    # A failing firing is recorded as failed, and not retried for the same slot.
    failing.set()
    clock.now = latest + 7200.1
    scheduler.tick()
    settle()
    scheduler.tick()
    settle()
    assert fired == [latest, latest + 3600, latest + 7200]
    last = store.last("h")
    assert last is not None and last.slot == latest + 7200 and not last.ok
    assert last.outcome == "RuntimeError: the forge is down"
    assert last.by.endswith(f":{os.getpid()}")


def test_jury_schedules_lists_last_and_next_firings(
    tmp_path: Path, shared_redis: str, store: ScheduleStore
) -> None:
    config = config_file(tmp_path, "*/5 * * * *", "acme/tools")
    nightly = parse_schedules(
        "t",
        [
            {
                "name": "nightly",
                "cron": "0 2 * * *",
                "timezone": "Europe/Paris",
                "kind": "review",
                "repos": ["a/b"],
            }
        ],
    )[0]
    slot = 1_800_000_000
    assert store.claim("nightly", slot, "tok", 10) == "claimed"
    store.record(
        "nightly",
        "tok",
        FiringRecord(slot=slot, at=slot + 2.0, by="host-1:42", ok=True, outcome="enqueued 3, skipped 1"),
    )
    env = outside_env()
    env.update({"JURY_REDIS_URL": shared_redis, "JURY_DIR": str(tmp_path / "state"), "NO_COLOR": "1"})
    before = time.time()
    p = subprocess.run(
        [sys.executable, "-m", "jury_cli", "schedules", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["schedule", "kind", "cron", "repos", "last", "firing", "next", "3", "firings"]
    tick = next(line for line in lines if line.split()[0] == "tick")
    assert tick.split()[1:7] == ["verify", "*/5", "*", "*", "*", "*"]
    assert "never" in tick and "acme/tools" in tick
    tick_schedule = parse_schedules(
        "t", [{"name": "tick", "cron": "*/5 * * * *", "kind": "verify", "repos": ["x"]}]
    )[0]
    assert (
        slot_time(slot_after(tick_schedule, before)) in tick
        or slot_time(slot_after(tick_schedule, time.time())) in tick
    )
    # the next three firings, one a line under the first: what */5 means, not what it looks like
    at = lines.index(tick)
    shown = "\n".join(lines[at : at + 3])
    expected = [next_slots(tick_schedule, t) for t in (before, time.time())]
    assert any(all(slot_time(slot) in shown for slot in slots) for slots in expected), shown
    row = next(line for line in lines if line.split()[0] == "nightly")
    assert "review" in row and "0 2 * * * (Europe/Paris)" in row and "acme/app, acme/lib" in row
    assert f"{slot_time(slot)} ok by host-1:42: enqueued 3, skipped 1" in row
    assert slot_time(slot_after(nightly, time.time())) in row

    # Without the fleet's Redis it still lists them, and says why the last firings are unknown.
    del env["JURY_REDIS_URL"]
    p = subprocess.run(
        [sys.executable, "-m", "jury_cli", "schedules", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert p.returncode == 0 and "JURY_REDIS_URL is not set" in p.stderr
    assert next(line for line in p.stdout.splitlines() if line.split()[0] == "nightly").split()[-4] == "?"


def git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=T", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    return subprocess.run(
        ["git", "-C", str(repo), *identity, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_review_schedule_sweeps_and_its_next_firing_enqueues_nothing_again(
    tmp_path: Path, shared_redis: str, store: ScheduleStore, sample_repo: Path
) -> None:
    """The review firing is a real sweep (a fake GitHub lists the PRs, a bare repository stands for
    github.com): the first slot enqueues a run per PR, the next finds every head taken: a slot fired
    twice would do no harm either. The schedule's options reach the runs (``push = true``), and the next
    firing's listing is a conditional request the forge answers 304 (the ETags kept in Redis)."""
    remote = tmp_path / "remotes" / "acme" / "sample.git"
    remote.parent.mkdir(parents=True)
    git(tmp_path, "clone", "--bare", "--quiet", str(sample_repo), str(remote))
    git(remote, "symbolic-ref", "HEAD", "refs/heads/main")
    heads = {1: git(sample_repo, "rev-parse", "feature")}
    git(sample_repo, "checkout", "--quiet", "--detach", "main")
    (sample_repo / "note.md").write_text("note\n")
    git(sample_repo, "add", "note.md")
    git(sample_repo, "commit", "--quiet", "-m", "note")
    heads[2] = git(sample_repo, "rev-parse", "HEAD")
    for n, sha in heads.items():
        git(sample_repo, "push", "--quiet", "--force", str(remote), f"{sha}:refs/pull/{n}/head")
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://github.com/\n')
    config = tmp_path / "config.toml"
    config.write_text(
        '[[schedules]]\nname = "prs"\ncron = "* * * * *"\nseconds = "*/2"\n'
        'kind = "review"\nrepos = ["acme/sample"]\n'
        'base = "main"\nreviewers = ["codex"]\njudge = "codex"\nrounds = 2\npush = true\n'
    )
    with ForgeServer() as forge:
        repo = forge.github_repo("acme/sample")
        repo.add(FakePR(1, "median", heads[1]))
        repo.add(FakePR(2, "a note", heads[2]))
        env = {"GIT_CONFIG_GLOBAL": str(gitconfig), "JURY_GITHUB_API": forge.github_api}
        p = spawn("review", tmp_path, shared_redis, config, env)

        def why() -> str:
            return (
                f"firings: {store.firings('prs')}\n{(tmp_path / 'scheduler-review.log').read_text()[-4000:]}"
            )

        try:

            def two() -> list[FiringRecord] | None:
                found = store.firings("prs")
                return found[:2] if len(found) >= 2 else None

            first, second = wait_for(
                "two review firings",
                two,
                90,
                why,
            )
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(30)
    assert first.ok and first.outcome.startswith("enqueued 2, skipped 0, errors 0"), why()
    assert second.ok and second.outcome.startswith("enqueued 0, skipped 2, errors 0"), why()
    assert second.slot > first.slot
    runs = from_url(shared_redis)
    assert len(runs.runs()) == 2  # one run per PR head, whatever the number of firings
    configs = [e.config for slug in runs.runs() for e in runs.read(slug) if isinstance(e, JuryConfigEvent)]
    assert [(c.rounds, c.push) for c in configs] == [(2, True), (2, True)]
    runs.close()
    listings = forge.calls("GET", "/repos/acme/sample/pulls")
    assert len(listings) >= 2 and "if-none-match" not in listings[0].headers
    assert all(r.headers.get("if-none-match") and r.status == 304 for r in listings[1:]), listings
    assert forge.full["GET /github/repos/acme/sample/pulls"] == 1
