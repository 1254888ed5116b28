"""What Jury writes for a run is its owner's alone: after a real review (fake agents in the sandbox, a
real worker, a triage and a fix), every file of the run's directory (prompts, the agents' stdout and
stderr, transcripts, patches, the event log) and of the workers' logs is 0600 and every directory 0700.
The worker runs under umask 077, so a writer that forgets to say so still writes privately."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.e2e.test_review import review_args, run_dir, standard_jury


def loose(root: Path) -> dict[str, str]:
    """Every path under ``root`` that anyone but its owner may read, with its mode."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            mode = stat.S_IMODE(path.lstat().st_mode)
            if not path.is_symlink() and mode & 0o077:
                found[str(path.relative_to(root))] = oct(mode)
    return found


def test_a_runs_files_are_0600_after_a_real_agent_run(jury, sample_repo, write_config, state_dir) -> None:
    r = jury(*review_args(sample_repo, standard_jury(write_config)))
    assert r.code == 0, r.out + r.err
    d = run_dir(state_dir)
    written = {p.name for p in d.rglob("*") if p.is_file()}
    assert any(n.endswith(".prompt.md") for n in written), written  # a prompt file was written
    assert any("stdout" in n for n in written) and any("stderr" in n for n in written), written
    assert loose(d) == {}
    assert loose(state_dir / "logs") == {}
