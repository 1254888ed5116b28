"""One function per operation (issue 45), by behaviour, against the machine's real Redis and a real Celery
app sending real messages (what is counted is the control queue in Redis; no worker takes them):

- ``workers.runtime.wake.wake``: a coordinate message per run lands in the control queue, deduplicated
  by the run's pending-kick mark;
- ``orchestrator.cancel.cancel_run``: ``jury cancel``, the console and a sweep's supersede leave the
  same event, flag and wake; the flag is set only once the event is in the log;
- ``orchestrator.run_reader``: ``jury runs``/``jury show``, the console's list and the fleet's view
  read a run from the coordinator's snapshot (a snapshot marked so the reader shows whether it used it);
- ``orchestrator.start.start_run``: at most one run in flight per PR head whoever starts it (a ``jury
  review`` of a PR a sweep's run reviews is refused), and the console resumes through it.

Which module does each operation is read from the source in tests/unit/test_one_place_per_operation.py.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from rich.console import Console

from orchestrator.cancel import cancel_run
from orchestrator.config import Settings, load_settings
from orchestrator.domain import Event, RunCancel, RunResumed, TargetEvent, cancel_eid
from orchestrator.errors import UsageError
from orchestrator.fold import snapshot
from orchestrator.run_reader import read_state
from orchestrator.spec import Target
from orchestrator.start import RunOptions, StartRequest, pr_head, start_run, start_runs
from orchestrator.store.base import CANCEL_TTL, pull_head
from orchestrator.store.files import FileStore
from orchestrator.store.redis import RedisStore, from_url
from tests.integration.test_sweep_rules import PROJECT, setup, sweep_with  # noqa: F401 (a fixture)
from tests.integration.test_wake_dedup import coordinate_messages
from workers.runtime.app import make_app
from workers.runtime.wake import celery_kick, wake

PR_URL = "https://github.com/acme/app/pull/7"
HEAD = "a" * 40


@pytest.fixture
def store(shared_redis: str) -> Iterator[RedisStore]:
    s = from_url(shared_redis)
    yield s
    s.close()


@pytest.fixture
def settings(shared_redis: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("JURY_DIR", str(tmp_path / "state"))
    return load_settings().model_copy(update={"redis_url": shared_redis})


@pytest.fixture
def app(settings: Settings) -> Celery:
    return make_app(settings)


def live_run(store: RedisStore, slug: str, **target: Any) -> None:
    """A run that has started and not ended (``review``), as a coordinator's first pass leaves it."""
    store.create_run(slug)
    fields = {"repo": "acme", "id": slug, "state": "review", **target}
    store.append(slug, [TargetEvent(eid="target:0", target=Target(**fields))])
    store.write_state(slug, {"target": {"state": fields["state"]}})


def cancels(store: RedisStore, slug: str) -> list[tuple[str, str, str | None]]:
    return [(e.eid, e.who, e.reason) for e in store.read(slug) if isinstance(e, RunCancel)]


# --- wake ------------------------------------------------------------------------------------------


def test_wake_sends_one_coordinate_per_run_to_the_control_queue(app: Celery, store: RedisStore) -> None:
    assert wake(app, ["run-a", "run-b", "run-a"]) == ["run-a", "run-b"]
    assert coordinate_messages(store) == [("jury.coordinate", "['run-a']"), ("jury.coordinate", "['run-b']")]


def test_a_wake_with_the_store_sends_nothing_while_a_pass_waits(app: Celery, store: RedisStore) -> None:
    """With the store, a run whose coordinate task is queued and not started gets no second one (the
    pass clears the mark before it reads, so it sees what the second waker appended)."""
    assert wake(app, ["run-a"], store=store, reap_after=30.0) == ["run-a"]
    assert wake(app, ["run-a"], store=store, reap_after=30.0) == []
    store.clear_kick("run-a")  # what the pass does as it starts
    assert wake(app, ["run-a"], store=store, reap_after=30.0) == ["run-a"]
    assert coordinate_messages(store) == [("jury.coordinate", "['run-a']")] * 2


# --- cancel ----------------------------------------------------------------------------------------


def test_the_cli_the_console_and_a_sweep_cancel_alike(settings: Settings, store: RedisStore) -> None:
    """Each path: one ``run.cancel`` (its id one per epoch), the cancel flag, one coordinate message."""
    from jury_cli.runs import cancel_run as jury_cancel
    from jury_cli.web import actions
    from workers.fleet.sweep import SweepRow, _Stale, _supersede

    for slug in ("by-cli", "by-console", "by-sweep", "new-head"):
        live_run(store, slug)
    jury_cancel(settings, "by-cli", "alice")
    assert actions.cancel(settings, "by-console") == "cancelling by-console"
    row = SweepRow(repo="github:acme/app", number=7, head="b" * 40, outcome="enqueued", slug="new-head")
    kick = celery_kick(make_app(settings), store, settings.reap_after)
    _supersede(store, kick, [_Stale(row, ["by-sweep"])], dry_run=False)
    assert row.superseded == ["by-sweep"]

    reason = f"superseded by new-head: the PR's head moved to {'b' * 40}"
    assert cancels(store, "by-cli") == [(cancel_eid(0), "alice", None)]
    assert cancels(store, "by-console") == [(cancel_eid(0), "console", None)]
    assert cancels(store, "by-sweep") == [(cancel_eid(0, superseded_by="new-head"), "sweep", reason)]
    for slug in ("by-cli", "by-console", "by-sweep"):
        assert store.cancel_flagged(slug), slug
        assert read_state(store, slug)[0].cancel_requested, slug
    assert coordinate_messages(store) == [
        ("jury.coordinate", f"['{s}']") for s in ("by-cli", "by-console", "by-sweep")
    ]
    assert not store.cancel_flagged("new-head")

    # Again: nothing more (the cancel is under way); an ended run is refused, naming its state.
    assert cancel_run(store, "by-cli", who="bob").outcome == "cancelling"
    assert cancels(store, "by-cli") == [(cancel_eid(0), "alice", None)]
    store.append("by-cli", [TargetEvent(eid="end", target=Target(state="cancelled"))])
    with pytest.raises(UsageError, match="already ended \\(cancelled\\)"):
        jury_cancel(settings, "by-cli", "bob")
    with pytest.raises(UsageError, match="no run named nobody"):
        jury_cancel(settings, "nobody", "bob")


class WatchingStore(RedisStore):
    """The real store, noting at each cancel flag whether the log held a ``run.cancel`` already."""

    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client)
        self.flag_after_event: list[bool] = []

    def set_cancel_flag(self, slug: str, ttl: int = CANCEL_TTL) -> None:
        self.flag_after_event.append(any(isinstance(e, RunCancel) for e in self.read(slug)))
        super().set_cancel_flag(slug, ttl)


def test_the_flag_comes_only_after_the_event_and_the_wake_after_both(shared_redis: str) -> None:
    """Whoever sees the flag (a running agent, which then ends its action and wakes the coordinator) finds
    the cancel in the log already, so the pass ends the run ``cancelled``; the wake comes after both."""
    watching = WatchingStore(redis.Redis.from_url(shared_redis))
    live_run(watching, "r")
    at_wake: list[tuple[bool, bool]] = []

    def waking(slugs: Any) -> None:
        at_wake.append((bool(cancels(watching, "r")), watching.cancel_flagged("r")))

    assert cancel_run(watching, "r", who="alice", wake=waking).outcome == "cancelled"
    assert watching.flag_after_event == [True] and at_wake == [(True, True)]
    # A flag found without its event (a canceller of an older release died between the two) gets it.
    live_run(watching, "half")
    watching.set_cancel_flag("half")
    assert cancel_run(watching, "half", who="bob").outcome == "cancelled"
    assert cancels(watching, "half") == [(cancel_eid(0), "bob", None)]
    watching.close()


# --- reading a run from its snapshot ----------------------------------------------------------------


def marked_snapshot(store: RedisStore, slug: str) -> None:
    """The coordinator's snapshot of the run, marked: a reader that shows the mark read the snapshot (the
    log alone says ``review`` and no title)."""
    state, position, origin, _ = read_state(store, slug)
    assert position is not None
    state.target.title, state.target.state = "FROM-SNAPSHOT", "human"
    store.write_snapshot(slug, snapshot(state, position, origin))


def test_jury_runs_and_show_read_the_snapshot(store: RedisStore, jury: Any, shared_redis: str) -> None:
    live_run(store, "r1")
    marked_snapshot(store, "r1")
    env = {"JURY_REDIS_URL": shared_redis}
    listed = jury("runs", env=env)
    assert listed.code == 0 and "r1  human" in listed.out, listed.out + listed.err
    shown = jury("show", "r1", "--json", env=env)
    assert shown.code == 0 and '"title": "FROM-SNAPSHOT"' in shown.out, shown.out + shown.err


def test_the_console_and_the_fleet_view_read_the_snapshot_then_only_what_follows(
    store: RedisStore,
) -> None:
    from jury_cli.web.fleet import inflight
    from jury_cli.web.views import ListFolds, run_list
    from workers.fleet.fleetview import RunFolds

    live_run(store, "r1")
    store.activate("r1")
    marked_snapshot(store, "r1")
    folds, fleet = ListFolds(), RunFolds(store)
    (row,) = run_list(store, folds)["runs"]
    assert (row["title"], row["state"]) == ("FROM-SNAPSHOT", "human")
    assert fleet.runs()["r1"].target.title == "FROM-SNAPSHOT"
    assert inflight(store)["runs"][0]["state"] == "human"
    # What is logged after it is folded onto the kept fold: the snapshot's mark stays, the title moves.
    store.append("r1", [TargetEvent(eid="later", target=Target(title="LATER"))])
    (row,) = run_list(store, folds)["runs"]
    assert (row["title"], row["state"]) == ("LATER", "human")
    assert (fleet.runs()["r1"].target.title, fleet.runs()["r1"].state) == ("LATER", "human")


# --- starting a run ----------------------------------------------------------------------------------


def test_a_review_of_a_pr_head_a_sweeps_run_reviews_is_refused(
    setup: tuple[Any, Path, str],  # noqa: F811 (the fixture imported above)
    store: RedisStore,
    settings: Settings,
) -> None:
    """A sweep's run of PR 1's head is in flight: ``jury review`` of the PR's URL is REFUSED, naming that
    run, and writes nothing (no run, no claim). Once that run has ended, the review starts and takes the
    head over, and the next sweep finds it in flight."""
    from jury_cli.review import new_run, run_review
    from workers.fleet.sweep import SweepFilters, SweepOptions

    server, config, feature = setup
    kicked: list[str] = []
    opts = RunOptions(reviewers="finder", judge="judge", config=config)
    swept = sweep_with(server, store, kicked, SweepOptions(run=opts), SweepFilters(labels=("jury",)))  # type: ignore[arg-type]
    sweeps_run = swept.rows[0].slug
    assert swept.rows[0].outcome == "enqueued" and sweeps_run is not None

    url = f"https://gitlab.com/{PROJECT}/-/merge_requests/1"
    request = new_run(settings, url, opts)
    assert request.head == pull_head("gitlab", PROJECT, 1, feature)  # keyed as the sweep keys it
    quiet = Console(file=io.StringIO())
    with pytest.raises(UsageError, match=f"run {sweeps_run} is already reviewing this PR's head"):
        run_review(settings, request, detach=True, concurrency=1, console=quiet)
    assert store.runs() == [sweeps_run] and store.sweep_lookup([request.head])[0].runs == [sweeps_run]
    assert not (settings.dir / "runs" / request.slug).exists()  # its slug's claim given back

    store.write_state(sweeps_run, {"target": {"state": "human"}})  # the sweep's run ended
    code, mine = run_review(settings, new_run(settings, url, opts), detach=True, concurrency=1, console=quiet)
    assert code == 0 and mine != sweeps_run
    assert store.sweep_lookup([request.head])[0].holder == mine
    again = sweep_with(server, store, kicked, SweepOptions(run=opts), SweepFilters(labels=("jury",)))  # type: ignore[arg-type]
    assert (again.rows[0].outcome, again.rows[0].slug) == ("skipped", mine)
    assert f"in flight: run {mine}" in again.rows[0].reason


def first_events(state: str = "review") -> list[Event]:
    target = Target(repo="acme/app", id="7", url=PR_URL, head=HEAD, state=state)  # type: ignore[arg-type]
    return [TargetEvent(eid="target:0", target=target)]


def test_pr_head_is_the_sweeps_key() -> None:
    """A PR URL's head is keyed as a sweep keys the listed PR (forge, repository without case, number)."""
    target = Target(url="https://github.com/Acme/App/pull/7", head=HEAD)
    assert pr_head(target) == pull_head("github", "acme/app", 7, HEAD)
    assert pr_head(Target(path="/repo", head=HEAD)) is None


def test_the_console_resumes_through_start_run(settings: Settings, store: RedisStore) -> None:
    """The console's resume is ``start_run``'s: refused while another run in flight holds the PR's head;
    once none does, the run gets its resume marker, its flag down, is active and its coordinator woken."""
    from jury_cli.web import actions

    store.create_run("old")
    store.append("old", first_events(state="cancelled"))
    store.set_cancel_flag("old")
    head = pull_head("github", "acme/app", 7, HEAD)
    kick = celery_kick(make_app(settings), store, settings.reap_after)
    (held,) = start_runs(
        store, [StartRequest("other", first_events(), head=head)], kick, state_dir=settings.dir
    )
    assert held.outcome == "started"
    with pytest.raises(UsageError, match="run other is already reviewing"):
        actions.resume(settings, "old")
    assert not any(isinstance(e, RunResumed) for e in store.read("old"))

    store.append("other", [TargetEvent(eid="end", target=Target(state="human"))])
    store.write_state("other", {"target": {"state": "human"}})
    assert actions.resume(settings, "old") == "resumed old"
    assert [e.eid for e in store.read("old") if isinstance(e, RunResumed)] == ["resume:1"]
    assert read_state(store, "old")[0].state == "review" and not store.cancel_flagged("old")
    assert "old" in store.active_runs()
    assert ("jury.coordinate", "['old']") in coordinate_messages(store)
    assert (settings.dir / "runs" / "old" / "events.ndjson").is_file()  # the files record, as the CLI's


def test_a_second_start_of_a_held_head_writes_nothing(settings: Settings, store: RedisStore) -> None:
    """Two starters of one PR head (a review, a schedule): the second is ``held`` by the first, and its
    slug is never registered."""
    head = pull_head("github", "acme/app", 7, HEAD)
    woken: list[str] = []
    first = start_run(
        store, StartRequest("pr-7", first_events(), head=head), woken.extend, state_dir=settings.dir
    )
    second = start_run(
        store, StartRequest("pr-7", first_events(), head=head), woken.extend, state_dir=settings.dir
    )
    assert (first.outcome, first.slug) == ("started", "pr-7")
    assert (second.outcome, second.holder) == ("held", "pr-7")
    assert store.runs() == ["pr-7"] and woken == ["pr-7"]
    # A starter that looked before the first started (the race ``start_run``'s look cannot close): the
    # store's claim refuses it all the same, and the slug it claimed in the state directory is given back.
    files = FileStore(settings.dir)
    (raced,) = start_runs(
        store,
        [StartRequest("pr-7", first_events(), head=head)],
        woken.extend,
        state_dir=settings.dir,
        claim_in=files,
    )
    assert (raced.outcome, raced.holder) == ("held", "pr-7") and files.runs() == []
    assert store.runs() == ["pr-7"] and woken == ["pr-7"]
