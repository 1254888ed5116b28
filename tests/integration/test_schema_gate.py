"""The schema gate: a worker writes the fleet's schema when absent or older, and refuses to start (exit 2,
naming both versions) when Redis holds a newer major. Real Redis; ``jury worker`` in a subprocess."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from orchestrator.errors import ConfigError
from orchestrator.store import keys
from workers.fleet.schema import SCHEMA, check_schema

MINE = f"{SCHEMA[0]}.{SCHEMA[1]}"


def stored(client: redis.Redis, prefix: str) -> str | None:
    raw = client.get(keys.schema(prefix))
    return None if raw is None else bytes(raw).decode()


def test_a_worker_writes_its_schema_when_there_is_none(client: redis.Redis, prefix: str) -> None:
    assert check_schema(client, prefix) == MINE
    assert stored(client, prefix) == MINE


def test_an_older_schema_is_raised_and_a_newer_minor_kept(client: redis.Redis, prefix: str) -> None:
    client.set(keys.schema(prefix), "1.0")
    assert check_schema(client, prefix, known=(1, 1)) == "1.1"
    assert stored(client, prefix) == "1.1"
    client.set(keys.schema(prefix), "1.7")  # a newer minor only adds: an older worker runs beside it
    assert check_schema(client, prefix, known=(1, 1)) == "1.7"
    assert stored(client, prefix) == "1.7"


@pytest.mark.parametrize("value", ["2.0", "11.3", "latest"])
def test_a_newer_major_or_no_version_refuses(client: redis.Redis, prefix: str, value: str) -> None:
    client.set(keys.schema(prefix), value)
    with pytest.raises(ConfigError, match=value):
        check_schema(client, prefix, known=(1, 1))
    assert stored(client, prefix) == value  # never lowered


def test_jury_worker_refuses_a_newer_fleet(jury: Any, shared_redis: str) -> None:
    client = redis.Redis.from_url(shared_redis)
    client.set(keys.schema(keys.PREFIX), f"{SCHEMA[0] + 1}.0")
    result = jury("worker", env={"JURY_REDIS_URL": shared_redis}, timeout=60)
    assert result.code == 2, (result.out, result.err)
    assert f"{SCHEMA[0] + 1}.0" in result.err and MINE in result.err
    client.close()
