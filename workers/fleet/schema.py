"""The fleet's schema gate: old and new workers share one Redis during a roll-out, and a worker never runs
against keys laid out by a newer Jury than it knows.

``<prefix>:schema`` holds ``MAJOR.MINOR``, the newest schema any worker of the fleet brought. A minor
step only adds (a key, a queue, a field old workers ignore: the archive's stubs, run summaries, the
``continue`` queue); a major step changes what old code would misread or damage, so a worker whose
``SCHEMA`` has an older major refuses to start (``ConfigError``: exit 2), naming both versions. A worker
writes its own version when the key is absent (a fleet from before the gate is schema 1.0) or older, in
one script, so concurrent starts agree. Workers already running are not stopped: a major roll-out drains
the old workers first (docs/operations.md, "Upgrades").
"""

from __future__ import annotations

from typing import cast

import redis

from orchestrator.errors import ConfigError
from orchestrator.store import keys

SCHEMA = (1, 1)  # 1.0: the layout before the gate; 1.1: archive stubs (keys.archived), the schema key

# Raise the fleet's schema to this worker's, never lower it.
#   KEYS[1]  the schema key    ARGV[1]  this worker's major    ARGV[2]  its minor
# Returns {the schema now stored, the one found (false: none)}; a value that is not MAJOR.MINOR is left
# as it is (the caller refuses it).
RAISE_LUA = """
local found = redis.call('GET', KEYS[1])
local major, minor = string.match(found or '', '^(%d+)%.(%d+)$')
local own_major, own_minor = tonumber(ARGV[1]), tonumber(ARGV[2])
if found and not major then return {found, found} end
if not found or own_major > tonumber(major)
    or (own_major == tonumber(major) and own_minor > tonumber(minor)) then
  local own = ARGV[1] .. '.' .. ARGV[2]
  redis.call('SET', KEYS[1], own)
  return {own, found or false}
end
return {found, found}
"""


def parse(value: str) -> tuple[int, int] | None:
    """``MAJOR.MINOR`` as numbers, None when ``value`` is not that."""
    major, dot, minor = value.partition(".")
    return (int(major), int(minor)) if dot and major.isdigit() and minor.isdigit() else None


def check_schema(client: redis.Redis, prefix: str = keys.PREFIX, known: tuple[int, int] = SCHEMA) -> str:
    """Gate a worker's start on the fleet's schema: ConfigError when Redis holds a newer major (or a value
    that is no version); otherwise the fleet's schema is raised to ``known`` if it was older or absent.
    Returns the schema stored now."""
    stored, _ = cast(
        list[bytes], client.register_script(RAISE_LUA)(keys=[keys.schema(prefix)], args=list(known))
    )
    text = stored.decode(errors="replace")
    version = parse(text)
    mine = f"{known[0]}.{known[1]}"
    if version is None:
        raise ConfigError(
            f"the fleet's Redis holds schema {text!r} under {keys.schema(prefix)}, which is no version; "
            f"this worker knows {mine}"
        )
    if version[0] > known[0]:
        raise ConfigError(
            f"the fleet's Redis holds schema {text}, newer than this worker's {mine}: a newer Jury laid "
            "out its keys. Upgrade this host's Jury before starting its worker (docs/operations.md, Upgrades)"
        )
    return text
