"""Every Redis key Jury uses, in one place (arq's ``constants.py`` habit).

All keys start with a prefix (``jury`` unless configured), so one Redis can hold several installations
and a test can use a random prefix and delete exactly its own keys.

    <prefix>:runs                          sorted set: slug -> creation time (server clock, seconds)
    <prefix>:run:<slug>:events             stream: one entry per event, field ``e`` = the event JSON
    <prefix>:run:<slug>:eids               set: every eid appended to the run (the dedupe memory)
    <prefix>:run:<slug>:artifact:<name>    string: an artifact's bytes
    <prefix>:run:<slug>:state              string: the fold (``run.json``)
    <prefix>:run:<slug>:lock               string: redis-py Lock token
"""

from __future__ import annotations

import re

PREFIX = "jury"

_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


def runs_index(prefix: str) -> str:
    """The sorted set of every run, scored by creation time."""
    return f"{prefix}:runs"


def _run(prefix: str, slug: str) -> str:
    return f"{prefix}:run:{slug}"


def events(prefix: str, slug: str) -> str:
    """The run's event stream."""
    return f"{_run(prefix, slug)}:events"


def eids(prefix: str, slug: str) -> str:
    """The set of eids already appended to the run."""
    return f"{_run(prefix, slug)}:eids"


def artifact(prefix: str, slug: str, name: str) -> str:
    """One artifact of the run (``name`` is already validated)."""
    return f"{_run(prefix, slug)}:artifact:{name}"


def state(prefix: str, slug: str) -> str:
    """The run's folded state (``run.json``)."""
    return f"{_run(prefix, slug)}:state"


def lock(prefix: str, slug: str) -> str:
    """The run's exclusive lock."""
    return f"{_run(prefix, slug)}:lock"


def scan_pattern(prefix: str) -> str:
    """A SCAN ``MATCH`` pattern for every key under ``prefix`` (glob characters in it escaped)."""
    return _GLOB_SPECIAL.sub(r"\\\1", prefix) + ":*"
