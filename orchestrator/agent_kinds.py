"""Agent kinds, declared once: the names a configuration may give an agent's ``kind``, and what each
kind means to the deciding side.

This is the pure half of an agent kind, its descriptor (``AgentKindDescriptor``): the keys a
configuration of the kind must set and how they are checked as a whole, whether an agent of the kind
may judge or give a second opinion, how its transcript reports the commands it ran, and what this
machine needs for it (``jury agents``). Everything that used to ask ``kind == "..."`` asks the
descriptor instead, so a new kind is one entry here (or a test's ``AGENT_KINDS.registered``) and its
seat. The running half, the seat that runs an agent of the kind, is registered under the same name in
``workers.agents.seat.SEATS``; a test checks that every kind here has a seat.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Protocol

from pydantic import AfterValidator

from orchestrator.cleartext import key_in_clear
from orchestrator.registry import Registry

Which = Callable[[str], str | None]
"""Where this machine has a program (a path), or None: ``jury agents`` passes its own lookup, so this
module reads no file system."""


class AgentFields(Protocol):
    """What a descriptor reads of an agent's resolved entry (``orchestrator.spec.AgentSpec`` has it)."""

    @property
    def argv(self) -> list[str]: ...

    @property
    def judge_argv(self) -> list[str] | None: ...

    @property
    def command(self) -> str | None: ...

    @property
    def base_url(self) -> str | None: ...


class AgentKindDescriptor:
    """What the deciding side knows of one agent kind. The defaults suit a kind a test or a plugin
    brings with only a summary: no required keys, it judges, it answers as a model, its transcript is
    read per its report format, and it needs nothing installed."""

    noun = "an agent of this kind"  # how a configuration error names one
    required: tuple[str, ...] = ()  # keys an agent of the kind must set, after merging over its base
    gives_opinions = True  # a model that reasons about claims: may be chosen as the second opinion

    def __init__(self, summary: str) -> None:
        self.summary = summary  # what runs, in a few words

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.summary!r})"

    def missing(self, key: str, *, new: bool) -> str:
        """What a configuration error says of a required ``key`` left unset."""
        return f"{self.noun} needs {key}"

    def fields_problem(self, fields: Mapping[str, Any]) -> str | None:
        """What is wrong with the merged keys of an agent as a whole, beyond its required keys."""
        return None

    def judge_refusal(self, spec: AgentFields) -> str | None:
        """Why the agent cannot judge (its triage prompt needs an answer it cannot give); None: it can."""
        return None

    # Which transcript reader (``orchestrator.transcript.READERS``) says what commands an agent of the kind
    # ran: a name, not the reader, so the core that reads descriptors never imports transcripts.
    commands_in = "report"

    def presence(self, spec: AgentFields, which: Which) -> str | None:
        """Where this machine has what the agent needs (a program's path, an endpoint); None: missing."""
        return None


class CliKind(AgentKindDescriptor):
    """A subprocess agent run from its argv: the program must be installed, and it judges only through
    a ``judge_argv`` of its own."""

    noun = "a cli agent"
    required = ("argv",)

    def missing(self, key: str, *, new: bool) -> str:
        # An agent that names no kind is a cli one: a new table without argv most likely forgot it.
        return f"new agent needs {key}" if new else super().missing(key, new=new)

    def judge_refusal(self, spec: AgentFields) -> str | None:
        return None if spec.judge_argv is not None else "it has no judge_argv"

    def presence(self, spec: AgentFields, which: Which) -> str | None:
        return which(spec.argv[0]) if spec.argv else None


class HttpKind(AgentKindDescriptor):
    """An OpenAI-compatible endpoint driven by Jury's tool loop: it needs an endpoint and a model, its
    key never crosses a network in clear, and its transcript is the tool loop's, on stderr."""

    noun = "an http agent"
    required = ("base_url", "model")

    def fields_problem(self, fields: Mapping[str, Any]) -> str | None:
        return key_in_clear(
            str(fields["base_url"]), fields.get("api_key_env"), bool(fields.get("insecure_http"))
        )

    commands_in = "tool-loop"  # the tool loop's own transcript, on stderr

    def presence(self, spec: AgentFields, which: Which) -> str | None:
        return spec.base_url  # an endpoint: nothing to install


class CheckKind(AgentKindDescriptor):
    """A deterministic checker whose diagnostics become findings: no model, so it neither judges nor
    gives a second opinion; its command's program must be installed."""

    noun = "a check agent"
    required = ("command",)
    gives_opinions = False

    def judge_refusal(self, spec: AgentFields) -> str | None:
        return "it is a check agent"

    def presence(self, spec: AgentFields, which: Which) -> str | None:
        words = (spec.command or "").split()
        return which(words[0]) if words else None


AGENT_KINDS: Registry[AgentKindDescriptor] = Registry("agent kind")

AGENT_KINDS.register("cli", CliKind("a subprocess agent (codex, claude ...) run from its argv"))
AGENT_KINDS.register("http", HttpKind("an OpenAI-compatible chat endpoint driven by Jury's own tool loop"))
AGENT_KINDS.register("check", CheckKind("a deterministic checker whose diagnostics become findings"))

AgentKind = Annotated[str, AfterValidator(AGENT_KINDS.check)]
