"""A named registry: the one place each entry of an extension point is declared.

Jury has three extension points. Two have a pure half here in ``orchestrator/`` and a running half in
``workers/``: action kinds (``orchestrator.actions.ACTIONS``, their handlers in ``workers.runtime.actions``)
and agent kinds (``orchestrator.agent_kinds.AGENT_KINDS``, descriptors; their seats in
``workers.agents.seat``). The third, forge kinds (``orchestrator.forge.kinds.FORGES``), is one descriptor
each: its URLs, head refs, check states, token and API client. Everything else that used to list kinds by
hand (queues, routes, Celery tasks, the kinds an event or a config may name, ``if kind == ...``) is
derived from these registries or asks their entries, so adding a kind is one entry and its code.

A registry is a read-only mapping once built; ``register`` adds an entry (a duplicate is an error, so two
modules never silently fight over a name) and ``registered`` adds one for the length of a ``with`` block,
which is how a test (or a plugin scoped to a run) brings its own kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")

# A kind's name becomes a Celery task name (``jury.<name>``), a queue and a prefix of action keys.
NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,39}")


class UnknownName(KeyError, ValueError):
    """A name no entry is registered under: a KeyError to a mapping's caller, a ValueError to pydantic (so
    a model field checked against a registry fails validation with the message, not with a crash)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, T], Generic[T]):
    """Entries by name, in registration order; ``what`` names the extension point in every error."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Add ``entry`` under ``name``; ValueError for a malformed or already registered name."""
        if not NAME_RE.fullmatch(name):
            raise ValueError(f"{self.what} name {name!r} must match {NAME_RE.pattern}")
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name``; ``UnknownName`` when it is not registered."""
        del self._entries[self.check(name)]

    @contextmanager
    def registered(self, name: str, entry: T) -> Iterator[T]:
        """``entry`` registered under ``name`` inside the block, and gone after it."""
        self.register(name, entry)
        try:
            yield entry
        finally:
            self._entries.pop(name, None)

    def check(self, name: str) -> str:
        """``name`` when registered, else ``UnknownName`` naming the known ones (a pydantic validator too)."""
        if name not in self._entries:
            raise UnknownName(f"unknown {self.what} {name!r}; known: {', '.join(self._entries) or 'none'}")
        return name

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def __getitem__(self, name: str) -> T:
        return self._entries[self.check(name)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._entries)})"
