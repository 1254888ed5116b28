"""``workers.fleet.fleetview`` on a real Redis: queue depths as Celery's own Redis transport lays the queues
out (priority sub-queues included), and the kept folds, which must always equal a fold of the whole log
(a log that grew, one begun again, one the coordinator snapshotted)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.config import load_settings
from orchestrator.domain import BudgetSpent, TargetEvent
from orchestrator.fold import fold, snapshot
from orchestrator.spec import Target
from orchestrator.store.redis import RedisStore, from_url
from workers.fleet import fleetview
from workers.runtime.app import QUEUES, make_app


@pytest.fixture
def store(shared_redis: str) -> Iterator[RedisStore]:
    s = from_url(shared_redis)
    yield s
    s.close()


def test_queue_depths_count_celerys_lists_and_their_priority_sub_queues(
    shared_redis: str, store: RedisStore
) -> None:
    app = make_app(load_settings().model_copy(update={"redis_url": shared_redis}))
    with app.connection_for_write() as conn:  # no worker: the messages stay where kombu put them
        app.send_task("jury.review", args=["s", "k1"], connection=conn)
        app.send_task("jury.review", args=["s", "k2"], priority=6, connection=conn)  # review\x06\x166
        app.send_task("jury.triage", args=["s", "k3"], priority=9, connection=conn)
        app.send_task("jury.coordinate", args=["s"], connection=conn)
    assert store.client.exists(f"review{fleetview.PRIORITY_SEP}6")  # the layout this module assumes
    depths = fleetview.queue_depths(store.client)
    assert depths == {"control": 1, "review": 2, "triage": 1, "reply": 0, "refute": 0}
    assert list(depths) == list(QUEUES)  # every queue named, sub-queues never taken for queues
    assert fleetview.tasks_in_flight(store.client) == dict.fromkeys(QUEUES, 0)


def test_queued_actions_are_the_action_tasks_waiting_in_any_queue(
    shared_redis: str, store: RedisStore
) -> None:
    """What the reaper asks before it sends an untaken action again: every action task waiting in a queue
    (priority sub-queues and countdowns included), read from the messages as kombu wrote them."""
    app = make_app(load_settings().model_copy(update={"redis_url": shared_redis}))
    with app.connection_for_write() as conn:  # no worker: the messages stay where kombu put them
        app.send_task("jury.review", args=["s1", "review:r1:a"], connection=conn)
        app.send_task("jury.review", args=["s1", "review:r1:b"], priority=6, connection=conn)
        app.send_task("jury.triage", args=["s2", "triage:f1"], countdown=60, connection=conn)
        app.send_task("jury.coordinate", args=["s1"], connection=conn)  # not an action
    store.client.lpush(
        "reply", b"not a message", b'{"body": "%%%", "properties": {"body_encoding": "base64"}}'
    )
    assert fleetview.queued_actions(store.client) == {
        ("s1", "review:r1:a"),
        ("s1", "review:r1:b"),
        ("s2", "triage:f1"),
    }
    # a backlog longer than the reaper reads: not known, and it goes by the marks' age
    assert fleetview.queued_actions(store.client, at_most=5) is None


def spent(eid: str, usd: float) -> BudgetSpent:
    return BudgetSpent(eid=eid, key=eid, agent="a", amount=usd)


def test_kept_folds_equal_a_fold_of_the_whole_log(store: RedisStore) -> None:
    folds = fleetview.RunFolds(store)
    store.append("one", [TargetEvent(eid="t", target=Target(state="review")), spent("s1", 0.5)])
    store.append("two", [TargetEvent(eid="t", target=Target(state="review"))])
    first = folds.runs()
    assert {s: f.state for s, f in first.items()} == {"one": "review", "two": "review"}

    store.append("one", [spent("s2", 0.25), TargetEvent(eid="end", target=Target(state="converged"))])
    again = folds.runs()
    assert again["one"].state == "converged" and again["one"].spent == {"a": 0.75}
    assert again["two"] is first["two"]  # unchanged: not read again

    # the coordinator's snapshot is a shortcut a new reader starts from; it folds what follows it
    whole = store.read_after("two", None) or []
    store.write_snapshot(
        "two", snapshot(fold((e for _, e in whole), "two"), whole[-1][0], store.origin("two"))
    )
    store.append("two", [spent("s3", 1.0)])
    fresh = fleetview.RunFolds(store).runs()
    for slug in ("one", "two"):
        assert fresh[slug].wire() == fold(store.read(slug), slug).wire()

    # a log deleted and begun again is folded again, not continued
    store.client.delete(*store.run_keys("two"))
    store.append("two", [TargetEvent(eid="t", target=Target(state="cancelled"))])
    reborn = folds.runs()["two"]
    assert reborn.state == "cancelled" and reborn.spent == {}
    assert fleetview.runs_by_state(reborn_all := folds.runs().values())["cancelled"] == 1
    assert fleetview.spend(reborn_all) == {("a", ""): 0.75}
