"""Fixtures for tests against the test Redis (``JURY_TEST_REDIS_URL``, db 0): a client, and a key prefix
of one's own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from orchestrator.store import keys
from tests.redis_server import redis_url

REDIS_URL = redis_url(0)


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(REDIS_URL, decode_responses=False)
    yield c
    c.close()


@pytest.fixture
def prefix(client: redis.Redis) -> Iterator[str]:
    """A fresh key prefix; every key under it is deleted after the test."""
    p = f"jurytest-{uuid.uuid4().hex[:12]}"
    yield p
    for key in client.scan_iter(match=keys.scan_pattern(p), count=500):
        client.delete(key)
