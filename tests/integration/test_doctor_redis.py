"""``jury doctor`` on the Redis's password: a network Redis without one (whoever reaches it chooses what
every worker runs) or with the example file's gets a note saying what to fix, and the password is never
shown. Run as the command, against the real local Redis."""

from __future__ import annotations

import pytest

from workers.doctor import EXAMPLE_PASSWORD_NOTE, NO_PASSWORD_NOTE, redis_password_note


@pytest.mark.parametrize(
    ("url", "note"),
    [
        ("redis://127.0.0.1:6379/0", NO_PASSWORD_NOTE),
        ("rediss://redis.internal:6380/0", NO_PASSWORD_NOTE),
        ("redis://jury@127.0.0.1:6379/0", NO_PASSWORD_NOTE),  # a user name alone authenticates nothing
        ("redis://:@127.0.0.1:6379/0", NO_PASSWORD_NOTE),
        ("redis://:change-me@redis:6379/0", EXAMPLE_PASSWORD_NOTE),
        ("redis://:CHANGE-ME-too@redis:6379/0", EXAMPLE_PASSWORD_NOTE),
        ("redis://:Zq8vT1x-long-random@redis:6379/0", None),
        ("redis://jury:Zq8vT1x-long-random@redis:6379/0", None),
        ("redis://redis:6379/0?password=Zq8vT1x-long-random", None),
        ("unix:///run/jury/redis.sock", None),  # its file mode guards it
    ],
)
def test_the_password_note(url: str, note: str | None) -> None:
    assert redis_password_note(url) == note


def test_doctor_warns_of_a_redis_without_password_and_never_shows_one(jury, shared_redis: str) -> None:
    assert "@" not in shared_redis  # the test Redis has no password, as a careless deployment's
    bare = jury("doctor", env={"JURY_REDIS_URL": shared_redis})
    assert "redis      ok" in bare.out, bare.out + bare.err
    assert f"note: {NO_PASSWORD_NOTE}" in bare.out
    password = "change-me-S3cretPassw0rd"
    with_password = shared_redis.replace("redis://", f"redis://:{password}@", 1)
    refused = jury("doctor", env={"JURY_REDIS_URL": with_password})
    assert f"note: {EXAMPLE_PASSWORD_NOTE}" in refused.out and NO_PASSWORD_NOTE not in refused.out
    assert password not in refused.out + refused.err and password not in bare.out + bare.err
