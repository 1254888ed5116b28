"""A run that vanished from the shared Redis (its keys expired or were deleted): ``jury show`` and the live
follow of ``jury review`` say so and exit 1, instead of showing nothing or waiting forever.

The CLI in a subprocess against this session's Redis database; no workers, so a run stays where
``jury review`` left it (enqueued) until the test deletes its keys.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.store import keys
from orchestrator.store.redis import RedisStore, from_url
from tests.conftest import fake_agent, outside_env

GONE = "is no longer in the store"


@pytest.fixture
def store(shared_redis: str):
    s = from_url(shared_redis)
    yield s
    s.close()


def review_args(repo: Path, config: Path, *extra: str) -> list[str]:
    return [
        "review",
        str(repo),
        "--branch",
        "feature",
        "--trunk",
        "main",
        "--reviewer",
        "quiet",
        "--judge",
        "quiet",
        "--config",
        str(config),
        *extra,
    ]


def delete_run(store: RedisStore, slug: str, *, index: bool) -> None:
    """Delete every key of the run (as an expiry does), and its index entry when ``index``."""
    names = store.run_keys(slug)
    assert keys.events(store.prefix, slug) in names
    store.client.delete(*names)
    if index:
        store.client.zrem(keys.runs_index(store.prefix), slug)


def test_show_of_a_run_whose_keys_are_gone(
    jury, sample_repo, write_config, shared_redis, store, state_dir
) -> None:
    env = {"JURY_REDIS_URL": shared_redis}
    config = write_config(fake_agent("quiet", "quiet", "judge-accept"))
    started = jury(*review_args(sample_repo, config, "--detach"), env=env)
    assert started.code == 0, started.err
    slug = started.out.strip()
    shown = jury("show", slug, env=env)
    assert shown.code == 0, shown.err
    assert (state_dir / "runs" / slug / "events.ndjson").is_file()

    delete_run(store, slug, index=False)  # the index still names it: its log is gone
    gone = jury("show", slug, env=env)
    assert gone.code == 1, (gone.out, gone.err)
    assert f"run {slug} {GONE}" in gone.err and str(state_dir / "runs" / slug) in gone.err

    store.client.zrem(keys.runs_index(store.prefix), slug)  # forgotten by the index too (as after expiry)
    gone = jury("show", slug, "--json", env=env)
    assert gone.code == 1 and f"run {slug} {GONE}" in gone.err and gone.out == ""

    unknown = jury("show", "never-was", env=env)
    assert unknown.code == 2 and "no run named never-was" in unknown.err


def test_follow_ends_when_the_run_is_deleted(
    sample_repo, write_config, shared_redis, store, state_dir, fake_state
) -> None:
    config = write_config(fake_agent("quiet", "quiet", "judge-accept"))
    env = outside_env()
    env.update(
        {
            "JURY_DIR": str(state_dir),
            "FAKE_STATE": str(fake_state),
            "NO_COLOR": "1",
            "JURY_REDIS_URL": shared_redis,
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "jury_cli", *review_args(sample_repo, config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        active = keys.active_runs(store.prefix)
        while not (slugs := store.runs()) or not store.client.sismember(active, slugs[0]):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never reached Redis"
            time.sleep(0.05)
        (slug,) = slugs
        delete_run(store, slug, index=True)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, (out, err)
    assert f"run {slug} {GONE}" in err
    assert store.origin(slug) is None  # the follow wrote nothing back on its way out


def test_follow_ends_when_a_late_writer_begins_the_log_again(
    sample_repo, write_config, shared_redis, store, state_dir, fake_state
) -> None:
    # Deleted, then a worker still at it appends: the stream exists again, without the run's history.
    from orchestrator.domain import TargetEvent
    from orchestrator.spec import Target

    config = write_config(fake_agent("quiet", "quiet", "judge-accept"))
    env = outside_env()
    env.update(
        {
            "JURY_DIR": str(state_dir),
            "FAKE_STATE": str(fake_state),
            "NO_COLOR": "1",
            "JURY_REDIS_URL": shared_redis,
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "jury_cli", *review_args(sample_repo, config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        # The review names its run once it follows it (its log's origin read): then the log is replaced.
        assert proc.stdout is not None
        named = proc.stdout.readline()
        assert named.startswith("run "), (named, proc.communicate())
        slug = named.split()[1]
        assert store.runs() == [slug]
        pipe = store.client.pipeline(transaction=True)
        pipe.delete(*store.run_keys(slug))
        pipe.execute()
        store.append(slug, [TargetEvent(eid="late:1", target=Target(state_note="a late task"))])
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, (out, err)
    assert f"run {slug} {GONE}" in err


def test_a_files_record_with_no_readable_event_is_said_not_shown_as_a_run(
    jury, state_dir: Path, tmp_path: Path
) -> None:
    """Its log torn or overwritten: ``jury runs`` lists it as skipped, and ``jury show`` and ``jury fetch``
    say why and exit 1 (``show`` printed a run "queued" at target "None None", exit 0)."""
    from orchestrator.store.files import FileStore
    from tests.fakes import console_run as run

    FileStore(state_dir).append("acme-7", run.started())
    (state_dir / "runs" / "acme-7" / "events.ndjson").write_bytes(b"\x00\xff not json\n")
    listed = jury("runs")
    assert listed.code == 0 and "acme-7  skipped: no readable events" in listed.out, listed.out
    clone = tmp_path / "clone"
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    for args in (("show", "acme-7"), ("fetch", "acme-7", "--into", str(clone))):
        said = jury(*args)
        assert said.code == 1, (args, said.out, said.err)
        assert "run acme-7 has no readable events" in said.err and "None" not in said.out, said.err
