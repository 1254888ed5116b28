"""Four ``jury review`` commands started together on one state directory, each with its embedded Redis,
of four repositories named alike (``calc``, branch ``feature``): their slugs are made of the same words in
the same minute. Each command used to pick its slug by looking for a free directory name, then claim it
only in its own private Redis: the four got two slugs between them, two run records were lost (written
over by another command's), and a run failed because another removed its worktree of the same name.
Each must claim its slug in the shared state directory before it writes anything, and get a record of its
own, complete."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from orchestrator.demo import make_sample_repo
from tests.conftest import outside_env
from tests.e2e.test_review import review_args, standard_jury

REVIEWS = 4
# The command each subprocess runs: it waits at the barrier (a byte on the shared pipe, written for all
# four at once by the test) and only then runs ``jury review``, so the four choose their slugs together.
BARRIER_THEN_JURY = (
    "import os, sys\n"
    "fd = int(sys.argv.pop(1))\n"
    "assert os.read(fd, 1) == b'g'\n"
    "os.close(fd)\n"
    "from jury_cli.app import main\n"
    "sys.argv[0] = 'jury'\n"
    "main()\n"
)


def alike_repos(where: Path) -> list[Path]:
    """Four repositories, each at ``.../calc`` with a branch ``feature`` (the sample's buggy median)."""
    repos = []
    for i in range(REVIEWS):
        sample = make_sample_repo(where / f"r{i}")
        repos.append(sample.rename(sample.parent / "calc"))
    return repos


def test_four_alike_reviews_on_one_dir_get_four_slugs_and_four_complete_records(
    tmp_path: Path, write_config, state_dir: Path, fake_state: Path
) -> None:
    config = standard_jury(write_config)
    repos = alike_repos(tmp_path / "repos")
    env = outside_env()
    env.update({"JURY_DIR": str(state_dir), "FAKE_STATE": str(fake_state), "NO_COLOR": "1"})
    gate_read, gate_write = os.pipe()
    procs: list[subprocess.Popen[str]] = []
    logs = [tmp_path / f"review-{i}.log" for i in range(REVIEWS)]
    try:
        for repo, log in zip(repos, logs, strict=True):
            with log.open("w") as out:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-c", BARRIER_THEN_JURY, str(gate_read), *review_args(repo, config)],
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                        text=True,
                        pass_fds=(gate_read,),
                    )
                )
        os.close(gate_read)
        os.write(gate_write, b"g" * REVIEWS)  # the barrier opens for all four at once
        codes = [p.wait(timeout=900) for p in procs]
    finally:
        os.close(gate_write)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    said = "\n".join(f"--- review {i}:\n{log.read_text()}" for i, log in enumerate(logs))
    assert codes == [0] * REVIEWS, said

    runs = sorted(d for d in (state_dir / "runs").iterdir() if d.is_dir())
    assert len(runs) == REVIEWS, ([d.name for d in runs], said)
    assert all(d.name.startswith("calc-feature-") for d in runs), [d.name for d in runs]
    reviewed = set()
    for d in runs:
        doc = json.loads((d / "run.json").read_text())
        assert doc["target"]["state"] == "converged", (d.name, said)
        events = [json.loads(line) for line in (d / "events.ndjson").read_text().splitlines()]
        # One run's log, whole: one target, one configuration, its rounds; not two commands' logs mixed.
        assert [e["t"] for e in events].count("jury.config") == 1, d.name
        assert [e["eid"] for e in events].count("target:0") == 1, d.name
        assert events[-1]["t"] == "target" and events[-1]["target"]["state"] == "converged", d.name
        reviewed.add(doc["target"]["path"])
        # Each command said its own slug, and its summary names its own record.
        assert sum(f"run record: {d}\n" in log.read_text() for log in logs) == 1, (d.name, said)
    assert reviewed == {str(r.resolve()) for r in repos}, reviewed
