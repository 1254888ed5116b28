"""expand_argv, argv_for and run_cli_agent with a fake agent run as a real process."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from orchestrator.spec import AgentSpec
from tests.integration.jump_clock import JumpClock
from workers.agents.cli import argv_for, expand_argv, run_cli_agent

PF = Path("/tmp/p.md")
WT = Path("/wt")
MODEL_ARGS = ["--model", "{model}"]


@pytest.mark.parametrize(
    ("template", "session", "model", "expected"),
    [
        (["codex", "exec", "{prompt}"], None, None, ["codex", "exec", "do it"]),
        (["q", "--prompt={prompt}"], None, None, ["q", "--prompt=do it"]),
        (["a", "{model_args}", "-p", "{prompt}"], None, "gpt-5", ["a", "--model", "gpt-5", "-p", "do it"]),
        (["a", "{model_args}", "-p", "{prompt}"], None, None, ["a", "-p", "do it"]),
        (
            ["d", "-f", "{prompt_file}", "--cwd", "{worktree}"],
            None,
            None,
            ["d", "-f", str(PF), "--cwd", str(WT)],
        ),
        (["c", "--session-id", "{session}"], "s-1", None, ["c", "--session-id", "s-1"]),
        (["x", "{session}:{model}"], "s", "m", ["x", "s:m"]),
        (["x", '--json={"a": 1}'], None, None, ["x", '--json={"a": 1}']),  # unknown braces left alone
    ],
)
def test_expand_argv(
    template: list[str], session: str | None, model: str | None, expected: list[str]
) -> None:
    got = expand_argv(
        template,
        prompt="do it",
        prompt_file=PF,
        worktree=WT,
        session=session,
        model=model,
        model_args=MODEL_ARGS,
    )
    assert got == expected


def test_expand_argv_substitutes_once() -> None:
    """Placeholder text inside the prompt is not expanded again."""
    got = expand_argv(
        ["a", "{prompt}"],
        prompt="see {worktree} and {session}",
        prompt_file=PF,
        worktree=WT,
        session=None,
        model=None,
        model_args=MODEL_ARGS,
    )
    assert got == ["a", "see {worktree} and {session}"]


@pytest.mark.parametrize(
    ("template", "session", "model", "message"),
    [
        (["c", "--resume", "{session}"], None, None, "needs {session} but none is set"),
        (["c", "--session={session}"], None, "m", "needs {session} but none is set"),
        (["c", "--model", "{model}"], "s", None, "needs {model} but none is set"),
        (["c", "--flags={model_args}"], "s", "m", "{model_args} must be a whole argv element"),
    ],
)
def test_expand_argv_errors(
    template: list[str], session: str | None, model: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        expand_argv(
            template,
            prompt="p",
            prompt_file=PF,
            worktree=WT,
            session=session,
            model=model,
            model_args=MODEL_ARGS,
        )


def test_argv_for() -> None:
    spec = AgentSpec(name="a", argv=["r"], judge_argv=["j"], resume_argv=["re"])
    assert argv_for(spec, "reviewer", resume=False) == ["r"]
    assert argv_for(spec, "judge", resume=True) == ["j"]
    assert argv_for(spec, "reply", resume=True) == ["re"]
    assert argv_for(spec, "reply", resume=False) == ["r"]
    plain = AgentSpec(name="b", argv=["r"])
    assert argv_for(plain, "reply", resume=True) == ["r"]
    with pytest.raises(ValueError, match="agent b has no judge_argv"):
        argv_for(plain, "judge", resume=False)


FAKE_AGENT = """
    import json, os, sys, time
    prompt = open(sys.argv[1], encoding="utf-8").read()
    print("session id: abc-123", file=sys.stderr)
    print("thinking...", file=sys.stderr, flush=True)
    if "SLEEP" in prompt:
        time.sleep(120)
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}))
    print("REPORT for: " + prompt)
"""


@pytest.fixture
def fake_agent(tmp_path: Path) -> Path:
    script = tmp_path / "fake_agent.py"
    script.write_text(textwrap.dedent(FAKE_AGENT))
    return script


def _spec(script: Path, **kw: object) -> AgentSpec:
    fields: dict[str, object] = {
        "name": "fake",
        "argv": [sys.executable, str(script), "{prompt_file}"],
        "session_from": r"session id: (\S+)",
        "state_dirs": [str(script.parent)],  # the sandbox hides the host's /tmp, where the script is
    }
    fields.update(kw)
    return AgentSpec.model_validate(fields)


BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/u", "OPENAI_API_KEY": "sk-x", "JURY_REDIS_URL": "r://"}


def test_run_cli_agent_report_and_session(fake_agent: Path, tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    worktree.mkdir()
    spec = _spec(fake_agent, env={"AGENT_FLAG": "1"})
    run = run_cli_agent(
        spec,
        role="reviewer",
        prompt="review ✓ this",
        worktree=worktree,
        out_dir=tmp_path / "out",
        name="r1-fake",
        timeout=10,
        base_env=BASE_ENV,
    )
    assert run.proc.exit_code == 0 and run.proc.error is None
    assert run.session_id == "abc-123"
    assert run.report.endswith("REPORT for: review ✓ this")
    assert "session id: abc-123" in run.stderr
    out = tmp_path / "out"
    assert (out / "r1-fake.prompt.md").read_text(encoding="utf-8") == "review ✓ this"
    assert run.proc.stdout_path == out / "r1-fake.stdout.txt"
    assert run.proc.stderr_path == out / "r1-fake.stderr.txt"
    seen = json.loads(run.stdout.splitlines()[0])
    assert seen["argv"] == [str((out / "r1-fake.prompt.md").resolve())]
    assert run.argv == [sys.executable, str(fake_agent), seen["argv"][0]]
    assert seen["cwd"] == str(worktree.resolve())
    assert seen["env"]["AGENT_FLAG"] == "1"
    assert seen["env"]["HOME"] == "/tmp/home"  # a private HOME: /home/u is no directory, so it moves
    assert "OPENAI_API_KEY" not in seen["env"]
    assert "JURY_REDIS_URL" not in seen["env"]


def test_run_cli_agent_env_pass_and_new_session(fake_agent: Path, tmp_path: Path) -> None:
    spec = _spec(
        fake_agent,
        argv=[sys.executable, str(fake_agent), "{prompt_file}", "--session={session}"],
        session_from=None,
        new_session=True,
        env_pass=["OPENAI_API_KEY"],
    )
    run = run_cli_agent(
        spec,
        role="reviewer",
        prompt="p",
        worktree=tmp_path,
        out_dir=tmp_path / "out",
        name="n",
        timeout=10,
        base_env=BASE_ENV,
    )
    assert run.session_id is not None
    assert str(uuid.UUID(run.session_id)) == run.session_id
    assert run.argv[-1] == f"--session={run.session_id}"
    seen = json.loads(run.stdout.splitlines()[0])
    assert seen["env"]["OPENAI_API_KEY"] == "sk-x"


def test_run_cli_agent_passes_given_session_on_resume(fake_agent: Path, tmp_path: Path) -> None:
    spec = _spec(
        fake_agent,
        resume_argv=[sys.executable, str(fake_agent), "{prompt_file}", "--resume", "{session}"],
        session_from=r"no such line (\S+)",
        new_session=True,
    )
    run = run_cli_agent(
        spec,
        role="reply",
        prompt="p",
        worktree=tmp_path,
        out_dir=tmp_path / "out",
        name="reply",
        session="given-1",
        resume=True,
        timeout=10,
        base_env=BASE_ENV,
    )
    assert run.argv[-2:] == ["--resume", "given-1"]
    assert run.session_id == "given-1"


def test_run_cli_agent_timeout(fake_agent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ticks: list[float] = []
    clock = JumpClock.install(monkeypatch)
    timeout = 600.0

    def tick(seconds: float, quiet: float) -> None:
        # The timeout fires once the agent has said its session id, however long it took to get there.
        ticks.append(seconds)
        if not clock.jumped and "thinking" in (tmp_path / "out" / "slow.stderr.txt").read_text():
            clock.jump(timeout)

    run = run_cli_agent(
        _spec(fake_agent),
        role="reviewer",
        prompt="SLEEP please",
        worktree=tmp_path,
        out_dir=tmp_path / "out",
        name="slow",
        timeout=timeout,
        grace=0.5,
        tick_every=0.02,
        on_tick=tick,
        base_env=BASE_ENV,
    )
    assert run.proc.timed_out
    assert run.proc.seconds < timeout + 60  # killed, not left to its 120 s sleep
    assert ticks
    assert run.session_id == "abc-123"  # what was printed before the kill is still read


def test_run_cli_agent_missing_command(tmp_path: Path) -> None:
    spec = AgentSpec(name="ghost", argv=["jury-no-such-agent-xyz", "{prompt}"])
    run = run_cli_agent(
        spec,
        role="reviewer",
        prompt="p",
        worktree=tmp_path,
        out_dir=tmp_path / "out",
        name="ghost",
        timeout=5,
        base_env=BASE_ENV,
    )
    assert run.proc.error == "command not found: jury-no-such-agent-xyz"
    assert run.report == ""
    assert run.session_id is None
