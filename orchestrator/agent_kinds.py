"""Agent kinds, declared once: the names a configuration may give an agent's ``kind``.

This is the pure half of an agent kind, what the deciding side needs to accept a configuration and fold
a run whose agents use it. The running half, the seat that runs an agent of the kind, is registered under
the same name in ``workers.agents.seat.SEATS``; a test checks that every kind here has a seat.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from orchestrator.registry import Registry

AGENT_KINDS: Registry[str] = Registry("agent kind")  # name -> what runs, in a few words

AGENT_KINDS.register("cli", "a subprocess agent (codex, claude ...) run from its argv")
AGENT_KINDS.register("http", "an OpenAI-compatible chat endpoint driven by Jury's own tool loop")
AGENT_KINDS.register("check", "a deterministic checker whose diagnostics become findings")

AgentKind = Annotated[str, AfterValidator(AGENT_KINDS.check)]
