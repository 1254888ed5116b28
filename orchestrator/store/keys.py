"""Every Redis key Jury uses, in one place (arq's ``constants.py`` habit).

All keys start with a prefix (``jury`` unless configured), so one Redis can hold several installations
and a test can use a random prefix and delete exactly its own keys.

    <prefix>:runs                          sorted set: slug -> creation time (server clock, seconds)
    <prefix>:run:<slug>:events             stream: one entry per event, field ``e`` = the event JSON
    <prefix>:run:<slug>:eids               set: every eid appended to the run (the dedupe memory)
    <prefix>:run:<slug>:artifact:<name>    string: an artifact's bytes
    <prefix>:run:<slug>:state              string: the fold (``run.json``)
    <prefix>:run:<slug>:lock               string: redis-py Lock token
    <prefix>:run:<slug>:ledger             hash: the run's budget (spent, reserved, unknown_calls)
    <prefix>:run:<slug>:cancel             string: present when the run is to be cancelled
    <prefix>:ledger:day:<yyyymmdd>         hash: the fleet's budget for one UTC day (same fields)
    <prefix>:ledger:call:<call_id>         hash: one reservation (run, day, amount, state, ...)
    <prefix>:lease:<key>                   string: the holder's random token, with a TTL
    <prefix>:done:<key>                    string: the effect named ``key`` happened (with a TTL)

Ledger amounts are integer micro-dollars (see ``workers.ledger``).
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


def ledger_run(prefix: str, slug: str) -> str:
    """The run's budget hash: ``spent``, ``reserved``, ``unknown_calls``."""
    return f"{_run(prefix, slug)}:ledger"


def cancel(prefix: str, slug: str) -> str:
    """The run's cancel flag."""
    return f"{_run(prefix, slug)}:cancel"


def ledger_day(prefix: str, yyyymmdd: str) -> str:
    """The fleet's budget hash for one UTC day (``YYYYMMDD``)."""
    return f"{prefix}:ledger:day:{yyyymmdd}"


def ledger_call(prefix: str, call_id: str) -> str:
    """One agent call's reservation hash: ``run``, ``day``, ``amount``, ``state`` and its outcome."""
    return f"{prefix}:ledger:call:{call_id}"


def lease(prefix: str, key: str) -> str:
    """The lease on the effect named ``key`` (its value is the holder's token)."""
    return f"{prefix}:lease:{key}"


def done(prefix: str, key: str) -> str:
    """The marker that the effect named ``key`` happened."""
    return f"{prefix}:done:{key}"


def scan_pattern(prefix: str) -> str:
    """A SCAN ``MATCH`` pattern for every key under ``prefix`` (glob characters in it escaped)."""
    return _GLOB_SPECIAL.sub(r"\\\1", prefix) + ":*"


def active_runs(prefix: str) -> str:
    """Set of the slugs of runs not yet ended: what the reaper looks at."""
    return f"{prefix}:runs:active"


def sent(prefix: str, key: str) -> str:
    """When an action's task was last enqueued (epoch seconds), for the reaper."""
    return f"{prefix}:sent:{key}"
