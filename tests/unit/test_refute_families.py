"""Model families: the vendor of a model id, the built-in agents' defaults, the one resolver of an agent
entry (its configured ``family`` first), the refuter's choice and its independence
(orchestrator.refute.families)."""

from __future__ import annotations

import pytest

from orchestrator.refute.families import (
    AGENT_FAMILIES,
    agent_family,
    choose_refuter,
    family_of,
    independence,
    refuter_for,
    spec_family,
    why_no_family,
)
from orchestrator.spec import AgentSpec

# --- families ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("openai/gpt-5", "openai"),
        ("OpenAI/GPT-5", "openai"),
        ("anthropic/claude-x", "anthropic"),
        ("anthropic:claude", "anthropic"),
        ("google/gemini-2.5-pro", "google"),
        ("x-ai/grok-4", "xai"),
        ("moonshotai/kimi-k2", "moonshot"),
        ("meta-llama/llama-3.1-70b", "meta"),
        ("mistralai/devstral-small", "mistral"),
        ("deepseek-ai/DeepSeek-V3", "deepseek"),
        ("acme/secret-model", "acme"),  # an unknown vendor prefix is still a vendor
        ("openrouter/qwen/qwen3-coder", "qwen"),
        ("openrouter/anthropic/claude-sonnet-4", "anthropic"),
        ("bedrock/us.anthropic.claude-3-5-sonnet", "anthropic"),
        ("azure/gpt-4o", "openai"),
        ("vertex_ai/gemini-1.5-pro", "google"),
        ("ollama/llama3", "meta"),
        ("openrouter/some-model", None),  # a router alone is not a family
        ("gpt-5", "openai"),
        ("gpt-4.1-mini", "openai"),
        ("o1", "openai"),
        ("o3", "openai"),
        ("o4-mini", "openai"),
        ("codex-mini-latest", "openai"),
        ("gpt-5-codex", "openai"),
        ("claude-sonnet-4-5", "anthropic"),
        ("Claude-3-Opus", "anthropic"),
        ("sonnet", "anthropic"),
        ("opus", "anthropic"),
        ("gemini-2.5-flash", "google"),
        ("qwen3-coder-plus", "qwen"),
        ("grok-code-fast-1", "xai"),
        ("kimi-k2-0905", "moonshot"),
        ("moonshot-v1-8k", "moonshot"),
        ("deepseek-reasoner", "deepseek"),
        ("llama-3.3-70b", "meta"),
        ("mistral-large-latest", "mistral"),
        ("codestral-latest", "mistral"),
        ("omni-moderation", None),
        ("mystery-7b", None),
        ("", None),
        ("  ", None),
        (None, None),
    ],
)
def test_family_of(model: str | None, family: str | None) -> None:
    assert family_of(model) == family


@pytest.mark.parametrize(
    ("name", "model", "family"),
    [
        ("codex", None, "openai"),
        ("claude", None, "anthropic"),
        ("gemini", None, "google"),
        ("qwen", None, "qwen"),
        ("grok", None, "xai"),
        ("kimi", None, "moonshot"),
        ("copilot", None, "github"),
        ("opencode", None, None),
        ("cursor", None, None),
        ("amp", None, None),
        ("droid", None, None),
        ("opencode", "anthropic/claude-sonnet-4", "anthropic"),  # the model wins
        ("codex", "openrouter/qwen/qwen3-coder", "qwen"),
        ("claude-opus", None, "anthropic"),  # a catalog variant of a built-in
        ("Codex", None, "openai"),
        ("my-http-agent", None, None),
        ("claude", "mystery-7b", "anthropic"),  # an unknown model falls back to the agent's default
    ],
)
def test_agent_family(name: str, model: str | None, family: str | None) -> None:
    assert agent_family(name, model) == family


def test_agent_families_cover_the_catalog() -> None:
    assert {"codex", "claude", "gemini", "qwen", "grok", "kimi", "copilot"} <= {
        k for k, v in AGENT_FAMILIES.items() if v
    }
    assert all(AGENT_FAMILIES[k] is None for k in ("opencode", "cursor", "amp", "droid"))


CANDIDATES: dict[str, str | None] = {
    "claude": "anthropic",
    "opencode": None,
    "codex": "openai",
    "gemini": "google",
}


@pytest.mark.parametrize(
    ("judge", "candidates", "override", "agent", "independent", "reason_has"),
    [
        ("openai", CANDIDATES, None, "claude", True, "claude is anthropic, the judge is openai"),
        ("anthropic", CANDIDATES, None, "codex", True, "codex is openai"),  # skips same family and unknown
        ("ANTHROPIC", CANDIDATES, None, "codex", True, "codex"),
        (
            "openai",
            {"codex": "openai", "opencode": None},
            None,
            None,
            False,
            "no candidate of a known family",
        ),
        ("openai", {}, None, None, False, "no candidate"),
        ("openai", CANDIDATES, "gemini", "gemini", True, "forced"),
        ("openai", CANDIDATES, "codex", "codex", False, "forced; same family as the judge: not independent"),
        ("openai", CANDIDATES, "opencode", "opencode", False, "its family is unknown"),
        ("openai", CANDIDATES, "not-a-candidate", "not-a-candidate", False, "its family is unknown"),
        (None, CANDIDATES, None, "claude", False, "cannot prove independence"),
        (None, {"opencode": None}, None, None, False, "unknown"),
        (None, CANDIDATES, "codex", "codex", False, "judge's family is unknown"),
    ],
)
def test_choose_refuter(
    judge: str | None,
    candidates: dict[str, str | None],
    override: str | None,
    agent: str | None,
    independent: bool,
    reason_has: str,
) -> None:
    choice = choose_refuter(judge, candidates, override)
    assert choice.agent == agent
    assert choice.independent is independent
    assert reason_has in choice.reason
    if agent is not None and agent in candidates:
        assert choice.family == candidates[agent]


# --- the one resolver -------------------------------------------------------------------------------


def agent(name: str, model: str | None = None, family: str | None = None, kind: str = "cli") -> AgentSpec:
    extra = {"command": "ruff check ."} if kind == "check" else {}
    return AgentSpec(name=name, kind=kind, model=model, family=family, argv=[name, "{prompt}"], **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "answered", "family"),
    [
        (agent("claude"), None, "anthropic"),  # a built-in agent's default
        (agent("h", "qwen/qwen3-coder"), None, "qwen"),
        (agent("h", "openrouter/qwen/qwen3-coder"), None, "qwen"),  # routers looked through
        (agent("h", "vendorj/critic-1", family="VendorR"), None, "vendorr"),  # configured wins
        (agent("h", "vendorj/critic-1", family="vendorr"), "vendorj/critic-1", "vendorr"),
        (agent("h", "vendorj/critic-1", family="vendorr"), "gpt-5-mini", "vendorr"),  # every model
        (agent("h", "anthropic/claude-x"), "gpt-5-mini", "openai"),  # a fallback of another vendor
        (agent("h", "anthropic/claude-x"), "anthropic/claude-x", "anthropic"),
        (agent("h", "anthropic/claude-x"), "  ", "anthropic"),
        (agent("claude", "mystery-7b"), None, "anthropic"),  # unknown model: the agent's default
        (agent("claude"), "mystery-7b", None),  # an unknown answering model proves nothing
        (agent("h"), None, None),
    ],
)
def test_spec_family(spec: AgentSpec, answered: str | None, family: str | None) -> None:
    assert spec_family(spec, answered) == family
    if answered is None:
        assert spec.family == family  # AgentSpec.family is the same resolver


@pytest.mark.parametrize(
    ("judge", "refuter", "expected"),
    [
        ("openai", "anthropic", True),
        ("OpenAI", "anthropic ", True),
        ("openai", "OPENAI", False),
        ("openai", None, False),  # an unknown family proves nothing
        (None, "anthropic", False),
        (None, None, False),
        ("", "anthropic", False),
    ],
)
def test_independence(judge: str | None, refuter: str | None, expected: bool) -> None:
    assert independence(judge, refuter) is expected


AGENTS = {
    "judge": agent("judge", "vendorj/judge-1"),
    "twin": agent("twin", "vendorj/twin-1"),  # the judge's vendor, nothing configured
    "critic": agent(
        "critic", "vendorj/critic-1", family="vendorr"
    ),  # the judge's vendor prefix, another family
    "lint": agent("lint", kind="check"),
    "other": agent("other", "vendoro/other-1"),
}


@pytest.mark.parametrize(
    ("names", "forced", "chosen", "independent"),
    [
        (["twin", "critic", "other"], None, "critic", True),  # chosen by its configured family
        (["lint", "other"], None, "other", True),  # a check agent never answers
        (["twin", "lint"], None, None, False),
        (["twin", "critic"], "twin", "twin", False),  # forced, the judge's family
        (["twin"], "critic", "critic", True),  # forced, its configured family decides
    ],
)
def test_refuter_for_uses_the_configured_family(
    names: list[str], forced: str | None, chosen: str | None, independent: bool
) -> None:
    choice = refuter_for(AGENTS, [*names, "judge"], "judge", forced)
    assert (choice.agent, choice.independent) == (chosen, independent)
    if chosen is not None:
        assert choice.family == spec_family(AGENTS[chosen])


def test_a_choice_that_comes_to_nothing_says_which_entries_have_no_family_and_why() -> None:
    """An entry without a model whose name is no agent Jury knows has no family: the skipped second
    opinion's reason (shown by the run's output and ``jury show``) names it and what to set."""
    agents = {
        "mybot": agent("mybot"),  # no model, a name Jury does not know
        "helper": agent("helper", "acme-llm-7"),  # a model of no vendor Jury knows
        "opencode": agent("opencode"),  # an agent of many vendors, no model
        "judge": agent("judge", "vendorj/judge-1"),
    }
    choice = refuter_for(agents, ["mybot", "helper", "opencode"], "judge")
    assert choice.agent is None
    assert "mybot has no family: it has no model, and 'mybot' is no agent Jury knows" in choice.reason
    assert 'set family = "<vendor>" (or a model) in [agents.mybot]' in choice.reason
    assert "helper has no family: its model 'acme-llm-7' names no vendor Jury knows" in choice.reason
    assert "opencode has no family: opencode fronts many vendors" in choice.reason
    # the judge's own family unknown: said too, even when a candidate is chosen (not independent)
    agents["judge"] = agent("judge")
    agents["other"] = agent("other", "vendoro/other-1")
    chosen = refuter_for(agents, ["other"], "judge")
    assert chosen.agent == "other" and not chosen.independent
    assert "judge has no family: it has no model, and 'judge' is no agent Jury knows" in chosen.reason
    assert why_no_family(agents["other"]) is None
