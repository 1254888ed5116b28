"""Two ``jury review`` commands at once on one state directory, each with its embedded Redis: the second
must not take the first one's place, and ``jury cancel`` must reach the first while, and after, the second
runs. With one socket path for every embedded Redis, the second command's Redis replaced the first's
socket and removed it when it stopped: the first's run could no longer be cancelled ("no Redis to reach
the run through"), and its workers' next connection would have gone to the other Redis."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import fake_agent, outside_env
from tests.e2e.test_review import marked, review_args


@contextmanager
def hung_review(
    sample_repo: Path, write_config, state_dir: Path, fake_state: Path, log: Path
) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A ``jury review`` in a subprocess (embedded Redis, local workers) whose quiet reviewer hangs now, and
    its config file; stopped at the end as a user would (SIGTERM, which stops its Redis and workers too),
    killed if it must be."""
    config = write_config(
        fake_agent("finder", "clean"), fake_agent("quiet", "hang-once"), fake_agent("judge", "clean", "fix")
    )
    env = outside_env()
    env.update({"JURY_DIR": str(state_dir), "FAKE_STATE": str(fake_state), "NO_COLOR": "1"})
    with log.open("w") as out:
        review = subprocess.Popen(
            [sys.executable, "-m", "jury_cli", *review_args(sample_repo, config)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
        )
    try:
        deadline = time.monotonic() + 120
        while not (fake_state / "marker").exists():
            assert review.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield review, config
    finally:
        if review.poll() is None:
            review.terminate()
            try:
                review.wait(timeout=60)
            except subprocess.TimeoutExpired:
                review.kill()
                review.wait()


def test_a_second_review_on_one_dir_leaves_the_first_reachable_and_cancellable(
    jury, sample_repo: Path, write_config, state_dir: Path, fake_state: Path, tmp_path: Path
) -> None:
    log = tmp_path / "first.log"
    with hung_review(sample_repo, write_config, state_dir, fake_state, log) as (first, config):
        marker = (fake_state / "marker").read_text()
        (slug,) = [d.name for d in (state_dir / "runs").iterdir()]
        # The second review, on the same directory, from start to end (its quiet reviewer is clean now).
        second = jury(*review_args(sample_repo, config))
        assert second.code == 0, second.out + second.err
        assert first.poll() is None, log.read_text()

        cancelled = jury("cancel", slug)
        assert cancelled.code == 0, cancelled.out + cancelled.err
        first.wait(timeout=120)
    said = log.read_text()
    assert f"Run {slug}  cancelled" in said, said
    assert not marked(marker), "the first run's hung agent survived its cancel"
    # Nothing of either command's Redis is left to be found.
    assert not list((state_dir / "redis").glob("*.url")), list((state_dir / "redis").iterdir())
    nothing = jury("cancel", slug)
    assert nothing.code == 2 and "no Redis to reach the run through" in nothing.err, nothing.err


def test_sigterm_stops_a_review_as_ctrl_c_does_and_leaves_nothing_running(
    sample_repo: Path, write_config, state_dir: Path, fake_state: Path, tmp_path: Path, jury
) -> None:
    """``timeout``, a process manager or a closed terminal: Python's default for SIGTERM and SIGHUP ended
    the command at once, and its embedded Redis and workers ran on, orphaned, for ever."""
    log = tmp_path / "review.log"
    with hung_review(sample_repo, write_config, state_dir, fake_state, log) as (review, _):
        review.send_signal(signal.SIGTERM)
        assert review.wait(timeout=120) == 1
    said = log.read_text()
    (slug,) = [d.name for d in (state_dir / "runs").iterdir()]
    assert f"interrupted; the run is kept. Continue it with: jury review --resume {slug}" in said, said
    marker = (fake_state / "marker").read_text()  # the hung agent and its child
    left = marked(str(state_dir)) + marked(f"jury-{review.pid}-") + marked(marker)  # Redis, workers, agent
    assert left == [], f"still running after the review was stopped: {left}"
    listed = jury("runs")
    assert f"{slug}  review" in listed.out and "(not running on this machine)" in listed.out, listed.out


def test_a_killed_review_leaves_nothing_running_and_its_run_resumes(
    sample_repo: Path, write_config, state_dir: Path, fake_state: Path, tmp_path: Path, jury
) -> None:
    """A kill -9 (or the OOM killer) gives the command no way out: its Redis and workers ran on, orphaned,
    for ever. The kernel now signals them when it dies (PDEATHSIG), and the agents die with their worker;
    nothing of the run is lost: it resumes from its files record to the end."""
    log = tmp_path / "review.log"
    with hung_review(sample_repo, write_config, state_dir, fake_state, log) as (review, _):
        review.kill()
        assert review.wait(timeout=60) == -signal.SIGKILL
        marker = (fake_state / "marker").read_text()  # the hung agent and its child

        def left() -> list[int]:
            return marked(str(state_dir)) + marked(f"jury-{review.pid}-") + marked(marker)

        deadline = time.monotonic() + 120
        while left() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left() == [], f"still running after the review was killed: {left()}"
    (slug,) = [d.name for d in (state_dir / "runs").iterdir()]
    listed = jury("runs")
    assert f"{slug}  review" in listed.out and "(not running on this machine)" in listed.out, listed.out
    resumed = jury("review", "--resume", slug)
    assert resumed.code == 0 and f"Run {slug}  converged" in resumed.out, resumed.out + resumed.err
