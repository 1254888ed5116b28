"""A judge's fix that holds a secret in any spelling the redactor knows is found, wherever it hides in it.

Real git: a repository with one source file, changed as a judge would change it, then ``diff_patch`` (the
patch triage would keep) and ``fix_holds_secret`` on the changed worktree. The disguises: the key as it
is, base64 inside a longer constant, split over two added lines, in a binary file (whose patch is
compressed base85), as a new file's name, as a symlink's target, reversed, hex. An honest fix, and any fix
while no secret is registered, holds none.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.redaction import Redactor
from workers.agents.patch_secrets import FIX_HOLDS_SECRET, fix_holds_secret, patch_holds_secret
from workers.isolation.worktree import diff_patch

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
KEY = "sk-fix/4f1e9c2ab7d3e8a0+Z="
SOURCE = "def median(xs):\n    return sorted(xs)[len(xs) // 2]\n"
FIXED = (
    "def median(xs):\n    s = sorted(xs)\n    n = len(s)\n"
    "    return (s[n // 2 - 1] + s[n // 2]) / 2 if n % 2 == 0 else s[n // 2]\n"
)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *IDENTITY, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc.py").write_text(SOURCE)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def half(text: str) -> tuple[str, str]:
    return text[: len(text) // 2], text[len(text) // 2 :]


LEAKS: dict[str, Callable[[Path], None]] = {
    "plain": lambda r: (r / "calc.py").write_text(f'KEY = "{KEY}"\n' + FIXED),
    "base64": lambda r: (r / "calc.py").write_text(
        f'BLOB = "{base64.b64encode(b"prefix:" + KEY.encode()).decode()}"\n' + FIXED
    ),
    "split over two lines": lambda r: (r / "calc.py").write_text(
        f'K = """{half(KEY)[0]}\n{half(KEY)[1]}"""\n' + FIXED
    ),
    "reversed": lambda r: (r / "calc.py").write_text(f'K = "{KEY[::-1]}"[::-1]\n' + FIXED),
    "hex": lambda r: (r / "calc.py").write_text(f'K = bytes.fromhex("{KEY.encode().hex()}")\n' + FIXED),
    "binary file": lambda r: (r / "data.bin").write_bytes(b"\0\x01\x02" * 40 + KEY.encode() + b"\0" * 40),
    "file name": lambda r: write(r / "notes" / f"{KEY}.txt", "fixed\n"),
    "symlink target": lambda r: (r / "link").symlink_to(f"/keys/{KEY}"),
}


def objects(repo: Path) -> bytes:
    """Every object of ``repo``'s store, as its content."""
    cmd = ["git", "cat-file", "--batch-all-objects", "--batch"]
    return subprocess.run(cmd, cwd=repo, capture_output=True, check=True).stdout


@pytest.mark.parametrize("how", list(LEAKS))
def test_a_secret_in_the_fix_is_found_before_it_is_staged(repo: Path, how: str) -> None:
    (repo / "calc.py").write_text(FIXED)
    LEAKS[how](repo)
    before = objects(repo)
    assert fix_holds_secret(repo, Redactor.of([KEY]))
    assert objects(repo) == before  # the check wrote no blob: nothing with the key is in the repository
    assert KEY not in FIX_HOLDS_SECRET and "the fix holds a secret (redacted)" in FIX_HOLDS_SECRET


ONLY_IN_FILES = ("binary file", "split over two lines")


@pytest.mark.parametrize("how", [h for h in LEAKS if h not in ONLY_IN_FILES])
def test_the_staged_patch_of_a_text_leak_holds_it_too(repo: Path, how: str) -> None:
    LEAKS[how](repo)
    assert patch_holds_secret(diff_patch(repo), Redactor.of([KEY]))


@pytest.mark.parametrize("how", ONLY_IN_FILES)
def test_some_leaks_are_found_in_the_files_not_the_patch(repo: Path, how: str) -> None:
    """The patch of a binary file is compressed, and a key split over two lines is two lines of the
    patch with a ``+`` between: only reading the changed files finds them."""
    LEAKS[how](repo)
    assert fix_holds_secret(repo, Redactor.of([KEY]))
    assert not patch_holds_secret(diff_patch(repo), Redactor.of([KEY]))


def test_an_honest_fix_holds_none(repo: Path) -> None:
    (repo / "calc.py").write_text(FIXED)
    write(
        repo / "test_calc.py",
        "from calc import median\n\n\ndef test_even():\n    assert median([1, 2, 3, 4]) == 2.5\n",
    )
    secrets = Redactor.of([KEY, "ghp_otherTOKEN0123456789"])
    assert not fix_holds_secret(repo, secrets)
    assert not patch_holds_secret(diff_patch(repo), secrets)


def test_no_secret_registered_finds_none(repo: Path) -> None:
    LEAKS["plain"](repo)
    assert not fix_holds_secret(repo, Redactor())
    assert not patch_holds_secret(diff_patch(repo), Redactor())


def test_a_deleted_file_is_not_read(repo: Path) -> None:
    (repo / "calc.py").unlink()
    assert not fix_holds_secret(repo, Redactor.of([KEY]))
