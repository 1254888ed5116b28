"""Adding a kind is one registry entry and its code: an action kind and an agent kind declared by this
test alone run through the real path.

Real Redis (the run's log, the lease, the done marker, the budget ledger), real git (the agent's checkout
at the action's commit), the worker's real sandbox check; the coordinator's ``run_task`` looks the
handler up in the registry, the handler runs the agent through ``run_agent`` and ``run_seat``, whose
seat is looked up by the agent's kind. Nothing else in Jury names ``ping`` or ``echo``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from orchestrator.actions import ACTIONS, ActionKind
from orchestrator.agent_kinds import AGENT_KINDS, AgentKindDescriptor
from orchestrator.config import Settings
from orchestrator.domain import ActionDispatched, Event, JuryConfigEvent, TargetEvent
from orchestrator.fold import DispatchedAction, RunState, fold
from orchestrator.registry import UnknownName
from orchestrator.spec import AgentSpec, JuryConfig, Target
from orchestrator.store.files import FileStore
from orchestrator.store.redis import RedisStore
from orchestrator.target import resolve_local
from workers.agents import SEATS, AgentRun, SeatRequest
from workers.isolation.supervise import ProcResult
from workers.runtime import coordinator
from workers.runtime.actions import HANDLERS
from workers.runtime.context import Runtime, agent_worktree, finish, load_job
from workers.runtime.seating import run_agent

SLUG = "sample-ping"
KEY = "ping:1"


# --- the agent kind: a seat that reads the checkout it is given -----------------------------------


class EchoSeat:
    """Answers with the checkout's ``stats.py``: proof it ran in the action's commit, not the trunk."""

    reserves_per_call = False

    def __init__(self, during: Callable[[], None] = lambda: None) -> None:
        self.during = during  # what happens in the world while it runs

    def run(self, request: SeatRequest) -> AgentRun:
        self.during()
        report = (request.worktree / "stats.py").read_text()
        out = request.out_dir / f"{request.name}.stdout.txt"
        out.write_text(report)
        request.tick(0.5, 0.0)
        proc = ProcResult(0, False, False, 0.5, out, out, len(report), 0)
        return AgentRun(
            proc=proc, report=report, session_id=None, stdout=report, stderr="", argv=[], cost_usd=0.01
        )


# --- the action kind: its failure, and its handler --------------------------------------------------


def ping_failed(a: DispatchedAction, reason: str) -> list[Event]:
    return [TargetEvent(eid=f"{a.key}:failed", target=Target(state="human", state_note=f"ping: {reason}"))]


def ping(rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
    job = load_job(rt, slug, key, stop)
    if job is None:
        return rt.kick(slug)
    with agent_worktree(rt, job, job.action.sha or "") as wt:
        run = run_agent(rt, job, role="reviewer", prompt="say what you see", worktree=wt, name="ping.echo")
    has_median = "def median" in run.report
    finish(rt, job, [TargetEvent(eid=f"{key}:pong", target=Target(state_note=f"pong: median={has_median}"))])
    return None


def broken(rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
    raise RuntimeError("ping broke")


@pytest.fixture(autouse=True)
def declared() -> Iterator[None]:
    """``echo`` (an agent kind and its seat) and ``ping`` (an action kind) for this test only; each test
    binds ``ping`` to its own handler."""
    with (
        AGENT_KINDS.registered("echo", AgentKindDescriptor("reads stats.py back")),
        SEATS.registered("echo", EchoSeat()),
        ACTIONS.registered("ping", ActionKind(name="ping", queue="ping", on_failure=ping_failed)),
    ):
        yield


@pytest.fixture
def kicked() -> list[str]:
    return []


@pytest.fixture
def rt(client: redis.Redis, prefix: str, tmp_path: Path, kicked: list[str]) -> Runtime:
    state_dir = tmp_path / "state"
    return Runtime(
        settings=Settings(dir=state_dir),
        store=RedisStore(client, prefix=prefix),
        files=FileStore(state_dir),
        send=lambda *a: None,
        kick=kicked.append,
    )


def dispatch_ping(rt: Runtime, repo: Path, agent_kind: str = "echo") -> str:
    """A run whose log holds one ``ping`` action for the ``echo`` agent at the PR's head, as the
    coordinator leaves it."""
    target = resolve_local(repo, "feature", "main")
    target.state = "review"
    spec = AgentSpec(name="echo", kind=agent_kind, expect_seconds=5)
    cfg = JuryConfig(reviewers=["echo"], judge="echo", agents={"echo": spec})
    rt.store.append(
        SLUG,
        [
            TargetEvent(eid="target:0", target=target),
            JuryConfigEvent(eid="config:0", config=cfg),
            ActionDispatched(
                eid=f"dispatch:{KEY}", key=KEY, kind="ping", round=1, agent="echo", sha=target.head
            ),
        ],
    )
    return target.head or ""


def log(rt: Runtime) -> tuple[list[Event], RunState]:
    events = rt.store.read(SLUG)
    return events, fold(events, SLUG)


def test_an_action_kind_and_an_agent_kind_declared_here_run_through_run_task(
    rt: Runtime, kicked: list[str], sample_repo: Path
) -> None:
    dispatch_ping(rt, sample_repo)
    with HANDLERS.registered("ping", ping):
        coordinator.run_task(rt, "ping", SLUG, KEY)
        events, state = log(rt)
        # the handler's result, from the agent's run in a checkout of the feature head (main has no median)
        assert state.target.state_note == "pong: median=True"
        assert state.actions[KEY].done and state.actions[KEY].ok
        # the job's hooks around the seat: launch, liveness, budget reserved and settled at its cost
        by_type = {e.t: e for e in events}
        assert by_type["agent.launch"].key == KEY and by_type["agent.launch"].role == "reviewer"
        assert [t.seconds for t in rt.store.alive(SLUG)] == [0.5]  # the latest tick, beside the log
        assert "agent.alive" not in by_type
        assert by_type["budget.reserved"].key == KEY and by_type["budget.spent"].amount == 0.01
        assert state.spent == {"echo": 0.01}
        assert b"def median" in (rt.store.get_artifact(SLUG, "ping.echo.stdout.txt") or b"")
        assert kicked == [SLUG]

        coordinator.run_task(rt, "ping", SLUG, KEY)  # redelivered: its done marker, nothing runs again
        assert rt.store.read(SLUG) == events
        assert kicked == [SLUG]  # a copy of a message whose action ran adds no coordinate pass


def test_a_crash_of_the_declared_kind_leaves_what_its_entry_says(rt: Runtime, sample_repo: Path) -> None:
    dispatch_ping(rt, sample_repo)
    with HANDLERS.registered("ping", broken):
        coordinator.run_task(rt, "ping", SLUG, KEY)
    _, state = log(rt)
    assert state.state == "human"
    assert state.target.state_note == "ping: the worker failed: RuntimeError: ping broke"
    assert state.actions[KEY].done and not state.actions[KEY].ok


def test_a_kind_without_a_handler_is_refused_before_anything_is_taken(rt: Runtime, sample_repo: Path) -> None:
    dispatch_ping(rt, sample_repo)
    before = rt.store.read(SLUG)
    with pytest.raises(UnknownName, match="unknown action handler 'ping'"):
        coordinator.run_task(rt, "ping", SLUG, KEY)
    assert rt.store.read(SLUG) == before


def test_a_kind_runs_in_the_sandbox_unless_its_entry_says_it_runs_no_code(
    rt: Runtime, sample_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workers.isolation.sandbox import BWRAP_ENV

    monkeypatch.setenv(BWRAP_ENV, str(sample_repo / "no-bwrap"))  # this worker cannot sandbox
    dispatch_ping(rt, sample_repo)
    with HANDLERS.registered("ping", ping):
        coordinator.run_task(rt, "ping", SLUG, KEY)
    _, state = log(rt)
    assert state.state == "human" and (state.target.state_note or "").startswith("sandbox unavailable")
    assert "agent.launch" not in {e.t for e in rt.store.read(SLUG)}  # nothing started

    git_only = ActionKind(name="tag", queue="control", sandboxed=False)
    with ACTIONS.registered("tag", git_only), HANDLERS.registered("tag", tag):
        rt.store.append(SLUG, [TargetEvent(eid="resume", target=Target(state="review", state_note=None))])
        rt.store.append(SLUG, [ActionDispatched(eid="dispatch:tag:1", key="tag:1", kind="tag", round=1)])
        coordinator.run_task(rt, "tag", SLUG, "tag:1")
    _, state = log(rt)
    assert state.actions["tag:1"].ok and state.target.state_note == "tagged"


def tag(rt: Runtime, slug: str, key: str, stop: Callable[[], bool]) -> None:
    """A kind that runs no code of the repository (as ``push``): no sandbox needed."""
    job = load_job(rt, slug, key, stop)
    assert job is not None
    finish(rt, job, [TargetEvent(eid=f"{key}:tagged", target=Target(state_note="tagged"))])


def test_a_holder_that_lost_its_lease_while_the_seat_ran_records_nothing(
    rt: Runtime, client: redis.Redis, prefix: str, sample_repo: Path
) -> None:
    from orchestrator.store import keys

    def taken() -> None:  # another worker holds the action now (this one froze past its lease)
        client.set(keys.lease(prefix, f"{SLUG}:{KEY}"), "another-holder")

    with (
        AGENT_KINDS.registered("slow", AgentKindDescriptor("loses its lease while it runs")),
        SEATS.registered("slow", EchoSeat(during=taken)),
        HANDLERS.registered("ping", ping),
    ):
        dispatch_ping(rt, sample_repo, agent_kind="slow")
        coordinator.run_task(rt, "ping", SLUG, KEY)
    kinds_of = [e.t for e in rt.store.read(SLUG)]
    assert "agent.launch" in kinds_of  # it did run ...
    assert "budget.spent" not in kinds_of and "action.done" not in kinds_of  # ... and settled nothing
    assert rt.store.get_artifact(SLUG, "ping.echo.stdout.txt") is None


class MeteredSeat(EchoSeat):
    """A seat that pays per model call (as an http model): two calls, the second refused a tool."""

    reserves_per_call = True

    def run(self, request: SeatRequest) -> AgentRun:
        from workers.agents.seat import CALL_ENDED

        for cost in (0.02, 0.03):
            assert request.reserve_call(0.5)
            request.event(CALL_ENDED, {"cost_usd": cost})
        request.event("tool.refused", {"tool": "write_file", "reason": "a reviewer does not write"})
        return super().run(request)


def test_a_seat_that_pays_per_call_has_each_call_reserved_and_settled(rt: Runtime, sample_repo: Path) -> None:
    with (
        AGENT_KINDS.registered("metered", AgentKindDescriptor("pays per call")),
        SEATS.registered("metered", MeteredSeat()),
        HANDLERS.registered("ping", ping),
    ):
        dispatch_ping(rt, sample_repo, agent_kind="metered")
        coordinator.run_task(rt, "ping", SLUG, KEY)
    events, state = log(rt)
    budget = [(e.t, e.key) for e in events if e.t.startswith("budget.")]
    assert budget == [
        ("budget.reserved", f"{KEY}:call1"),
        ("budget.spent", f"{KEY}:call1"),
        ("budget.reserved", f"{KEY}:call2"),
        ("budget.spent", f"{KEY}:call2"),
    ]  # and no reservation of the whole run besides
    assert state.spent == {"echo": 0.05}
    [refused] = [e for e in events if e.t == "tool.refused"]
    assert (refused.tool, refused.role, refused.key) == ("write_file", "reviewer", KEY)
    assert state.target.state_note == "pong: median=True"
