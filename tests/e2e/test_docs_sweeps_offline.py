"""docs/sweeps-offline.md runs as written: its ``bash`` blocks, in order, in one bash in an empty folder
(tests/docs_blocks.py), against a dev forge the page itself starts in the background and stops. The test
gives it a free port (``JURY_DEV_FORGE_PORT`` and ``JURY_DEV_FORGE``, which the page's commands read)
and a private state directory; the page does the rest."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.docs_blocks import blocks, free_port, page_env, run_page

PAGE = Path(__file__).resolve().parents[2] / "docs" / "sweeps-offline.md"


def test_the_page_runs_and_the_forge_receives_what_it_says(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    port = free_port()
    env = page_env(tmp_path) | {
        "JURY_DEV_FORGE_PORT": str(port),
        "JURY_DEV_FORGE": f"http://127.0.0.1:{port}",
    }
    done = run_page(PAGE, work, env, timeout=600)
    out = done.stdout
    assert done.returncode == 0, out
    assert all(f"### sweeps-offline.md:{b.line}" in out for b in blocks(PAGE) if b.runs), out
    # seeded: three PRs, the sweep enqueued one run each and each converged
    for line in ("#1  median -> main", "#2  readme -> main", "#3  notes -> main", "enqueued 3, skipped 0"):
        assert line in out, out
    assert out.count("converged  rounds=") == 3, out
    assert "round 1 at" in out and "demo-finder=found" in out and "1 fix(es) accepted" in out, out
    # what the forge received, as `jury dev forge published` lists it
    assert "comment on stats.py:13: **Jury** (demo-finder, round 1): median()" in out, out
    # the clean PRs' heads are success; the median PR's head lacks its fix (on jury/<slug>): failure
    assert out.count("status jury: success") == 2 and out.count("status jury: failure") == 1, out
    assert "not on this commit: `jury fetch sample-1-" in out, out
    assert out.count("review by jury-dev: ### Jury: converged") == 3, out
    # the forge's own log, and it stopped when the page said so
    log = (work / "forge.log").read_text()
    assert log.count("/reviews -> 200") == 3 and log.count("/statuses/") == 3, log
    assert log.rstrip().endswith("dev forge stopped"), log
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "the dev forge still listens"
    assert (work / "forge" / "acme" / "sample.git").is_dir()


def test_every_block_that_does_not_run_says_why() -> None:
    shown = [b for b in blocks(PAGE) if b.lang == "bash" and not b.runs]
    assert shown and all(b.not_run for b in shown)
