"""A key handed to a judge, written into the code of its fix, is never kept, committed, pushed or shown.

Everything an agent says is redacted on its way into the record (tests/e2e/test_secret_leaks.py), but a
fix is code: redacting its patch would corrupt it. The leaky judge (tests/fakes/leak_judge.py) is given
``LEAKY_API_KEY`` through its entry's ``env_pass``, fixes the demo sample's median bug for real with a
regression test, and writes the key into the fixed ``stats.py``: as it is, or base64-encoded. A real run
of a PR URL on a real worker and the shared Redis, with ``--publish`` and ``--push`` to the fake GitHub:
the finding is deferred with a reason that names the leak and not the key, no patch is stored, nothing is
committed for it, and no spelling of the key is found in the state directory, Redis, ``jury show``,
``git log -p --all`` of the run's repository and of the forge's, any object of the run's repository
(reachable or not), or the forge's received bodies.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.fold import fold
from orchestrator.store.redis import from_url
from tests.conftest import FAKE_STATE_ROOT, fake_agent
from tests.e2e.test_secret_leaks import (  # noqa: F401 (fixtures)
    forge,
    git,
    leaks,
    redis_dump,
    state_files_text,
    worker,
)
from workers.agents.patch_secrets import FIX_HOLDS_SECRET

LEAK_JUDGE = Path(__file__).resolve().parents[1] / "fakes" / "leak_judge.py"


def leaky_judge(mode: str) -> str:
    argv = json.dumps([sys.executable, str(LEAK_JUDGE), mode, "{prompt_file}"])
    return (
        f"[agents.leakyjudge]\nargv = {argv}\njudge_argv = {argv}\nexpect_seconds = 5\n"
        f'env_pass = ["FAKE_STATE", "LEAKY_API_KEY"]\nstate_dirs = [{json.dumps(str(FAKE_STATE_ROOT))}]\n'
    )


@pytest.mark.parametrize("mode", ["plain", "base64"])
def test_a_key_written_into_a_fix_defers_the_finding_and_reaches_no_record(
    mode: str,
    jury,
    worker,  # noqa: F811 (the fixture)
    forge,  # noqa: F811 (the fixture)
    write_config,
    tmp_path: Path,
    state_dir: Path,
) -> None:
    server, _ = forge
    assert leaks(LEAK_JUDGE.read_text()) == []  # the judge's source does not hold it: env_pass does
    config = write_config(fake_agent("finder", "find"), leaky_judge(mode))
    r = jury(
        "review",
        "https://github.com/acme/sample/pull/7",
        "--reviewer",
        "finder",
        "--judge",
        "leakyjudge",
        "--config",
        str(config),
        "--rounds",
        "3",
        "--publish",
        "--push",
        "--no-refute",
        env=worker,
        timeout=240,
    )
    # the bug stays in the tree, so the run cannot converge: it ends for a human, the finding deferred
    assert r.code != 0 and "run human" in r.out, r.out + r.err
    assert "published to github acme/sample#7" in r.out, r.out
    slug = next(line.split()[1] for line in r.out.splitlines() if line.startswith("run "))
    events = from_url(worker["JURY_REDIS_URL"]).read(slug)
    state = fold(events, slug)
    finding = state.findings["r1-finder-1"]  # later rounds raise it again: duplicates of it, superseded
    assert {f.status for f in state.findings.values() if f is not finding} <= {"superseded"}
    assert (finding.status, finding.reason, finding.who) == ("deferred", FIX_HOLDS_SECRET, "jury"), (
        finding.status,
        finding.reason,
        state.target.state_note,
    )
    assert "the fix holds a secret (redacted)" in FIX_HOLDS_SECRET
    assert finding.patch is None and finding.sha is None and not finding.verification
    assert not [c for c in state.commits if c.finding], state.commits  # nothing committed for it
    assert not list(state_dir.rglob("*.patch")), list(state_dir.rglob("*.patch"))
    assert "the fix holds a secret (redacted)" in r.out + jury("show", slug, env=worker).out

    mirror = Path(state.target.path or "")
    remote = tmp_path / "remotes" / "acme" / "sample.git"
    record = {
        "files": state_files_text(state_dir),
        "redis": redis_dump(worker["JURY_REDIS_URL"]),
        "show": jury("show", slug, env=worker).out,
        "out": r.out + r.err,
        "forge": json.dumps([req.body for req in server.requests], default=str),
        "mirror": git(mirror, "log", "-p", "--all"),
        # every object, reachable or not: the fix was never staged, so no blob of it is on disk either
        "mirror objects": subprocess.run(
            ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=mirror, capture_output=True, check=True
        ).stdout.decode("utf-8", errors="replace"),
        "remote": git(remote, "log", "-p", "--all"),
        "worker.log": (tmp_path / "worker.log").read_text(errors="replace"),
    }
    assert "the fix holds a secret (redacted)" in record["forge"]  # the published review says why
    assert {where: leaks(text) for where, text in record.items()} == {where: [] for where in record}
