"""docs/writing-an-agent.md runs as written: the files it shows (``# file: PATH``) are written and its
``bash`` blocks run in order in one bash in an empty folder (tests/docs_blocks.py). The page's own CLI
reviewer and its own OpenAI-compatible stand-in model review a small repository with the demo's judge;
the test only swaps the model's port (8099 in the page) for a free one and gives a private state
directory."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from tests.docs_blocks import blocks, free_port, page_env, run_page

PAGE = Path(__file__).resolve().parents[2] / "docs" / "writing-an-agent.md"


def test_the_page_seats_both_agents_and_the_run_converges(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    port = free_port()
    done = run_page(PAGE, work, page_env(tmp_path), timeout=600, replace={"8099": str(port)})
    out = done.stdout
    assert done.returncode == 0, out
    assert all(f"### writing-an-agent.md:{b.line}" in out for b in blocks(PAGE) if b.runs), out
    assert (work / "agents" / "my_reviewer.py").is_file() and (work / "agents" / "chat_model.py").is_file()
    # the reviewer alone, then the model alone asking for a tool
    assert "FINDING: median([1, 2, 3, 4]) returns 3, not 2.5\nWHERE: stats.py:8\n" in out, out
    assert '"tool_calls": [{"id": "call-1", "type": "function", "function": {"name": "read_file"' in out, out
    # the review: both raised the bug, one kept, fixed and verified, both clean in round 2
    assert "raised by my-reviewer: median([1, 2, 3, 4]) returns 3, not 2.5 (stats.py:8)" in out, out
    assert "raised by my-model: median() returns the upper middle value" in out, out
    assert "superseded by jury: duplicate of" in out and "replied: clean" in out, out
    assert "run converged — all reviewers clean in round 2; 1 fix(es) accepted" in out, out
    assert "verified" in out, out
    fixes = subprocess.run(
        ["git", "-C", str(work / "sample"), "branch", "--list", "jury/*"], capture_output=True, text=True
    )
    assert fixes.stdout.strip().startswith("jury/sample-feature-"), fixes
    # the model's side: the tool call, the finding, the reply, the clean second round; then it stopped
    log = (work / "model.log").read_text()
    assert log.count("calls read_file") >= 3 and "NO CONTEST" in log and "NO NEW FINDINGS" in log, log
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "the stand-in model still listens"


def test_every_block_that_does_not_run_says_why_and_no_shell_block_hides() -> None:
    """``blocks`` refuses sh/shell/console blocks and a bash block without a reason; the page's file
    blocks are the two agents."""
    found = blocks(PAGE)
    assert all(b.not_run for b in found if b.lang == "bash" and not b.runs)
    assert [b.file for b in found if b.file] == ["agents/my_reviewer.py", "agents/chat_model.py"]
