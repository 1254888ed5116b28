"""A shared Redis that does not answer is a setting to fix: one line naming Redis, the URL tried (its
password masked) and ``JURY_REDIS_URL``, and exit 2, as any other configuration error; never "cannot
create run run ..." and exit 1, never the password."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

PASSWORD = "hunter2-s3cret"


def closed_port() -> int:
    """A local port nothing listens on: bound, read, released (a connect to it is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "args",
    [
        ("runs",),
        ("show", "some-run-1-a"),
        ("cancel", "some-run-1-a"),
        ("review", "{repo}", "--branch", "feature", "--detach"),
    ],
    ids=["runs", "show", "cancel", "review"],
)
def test_redis_down_names_redis_the_redacted_url_and_the_variable_and_exits_2(
    jury, sample_repo: Path, args: tuple[str, ...]
) -> None:
    url = f"redis://:{PASSWORD}@127.0.0.1:{closed_port()}/0"
    r = jury(*(a.format(repo=sample_repo) for a in args), env={"JURY_REDIS_URL": url}, timeout=120)
    assert r.code == 2, r.out + r.err
    said = r.err.strip()
    assert len(said.splitlines()) == 1, said
    assert said.startswith("jury: cannot reach Redis at redis://:***@127.0.0.1:"), said
    assert "(JURY_REDIS_URL)" in said and "Connection refused" in said, said
    assert PASSWORD not in r.err + r.out
    assert "Traceback" not in r.err and "run run" not in r.err
