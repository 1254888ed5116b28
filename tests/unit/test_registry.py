"""The extension points: action kinds and agent kinds, each declared once, everything else derived."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.actions import ACTIONS, CONTROL, ActionKind, failure_events, queues, routes
from orchestrator.agent_keys import check_agent
from orchestrator.agent_kinds import AGENT_KINDS, AgentKindDescriptor
from orchestrator.decide import DispatchAction, Emit, StartRound, decide
from orchestrator.domain import (
    ActionDispatched,
    ActionDone,
    AgentReport,
    Event,
    FindingRefused,
    JuryConfigEvent,
    RefuteSkipped,
    ReplyAnswered,
    ReplySent,
    RoundStart,
    TargetEvent,
)
from orchestrator.errors import ConfigError
from orchestrator.fold import DispatchedAction, RunState, apply, fold
from orchestrator.prompts import round_start
from orchestrator.registry import Registry, UnknownName
from orchestrator.spec import AgentSpec, JuryConfig, Target
from workers.agents import SEATS, AgentRun, Seat, SeatHooks, SeatRequest, register_seat, run_seat
from workers.isolation.supervise import ProcResult
from workers.runtime.actions import handles

# --- the registry itself ----------------------------------------------------------------------


def test_a_registry_keeps_one_entry_per_name_in_order() -> None:
    r: Registry[int] = Registry("widget")
    r.register("b", 2)
    r.register("a", 1)
    assert r.names() == ("b", "a") and dict(r) == {"b": 2, "a": 1} and r["a"] == 1
    with pytest.raises(ValueError, match="widget 'a' is already registered"):
        r.register("a", 3)
    with pytest.raises(ValueError, match="widget name 'Bad Name' must match"):
        r.register("Bad Name", 4)
    with pytest.raises(KeyError, match="unknown widget 'c'; known: b, a"):
        r["c"]
    r.unregister("b")
    assert r.names() == ("a",)


def test_an_unknown_name_is_a_key_error_and_a_value_error_with_its_message() -> None:
    r: Registry[int] = Registry("widget")
    with pytest.raises(UnknownName) as caught:
        r.check("x")
    assert isinstance(caught.value, KeyError) and isinstance(caught.value, ValueError)
    assert str(caught.value) == "unknown widget 'x'; known: none"  # not KeyError's quoted repr


def test_registered_lasts_for_the_block_even_when_it_raises() -> None:
    r: Registry[int] = Registry("widget")
    with pytest.raises(RuntimeError, match="boom"), r.registered("tmp", 7):
        assert r["tmp"] == 7
        raise RuntimeError("boom")
    assert "tmp" not in r


# --- action kinds: everything derived from ACTIONS -------------------------------------------------


def test_the_built_in_kinds_keep_the_queues_and_task_names_running_fleets_use() -> None:
    from workers.runtime.app import QUEUES, ROUTES

    assert ACTIONS.names() == ("review", "triage", "reply", "refute", "push", "publish")
    assert QUEUES == ("control", "triage", "reply", "refute", "review")  # the order a worker takes from them
    assert ROUTES == {
        "jury.coordinate": "control",
        "jury.reap": "control",
        "jury.review": "review",
        "jury.triage": "triage",
        "jury.reply": "reply",
        "jury.refute": "refute",
        "jury.push": "control",
        "jury.publish": "control",
    }


def test_every_action_kind_has_a_handler_a_celery_task_and_a_route() -> None:
    from workers.runtime.app import ROUTES, app
    from workers.runtime.jobs import TASKS
    from workers.runtime.tasks import ACTION_TASKS

    assert set(TASKS) == set(ACTIONS) == set(ACTION_TASKS)
    for name, kind in ACTIONS.items():
        assert kind.task == f"jury.{name}" and ROUTES[kind.task] == kind.queue
        assert app.tasks[kind.task].name == kind.task
    assert app.conf.task_routes == {task: {"queue": q} for task, q in ROUTES.items()}


def test_the_worker_command_consumes_every_queue_by_default() -> None:
    import inspect

    from jury_cli import host

    default = inspect.signature(host.worker).parameters["queues"].default
    assert default.split(",") == list(queues())


def test_a_kind_declared_in_a_test_is_dispatched_queued_and_routed_while_it_is_declared() -> None:
    kind = ActionKind(name="lint", queue="lint", sandboxed=False)
    with ACTIONS.registered("lint", kind):
        assert DispatchAction(kind="lint", key="lint:1", round=1).kind == "lint"
        assert queues()[-2:] == ("lint", "review") and routes()["jury.lint"] == "lint"  # review last
    with pytest.raises(ValidationError, match="unknown action kind 'lint'; known: review, triage"):
        DispatchAction(kind="lint", key="lint:1", round=1)
    assert "lint" not in queues() and "jury.lint" not in routes()


def test_a_log_naming_a_kind_this_release_does_not_know_still_folds() -> None:
    state = fold([ActionDispatched(eid="d", key="lint:1", kind="lint", round=1)], "s")
    assert state.actions["lint:1"].kind == "lint" and not state.actions["lint:1"].done


def test_a_handler_or_a_seat_for_an_undeclared_kind_is_refused() -> None:
    with pytest.raises(UnknownName, match="unknown action kind 'nosuch'"):
        handles("nosuch")
    with pytest.raises(UnknownName, match="unknown agent kind 'nosuch'"):
        register_seat("nosuch", EchoSeat())


def act(kind: str, **kw: Any) -> DispatchedAction:
    return DispatchedAction(key=f"{kind}:k", kind=kind, round=2, agent="a", **kw)


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (act("review"), [(AgentReport, {"verdict": "error", "error": "R", "role": "reviewer", "round": 2})]),
        (act("triage", finding="f1"), [(FindingRefused, {"id": "f1", "reason": "R", "who": "a"})]),
        (
            act("reply", findings=["f1", "f2"]),
            [(ReplySent, {"findings": ["f1", "f2"]}), (ReplyAnswered, {"verdict": "error", "error": "R"})],
        ),
        (
            act("refute", finding="f1"),
            [(RefuteSkipped, {"id": "f1", "reason": "the refuter could not run: R"})],
        ),
        (act("refute"), [(RefuteSkipped, {"id": None, "reason": "the refuter could not run: R"})]),
        (act("push"), []),
    ],
)
def test_what_each_kind_leaves_when_its_task_crashes(
    action: DispatchedAction, expected: list[tuple[type, dict[str, Any]]]
) -> None:
    events = failure_events(action, "R")
    assert [type(e) for e in events] == [t for t, _ in expected]
    for event, (_, fields) in zip(events, expected, strict=True):
        assert event.eid.startswith(f"{action.key}:")  # derived from the action: a redelivery dedupes
        assert {k: getattr(event, k) for k in fields} == fields


def settle(state: RunState) -> list[Any]:
    """Apply what decide emits until it dispatches or waits; return that."""
    for _ in range(50):
        actions = decide(state)
        emits = [a.event for a in actions if isinstance(a, Emit)]
        emits += [round_start(a) for a in actions if isinstance(a, StartRound)]
        if not emits:
            return actions
        for e in emits:
            apply(state, e)
    raise AssertionError("decide never settled")


def test_a_crashed_second_opinion_on_the_converged_claim_does_not_leave_the_run_waiting() -> None:
    spec = AgentSpec(name="x", argv=["x", "{prompt}"], judge_argv=["x", "{prompt}"])
    cfg = JuryConfig(
        reviewers=["a"], judge="j", agents={"a": spec, "j": spec, "r": spec}, checks={"t": "pytest -q"}
    )
    cfg = cfg.model_copy(update={"refute": True, "refuter": "r"})
    events: list[Event] = [
        TargetEvent(eid="t", target=Target(repo="r", state="review", head="h0", base="b0")),
        JuryConfigEvent(eid="c", config=cfg),
        RoundStart(eid="round.start:1", n=1, sha="h0", prompt="p"),
        ActionDispatched(eid="dispatch:review:r1:a", key="review:r1:a", kind="review", round=1, agent="a"),
        AgentReport(eid="review:r1:a:report", agent="a", round=1, verdict="clean", seconds=1.0),
        ActionDone(eid="review:r1:a:done", key="review:r1:a"),
    ]
    state = fold(events, "s")
    [final] = settle(state)
    assert isinstance(final, DispatchAction) and final.kind == "refute" and final.finding is None
    dispatched = ActionDispatched(
        eid=f"dispatch:{final.key}", key=final.key, kind="refute", round=1, agent="r"
    )
    apply(state, dispatched)
    for e in [
        *failure_events(state.actions[final.key], "boom"),
        ActionDone(eid="d", key=final.key, ok=False),
    ]:
        apply(state, e)
    assert settle(state) == [] and state.state == "converged"  # it used to wait here for ever, in review
    record = state.final_refutation  # a dict or a model, as the fold keeps it
    fields = record if isinstance(record, dict) else record.model_dump()  # type: ignore[union-attr]
    assert fields["ran"] is False and fields["skipped_reason"] == "the refuter could not run: boom"


# --- agent kinds: a seat per kind, hooks around it ----------------------------------------------


class EchoSeat:
    """A seat that runs nothing: it answers with its prompt, ticks once and asks for one model call."""

    reserves_per_call = True

    def run(self, request: SeatRequest) -> AgentRun:
        out = request.out_dir / f"{request.name}.stdout.txt"
        out.write_text(request.prompt)
        request.tick(1.0, 0.5)
        allowed = request.reserve_call(0.25)
        request.event("echo.said", {"allowed": allowed})
        proc = ProcResult(0, False, False, 0.1, out, out, len(request.prompt), 0)
        return AgentRun(
            proc=proc, report=request.prompt, session_id=None, stdout=request.prompt, stderr="", argv=[]
        )


class Recorder(SeatHooks):
    def __init__(self, name: str, calls: list[str], allow: bool = True) -> None:
        self.name, self.calls, self.allow = name, calls, allow

    def before_run(self, seat: Seat, request: SeatRequest) -> None:
        self.calls.append(f"{self.name}.before_run")

    def on_tick(self, request: SeatRequest, seconds: float, quiet: float) -> None:
        self.calls.append(f"{self.name}.tick:{seconds}")

    def before_call(self, request: SeatRequest, amount: float) -> bool:
        self.calls.append(f"{self.name}.before_call:{amount}")
        return self.allow

    def on_event(self, request: SeatRequest, name: str, fields: dict[str, Any]) -> None:
        self.calls.append(f"{self.name}.event:{name}:{fields}")

    def after_run(self, seat: Seat, request: SeatRequest, run: AgentRun) -> None:
        self.calls.append(f"{self.name}.after_run:{run.report}")


@pytest.fixture
def echo_kind() -> Any:
    with (
        AGENT_KINDS.registered("echo", AgentKindDescriptor("answers with its prompt")),
        SEATS.registered("echo", EchoSeat()),
    ):
        yield AgentSpec(name="e", kind="echo")


def request(spec: AgentSpec, tmp_path: Path, hooks: list[SeatHooks]) -> SeatRequest:
    return SeatRequest(
        spec=spec,
        role="reviewer",
        prompt="hi",
        worktree=tmp_path,
        out_dir=tmp_path,
        name="n",
        timeout=5,
        hooks=hooks,
    )


def test_an_agent_kind_registered_in_a_test_runs_through_run_seat_with_every_hook_in_order(
    echo_kind: AgentSpec, tmp_path: Path
) -> None:
    calls: list[str] = []
    run = run_seat(request(echo_kind, tmp_path, [Recorder("a", calls), Recorder("b", calls)]))
    assert run.report == "hi" and (tmp_path / "n.stdout.txt").read_text() == "hi"
    assert calls == [
        "a.before_run",
        "b.before_run",
        "a.tick:1.0",
        "b.tick:1.0",
        "a.before_call:0.25",
        "b.before_call:0.25",
        "a.event:echo.said:{'allowed': True}",
        "b.event:echo.said:{'allowed': True}",
        "a.after_run:hi",
        "b.after_run:hi",
    ]


def test_the_first_hook_that_refuses_a_call_refuses_it(echo_kind: AgentSpec, tmp_path: Path) -> None:
    calls: list[str] = []
    run_seat(request(echo_kind, tmp_path, [Recorder("a", calls, allow=False), Recorder("b", calls)]))
    assert "a.before_call:0.25" in calls and "b.before_call:0.25" not in calls
    assert "a.event:echo.said:{'allowed': False}" in calls


def test_a_hook_that_raises_before_the_run_keeps_the_seat_from_running(
    echo_kind: AgentSpec, tmp_path: Path
) -> None:
    class Refuse(SeatHooks):
        def before_run(self, seat: Seat, request: SeatRequest) -> None:
            raise RuntimeError("budget exhausted")

    with pytest.raises(RuntimeError, match="budget exhausted"):
        run_seat(request(echo_kind, tmp_path, [Refuse()]))
    assert not (tmp_path / "n.stdout.txt").exists()


def test_an_agent_kind_is_a_config_kind_only_while_it_is_declared(echo_kind: AgentSpec) -> None:
    assert check_agent("op.toml", "e", {"kind": "echo"}, None).kind == "echo"
    with AGENT_KINDS.registered("other", AgentKindDescriptor("x")):
        assert AgentSpec(name="o", kind="other").kind == "other"
    with pytest.raises(ValidationError, match="unknown agent kind 'other'; known: cli, http, check, echo"):
        AgentSpec(name="o", kind="other")
    with pytest.raises(ConfigError, match="agents.o.kind: must be one of cli, http, check, echo"):
        check_agent("op.toml", "o", {"kind": "other"}, None)


def test_every_agent_kind_has_a_seat() -> None:
    assert set(AGENT_KINDS) == set(SEATS) == {"cli", "http", "check"}
    assert {k: SEATS[k].reserves_per_call for k in SEATS} == {"cli": False, "http": True, "check": False}


def test_a_declared_agent_kind_without_a_seat_fails_when_it_would_run(tmp_path: Path) -> None:
    with (
        AGENT_KINDS.registered("seatless", AgentKindDescriptor("x")),
        pytest.raises(UnknownName, match="unknown seat 'seatless'"),
    ):
        run_seat(request(AgentSpec(name="s", kind="seatless"), tmp_path, []))


def test_the_control_queue_is_first() -> None:
    assert queues()[0] == CONTROL
