"""The Redis server the tests use: ``JURY_TEST_REDIS_URL`` names it (default the machine's own,
``redis://127.0.0.1:6379``), so a developer or CI whose Redis is elsewhere (another port, a password, TLS)
points the suite at it without editing tests.

The URL names the server only: the tests choose the database themselves (a database of its own per test
session, ``tests/conftest.py: test_db``; db 0 under a key prefix of its own per test,
``tests/integration/conftest.py``), so a database in the URL is replaced, and its query kept.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from orchestrator.store.urls import redact_url

DEFAULT = "redis://127.0.0.1:6379"
SERVER = os.environ.get("JURY_TEST_REDIS_URL") or DEFAULT


def redis_url(db: int) -> str:
    """The test server's URL for database ``db``."""
    parts = urlsplit(SERVER)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ValueError(f"JURY_TEST_REDIS_URL must be a redis:// or rediss:// URL with a host: {shown()}")
    return parts._replace(path=f"/{db}").geturl()


def shown() -> str:
    """The test server's URL as a message may show it: its password masked."""
    return redact_url(SERVER)


def host_port() -> tuple[str, int]:
    """The test server's host and port (what an egress rule names)."""
    parts = urlsplit(redis_url(0))
    return parts.hostname or "127.0.0.1", parts.port or 6379
