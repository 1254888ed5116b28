"""What an agent kind means is its descriptor's to say: a kind declared here, with its own required key,
its own refusal to judge, no second opinions and its own transcript reader, is treated by the config
checks, the judge check, the refuter's choice, the transcript reading and ``jury agents`` exactly as its
descriptor says, with nothing of it named anywhere in the package."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from orchestrator.agent_keys import check_agent
from orchestrator.agent_kinds import AGENT_KINDS, AgentFields, AgentKindDescriptor, Which
from orchestrator.errors import ConfigError
from orchestrator.refute.families import refuter_for
from orchestrator.spec import AgentSpec
from orchestrator.transcript import READERS, Commands, commands_of


class Linter(AgentKindDescriptor):
    noun = "a linter agent"
    required = ("command",)
    gives_opinions = False

    def fields_problem(self, fields: Any) -> str | None:
        return "a linter runs on changed files only" if fields.get("scope") == "all" else None

    def judge_refusal(self, spec: AgentFields) -> str | None:
        return "a linter only lints"

    commands_in = "linter-log"  # a reader of its own, registered by this test

    def presence(self, spec: AgentFields, which: Which) -> str | None:
        return which(f"lint-{spec.command}")


@pytest.fixture(autouse=True)
def linter() -> Iterator[None]:
    reader = READERS.registered(
        "linter-log", lambda report, stdout, stderr, rollout: Commands(run=1, source="linter")
    )
    with AGENT_KINDS.registered("linter", Linter("lints")), reader:
        yield


def test_the_config_checks_ask_the_kind_what_it_needs() -> None:
    with pytest.raises(ConfigError, match="op.toml: agents.l: a linter agent needs command"):
        check_agent("op.toml", "l", {"kind": "linter"}, None)
    with pytest.raises(ConfigError, match="agents.l: a linter runs on changed files only"):
        check_agent("op.toml", "l", {"kind": "linter", "command": "x", "scope": "all"}, None)
    spec = check_agent("op.toml", "l", {"kind": "linter", "command": "x"}, None)
    assert spec.judge_refusal == "a linter only lints" and not spec.can_judge


def test_the_refuter_and_the_transcript_ask_the_kind() -> None:
    agents = {
        "judge": AgentSpec(name="judge", model="openai/gpt-5", judge_argv=["j", "{prompt}"], argv=["j"]),
        "lint": AgentSpec(name="lint", kind="linter", command="x", family="anthropic"),
        "claude": AgentSpec(name="claude", argv=["c", "{prompt}"], model="anthropic/opus"),
    }
    assert refuter_for(agents, ["lint", "claude"], "judge").agent == "claude"  # the linter never answers
    assert commands_of("linter", "whole", "", "") == Commands(run=1, source="linter")
    presence = AGENT_KINDS["linter"].presence(agents["lint"], lambda program: f"/bin/{program}")
    assert presence == "/bin/lint-x"
