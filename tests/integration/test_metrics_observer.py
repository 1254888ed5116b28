"""A worker's counters come from what its appends added to the log (``RedisStore.observers``), on a real
Redis: each event counted once however often it is sent (a redelivered task appends its batch again), and
the kinds the end-to-end run does not meet (refutations, tool, budget and sandbox refusals, a refuter's
duration timed from its launch to its action's end)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.domain import (
    ActionDone,
    AgentLaunch,
    BudgetRefused,
    BudgetSpent,
    Event,
    RefuteVerdict,
    TargetEvent,
    ToolRefused,
)
from orchestrator.spec import Target
from orchestrator.store.redis import RedisStore, from_url
from workers.fleet import metrics


@pytest.fixture
def store(shared_redis: str) -> Iterator[RedisStore]:
    s = from_url(shared_redis)
    metrics.watch(s)
    metrics.watch(s)  # once per store, however often asked
    yield s
    s.close()


def sample(name: str, **labels: str) -> float:
    return metrics.OWN.get_sample_value(name, labels) or 0.0


def test_each_appended_event_is_counted_once(store: RedisStore) -> None:
    assert store.observers == [metrics.EVENTS.observe]
    names = {
        "spend": ("jury_agent_spend_usd_total", {"agent": "refuter", "model": "acme/m1"}),
        "unknown": ("jury_agent_unknown_cost_calls_total", {"agent": "refuter", "model": "acme/m1"}),
        "refuted": ("jury_refutations_total", {"source": "refuter", "outcome": "refuted"}),
        "verified": ("jury_refutations_total", {"source": "verification", "outcome": "not_refuted"}),
        "budget": ("jury_budget_refusals_total", {"agent": "refuter"}),
        "tool": ("jury_tool_refusals_total", {"agent": "refuter", "tool": "write_file"}),
        "sandbox": ("jury_sandbox_refusals_total", {}),
        "seconds": ("jury_agent_duration_seconds_count", {"agent": "refuter", "role": "refuter"}),
    }
    before = {k: sample(n, **ls) for k, (n, ls) in names.items()}
    key = "refute:f1:1"
    batch: list[Event] = [
        AgentLaunch(eid=f"{key}:launch", agent="refuter", round=1, role="refuter", key=key),
        ToolRefused(
            eid=f"{key}:refused-tool:1",
            key=key,
            agent="refuter",
            tool="write_file",
            role="refuter",
            reason="read-only",
        ),  # fmt: skip
        BudgetSpent(
            eid=f"{key}:call1:spent", key=f"{key}:call1", agent="refuter", amount=0.25, model="acme/m1"
        ),
        BudgetSpent(eid=f"{key}:call2:spent", key=f"{key}:call2", agent="refuter", model="acme/m1"),
        RefuteVerdict(eid=f"{key}:verdict", id="f1", outcome="refuted", reason="x", source="refuter"),
        RefuteVerdict(eid="verify:f1", id="f1", outcome="not_refuted", reason="ok", source="verification"),
        BudgetRefused(
            eid=f"{key}:call3:budget-refused", key=f"{key}:call3", agent="refuter", reason="ceiling"
        ),
        TargetEvent(
            eid="review:r2:a:no-sandbox", target=Target(state="human", state_note="sandbox unavailable")
        ),
        ActionDone(eid=f"{key}:done", key=key),
    ]
    for _ in range(3):  # the same batch delivered three times: the log and the counters take it once
        store.append("obs", batch)
    assert len(store.read("obs")) == len(batch)
    after = {k: sample(n, **ls) for k, (n, ls) in names.items()}
    delta = {k: round(after[k] - before[k], 6) for k in names}
    assert delta == {
        "spend": 0.25,
        "unknown": 1,
        "refuted": 1,
        "verified": 1,
        "budget": 1,
        "tool": 1,
        "sandbox": 1,
        "seconds": 1,
    }


def test_an_observer_that_fails_never_fails_the_append(store: RedisStore) -> None:
    def broken(slug: str, events: list[Event]) -> None:
        raise RuntimeError("observer down")

    store.observers.insert(0, broken)
    before = sample("jury_budget_refusals_total", agent="b")
    assert store.append("obs2", [BudgetRefused(eid="x", key="k", agent="b", reason="r")]) == 1
    assert sample("jury_budget_refusals_total", agent="b") == before + 1  # the next observer still ran
