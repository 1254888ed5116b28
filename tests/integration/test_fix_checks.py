"""Whether a commit holds a run's fixes (real git): a fix on top of the reviewed head is not in the head's
history; the same patch cherry-picked onto it is; and the diff's unchanged lines keep their old number."""

from __future__ import annotations

import subprocess
from pathlib import Path

from workers.runtime.fix_checks import fixes_in_history
from workers.runtime.publish import diff_lines


def git(repo: Path, *args: str) -> str:
    ident = ["-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]
    done = subprocess.run(["git", "-C", str(repo), *ident, *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def commit(repo: Path, path: str, text: str, message: str) -> str:
    (repo / path).write_text(text)
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def test_a_fix_is_on_a_commit_only_when_its_patch_is_in_the_history(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = commit(repo, "a.py", "one\ntwo\nthree\n", "base")
    head = commit(repo, "b.py", "bug\n", "the PR")
    fix = commit(repo, "b.py", "fixed\n", "the fix")
    assert not fixes_in_history(repo, head, [fix])  # the reviewed head: the fix is on top of it
    assert fixes_in_history(repo, fix, [fix])  # the fixes' own commit
    assert not fixes_in_history(repo, head, [])  # nothing to hold is no claim
    # the author takes the fix by hand onto a new head of the PR: the same patch, another sha
    git(repo, "checkout", "-q", "-b", "pr", head)
    commit(repo, "c.py", "more\n", "more work")
    git(repo, "cherry-pick", fix)
    picked = git(repo, "rev-parse", "HEAD")
    assert picked != fix and fixes_in_history(repo, picked, [fix])
    assert not fixes_in_history(repo, base, [fix])
    assert not fixes_in_history(repo, head, ["f" * 40])  # a commit git does not know: not held
    assert not fixes_in_history(tmp_path / "nowhere", fix, [fix])


def test_diff_lines_give_an_unchanged_line_its_old_number(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = commit(repo, "a.py", "".join(f"l{n}\n" for n in range(1, 11)), "base")
    # two lines removed at the top, one added after l5: l6 is new line 5 and old line 6 ... and so on
    text = "".join(f"l{n}\n" for n in range(3, 6)) + "new\n" + "".join(f"l{n}\n" for n in range(6, 11))
    head = commit(repo, "a.py", text, "change")
    lines = diff_lines(repo, base, head)
    assert lines is not None
    shown = lines["a.py"]
    assert shown[4] is None  # the added line
    assert shown[1] == 3 and shown[3] == 5 and shown[5] == 6 and shown[7] == 8  # context on both sides
    assert 9 not in shown  # beyond three lines of context
