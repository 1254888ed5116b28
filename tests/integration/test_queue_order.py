"""A worker that consumes several queues takes from them in Jury's order, not in turns: with Jury's broker
options (``workers.runtime.app.celery_config``: the Redis transport's ``priority`` strategy) and its queues
(``QUEUES``: control first, review last), a coordinate pass queued behind a backlog of reviews is the next
message a worker gets. Before, the transport took from the queues in turns, so under a sweep's backlog every
coordinate pass waited behind a review of another run and the control queue grew without bound."""

from __future__ import annotations

from kombu import Connection, Consumer, Exchange, Message, Queue

from orchestrator.config import Settings
from workers.runtime.app import QUEUES, celery_config


def test_control_before_the_rest_and_review_last(shared_redis: str) -> None:
    conf = celery_config(Settings(redis_url=shared_redis))
    assert conf["broker_transport_options"]["queue_order_strategy"] == "priority"
    assert QUEUES[0] == "control" and QUEUES[-1] == "review"
    exchange = Exchange("jury-order-test", type="direct")
    queues = [Queue(f"order-test-{q}", exchange, routing_key=q) for q in QUEUES]
    got: list[str] = []
    with Connection(shared_redis, transport_options=conf["broker_transport_options"]) as conn:
        channel = conn.channel()
        for q in queues:
            q(channel).declare()
            q(channel).purge()
        producer = conn.Producer(channel)
        backlog = ["review", "review", "review", "control", "triage", "control", "control"]
        for q in backlog:
            producer.publish({"queue": q}, exchange=exchange, routing_key=q)

        def take(body: dict[str, str], message: Message) -> None:
            got.append(body["queue"])
            message.ack()

        with Consumer(channel, queues=queues, callbacks=[take], prefetch_count=1):
            while len(got) < 7:
                conn.drain_events(timeout=10)
        for q in queues:
            q(channel).delete()
    # In turns (the transport's default) it was control, triage, review, control, review, control, review.
    assert got == ["control", "control", "control", "triage", "review", "review", "review"]
