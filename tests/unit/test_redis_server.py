"""The tests' Redis comes from ``JURY_TEST_REDIS_URL``: the server from it, the database the test's own."""

from __future__ import annotations

import pytest

from tests import redis_server


def test_the_database_is_the_tests_and_the_rest_of_the_url_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_server, "SERVER", "rediss://:Zq8-pw@redis.example:6380/5?ssl_cert_reqs=none")
    assert redis_server.redis_url(3) == "rediss://:Zq8-pw@redis.example:6380/3?ssl_cert_reqs=none"
    assert redis_server.host_port() == ("redis.example", 6380)
    assert "Zq8-pw" not in redis_server.shown()


def test_the_default_is_the_machines_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_server, "SERVER", redis_server.DEFAULT)
    assert redis_server.redis_url(0) == "redis://127.0.0.1:6379/0"
    assert redis_server.host_port() == ("127.0.0.1", 6379)


def test_a_url_that_names_no_redis_server_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_server, "SERVER", "http://:Zq8-pw@h:80")
    with pytest.raises(ValueError, match="redis:// or rediss://") as refused:
        redis_server.redis_url(0)
    assert "Zq8-pw" not in str(refused.value)
