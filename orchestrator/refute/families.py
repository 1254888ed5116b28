"""Model families: who may give an independent second opinion.

The refuter is chosen from another model *family* (vendor) than the judge's. An agent's family is worked
out in one place, ``spec_family``: the operator's configured ``family`` first, else the family of the
model (its vendor prefix, looked through routers, else a well-known bare name), else the built-in CLI
agent's default. Independence is judged on the model that actually answered (after any fallback), with
the same resolver.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from pydantic import BaseModel

__all__ = [
    "AGENT_FAMILIES",
    "FamilyFields",
    "OpinionCandidate",
    "RefuterChoice",
    "agent_family",
    "choose_refuter",
    "family_of",
    "independence",
    "refuter_for",
    "spec_family",
    "why_no_family",
]


class FamilyFields(Protocol):
    """What the family resolver reads of an agent's entry (``orchestrator.spec.AgentSpec`` has it; this
    module imports nothing of it, so the entry's own ``family`` property can use the resolver)."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    @property
    def family_override(self) -> str | None: ...


class OpinionCandidate(FamilyFields, Protocol):
    """An agent entry that may be chosen as the second opinion when it ``gives_opinions`` (a model; a
    deterministic checker never answers a claim)."""

    @property
    def gives_opinions(self) -> bool: ...


# Vendor prefixes and their family (aliases normalized; routers resolved through the model part).
_VENDORS: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "gemini": "google",
    "googleai": "google",
    "qwen": "qwen",
    "alibaba": "qwen",
    "dashscope": "qwen",
    "xai": "xai",
    "x-ai": "xai",
    "moonshot": "moonshot",
    "moonshotai": "moonshot",
    "kimi": "moonshot",
    "deepseek": "deepseek",
    "deepseek-ai": "deepseek",
    "meta": "meta",
    "meta-llama": "meta",
    "mistral": "mistral",
    "mistralai": "mistral",
    "zhipu": "zhipu",
    "zhipuai": "zhipu",
    "z-ai": "zhipu",
    "zai": "zhipu",
    "cohere": "cohere",
    "microsoft": "microsoft",
    "github": "github",
}
# Prefixes that serve many vendors' models: the family is read from what follows.
_ROUTERS = frozenset(
    {
        "openrouter",
        "bedrock",
        "vertex",
        "vertex_ai",
        "azure",
        "azure_ai",
        "together",
        "together_ai",
        "fireworks",
        "fireworks_ai",
        "groq",
        "ollama",
        "ollama_chat",
        "litellm",
        "lm_studio",
        "huggingface",
        "hf",
        "nvidia_nim",
        "deepinfra",
        "cerebras",
        "sambanova",
        "vllm",
    }
)
_BARE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(?:gpt|chatgpt|codex|davinci|text-embedding)|^o\d+(?:$|[-_])"), "openai"),
    (re.compile(r"^(?:claude|sonnet|opus|haiku)"), "anthropic"),
    (re.compile(r"^(?:gemini|gemma|palm|bison)"), "google"),
    (re.compile(r"^(?:qwen|qwq)"), "qwen"),
    (re.compile(r"^grok"), "xai"),
    (re.compile(r"^(?:kimi|moonshot)"), "moonshot"),
    (re.compile(r"^deepseek"), "deepseek"),
    (re.compile(r"^(?:llama|codellama)"), "meta"),
    (re.compile(r"^(?:mistral|codestral|devstral|magistral|ministral|mixtral|pixtral)"), "mistral"),
    (re.compile(r"^(?:glm|chatglm)"), "zhipu"),
    (re.compile(r"^command-r"), "cohere"),
    (re.compile(r"^phi-?\d"), "microsoft"),
)


def _bare_family(name: str) -> str | None:
    for rx, family in _BARE:
        if rx.match(name):
            return family
    return None


def family_of(model: str | None) -> str | None:
    """The model's family: its vendor prefix (``openai/gpt-5`` -> openai, ``anthropic:claude`` ->
    anthropic), looked through routers (``openrouter/qwen/...`` -> qwen), else a well-known bare name
    (``gpt-*``, ``o3``, ``claude*``, ``gemini*`` ...). Lowercase; None when unknown."""
    text = (model or "").strip().lower()
    parts = [p for p in re.split(r"[/:]", text) if p]
    if len(parts) > 1 and parts[0] not in _ROUTERS:
        return _VENDORS.get(parts[0], parts[0])
    for part in parts:
        if part in _ROUTERS:
            continue
        for piece in (part, *part.split(".")):  # bedrock ids: us.anthropic.claude-...
            found = _VENDORS.get(piece) or _bare_family(piece)
            if found:
                return found
    return None


# The family of each built-in CLI agent when no model is configured; None: it fronts many vendors.
AGENT_FAMILIES: dict[str, str | None] = {
    "codex": "openai",
    "claude": "anthropic",
    "gemini": "google",
    "qwen": "qwen",
    "grok": "xai",
    "kimi": "moonshot",
    "copilot": "github",
    "opencode": None,
    "cursor": None,
    "amp": None,
    "droid": None,
    "aider": None,
    "goose": None,
    "crush": None,
}


def agent_family(name: str, model: str | None) -> str | None:
    """The family of agent ``name`` running ``model``: the model's when it is known, else the agent's
    default (``AGENT_FAMILIES``, matched on the name or its first word: ``claude-opus`` -> claude)."""
    found = family_of(model)
    if found:
        return found
    key = name.strip().lower()
    if key in AGENT_FAMILIES:
        return AGENT_FAMILIES[key]
    head = re.split(r"[-_.:/ ]", key, maxsplit=1)[0]
    return AGENT_FAMILIES.get(head)


def spec_family(spec: FamilyFields, answered_model: str | None = None) -> str | None:
    """The family of an agent entry: the one resolver, for the refuter's choice and for its independence.

    The operator's configured ``family`` wins, for every model of the entry: it says what a model id
    cannot (a proxy's alias, a self-hosted model). Without it: the family of ``answered_model`` when a
    model other than the configured one answered (a fallback may be another vendor's; an unknown one
    proves nothing, None), else ``agent_family`` of the entry's name and model.
    """
    configured = (spec.family_override or "").strip().lower()
    if configured:
        return configured
    answered = (answered_model or "").strip()
    if answered and answered != (spec.model or "").strip():
        return family_of(answered)
    return agent_family(spec.name, spec.model)


class RefuterChoice(BaseModel):
    """Who gives the second opinion; ``agent`` None when nobody fits (``reason`` says why)."""

    agent: str | None
    family: str | None
    independent: bool
    reason: str


def choose_refuter(
    judge_family: str | None,
    candidates: dict[str, str | None],
    override: str | None = None,
) -> RefuterChoice:
    """Pick the refuter from ``candidates`` (agent -> family, in preference order).

    An ``override`` is taken as is, independent only when its family is known and differs from the
    judge's. Otherwise the first candidate of a known family other than the judge's. With the judge's
    family unknown, independence cannot be shown: the first candidate of a known family is chosen, not
    independent.
    """
    judge = judge_family.lower() if judge_family else None
    if override is not None:
        fam = candidates.get(override)
        fam = fam.lower() if fam else None
        if judge is None:
            why = "forced; the judge's family is unknown: independence cannot be shown"
        elif fam is None:
            why = "forced; its family is unknown: independence cannot be shown"
        elif fam == judge:
            why = f"forced; same family as the judge: not independent ({fam})"
        else:
            return RefuterChoice(
                agent=override,
                family=fam,
                independent=True,
                reason=f"forced; family {fam}, the judge's is {judge}",
            )
        return RefuterChoice(agent=override, family=fam, independent=False, reason=why)
    known = [(a, f.lower()) for a, f in candidates.items() if f]
    if judge is None:
        if known:
            agent, fam = known[0]
            return RefuterChoice(
                agent=agent,
                family=fam,
                independent=False,
                reason=f"the judge's family is unknown: cannot prove independence ({agent} is {fam})",
            )
        return RefuterChoice(
            agent=None,
            family=None,
            independent=False,
            reason="the judge's family is unknown and no candidate has a known family",
        )
    for agent, fam in known:
        if fam != judge:
            return RefuterChoice(
                agent=agent,
                family=fam,
                independent=True,
                reason=f"{agent} is {fam}, the judge is {judge}",
            )
    names = ", ".join(f"{a} ({f or 'unknown'})" for a, f in candidates.items()) or "none"
    return RefuterChoice(
        agent=None,
        family=None,
        independent=False,
        reason=f"no candidate of a known family other than the judge's ({judge}); candidates: {names}",
    )


def why_no_family(spec: FamilyFields) -> str | None:
    """Why ``spec_family`` finds no family for the entry, and what the operator sets to give it one; None
    when it has one. A choice that comes to nothing says this, so a skipped second opinion is not a
    mystery: an entry without a model whose name is no agent Jury knows has no family at all."""
    if spec_family(spec) is not None:
        return None
    name, model = spec.name, (spec.model or "").strip()
    if model:
        why = f"its model {model!r} names no vendor Jury knows"
    elif AGENT_FAMILIES.get(name.strip().lower(), "") is None:
        why = f"{name} fronts many vendors and has no model configured"
    else:
        why = f"it has no model, and {name!r} is no agent Jury knows"
    return f'{name} has no family: {why}; set family = "<vendor>" (or a model) in [agents.{name}]'


def refuter_for(
    agents: Mapping[str, OpinionCandidate], names: Iterable[str], judge: str | None, forced: str | None = None
) -> RefuterChoice:
    """The second opinion's agent among ``names`` (in preference order; only agents that give opinions), or
    ``forced`` as is, by ``choose_refuter`` on the families ``spec_family`` resolves. ``forced`` must be
    one of ``agents``. A choice that is not independent says which entries have no family and why."""
    judge_family = spec_family(agents[judge]) if judge is not None and judge in agents else None
    if forced is not None:
        candidates = {forced: spec_family(agents[forced])}
    else:
        known = [n for n in dict.fromkeys(names) if n in agents and agents[n].gives_opinions]
        candidates = {n: spec_family(agents[n]) for n in known}
    choice = choose_refuter(judge_family, candidates, forced)
    if choice.independent:
        return choice
    involved = [judge] if judge is not None and judge in agents else []
    unknown = [why_no_family(agents[n]) for n in dict.fromkeys([*involved, *candidates])]
    said = "; ".join(w for w in unknown if w)
    return choice.model_copy(update={"reason": f"{choice.reason} ({said})"}) if said else choice


def independence(judge_family: str | None, refuter_family: str | None) -> bool:
    """Whether a second opinion is independent of the judge: both families known, and different.
    ``refuter_family`` is the answering model's, as ``spec_family`` resolves it after the run."""
    judge = (judge_family or "").strip().lower()
    refuter = (refuter_family or "").strip().lower()
    return bool(judge and refuter and judge != refuter)
