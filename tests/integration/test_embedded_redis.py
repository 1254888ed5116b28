"""The embedded Redis of one command, with real redis-server processes: each on a socket of its own, named
while it runs (``live_urls``), so commands on one state directory never take each other's place."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import redis

from workers.runtime.embedded import EmbeddedRedis, answers, live_urls


def test_two_at_once_on_one_directory_keep_their_own_sockets(tmp_path: Path) -> None:
    first, second = EmbeddedRedis(tmp_path), EmbeddedRedis(tmp_path)
    one = first.start()
    try:
        two = second.start()
        try:
            assert one != two and answers(one) and answers(two)
            assert sorted(live_urls(tmp_path)) == sorted([one, two])
            redis.Redis(unix_socket_path=one.removeprefix("unix://")).set("mine", "first")
        finally:
            second.stop()
        # The second one's start and stop left the first one where its workers find it.
        assert answers(one) and not answers(two)
        assert redis.Redis(unix_socket_path=one.removeprefix("unix://")).get("mine") == b"first"
        assert live_urls(tmp_path) == [one]
    finally:
        first.stop()
    assert live_urls(tmp_path) == [] and not list((tmp_path / "redis").glob("*.url"))


def test_the_name_of_a_command_that_died_is_removed_with_its_socket(tmp_path: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(gone.stdout)  # a process that has exited: its name outlived it (a kill -9)
    here = tmp_path / "redis"
    here.mkdir()
    stale_sock = here / f"redis-{pid}-deadbeef.sock"
    stale_sock.write_text("")
    (here / f"{pid}-deadbeef.url").write_text(f"unix://{stale_sock}\n")
    (here / "not-a-pid.url").write_text("unix:///nowhere\n")  # not one of ours: left alone, not listed
    live = EmbeddedRedis(tmp_path)
    url = live.start()
    try:
        assert live_urls(tmp_path) == [url]
        assert not (here / f"{pid}-deadbeef.url").exists() and not stale_sock.exists()
        assert (here / "not-a-pid.url").exists()
    finally:
        live.stop()


def test_a_redis_that_answers_is_listed_after_its_command_died(tmp_path: Path) -> None:
    """A ``jury review`` killed outright (kill -9) leaves its Redis and workers running its run on: that
    Redis is still listed, so its run can be reached and cancelled."""
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    orphan = EmbeddedRedis(tmp_path)
    url = orphan.start()
    try:
        dead = orphan.named.with_name(f"{int(gone.stdout)}-0rphan00.url")
        orphan.named.rename(dead)  # as if the command that named it were the one that died
        assert live_urls(tmp_path) == [url] and dead.exists()
    finally:
        orphan.stop()
        dead.unlink(missing_ok=True)
