"""Whether a judge's fix holds a secret: the one output of an agent that cannot be redacted.

Everything else an agent writes enters the record redacted (``workers.agents.seat.run_seat``). A judge's
fix is code: its patch is stored as an artifact, committed into the run's tree, pushed to ``jury/<slug>``
or published as ``fixes.patch``, and redacting it would corrupt it. So a fix that holds any spelling the
redactor finds of a secret the worker registered (``orchestrator.logs``) is not taken at all: ``triage``
defers its finding with ``FIX_HOLDS_SECRET`` as the reason (which never shows the secret), stores no
patch, and verifies, commits and pushes nothing of it.

Where a spelling may hide, and where this looks, before the fix is staged (``fix_holds_secret``):

- the changed paths' names, and a changed symlink's target;
- each changed file's content in the worktree, whole: a key split over two lines of new code is two
  lines of the patch, each behind its ``+``, and the patch of a binary file is compressed base85, which
  no redactor can read; the file itself is what would be committed;

and then in the staged patch's text (``patch_holds_secret``), whatever else it holds.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import structlog

from orchestrator.redaction import Redactor
from workers.isolation.worktree import changed_paths

log = structlog.get_logger()

FIX_HOLDS_SECRET = (
    "the fix holds a secret (redacted): it was not kept, verified or committed; left for a human"
)


def fix_holds_secret(worktree: Path, redactor: Redactor) -> bool:
    """Whether the fix in ``worktree`` holds a spelling of a secret ``redactor`` knows: in a changed
    path's name, a symlink's target or a changed file's content (see the module's doc).

    Asked before the fix is staged: ``diff_patch`` writes each changed file as an object into the run's
    repository, where a blob with the key would stay (unreachable, but on disk) until it is pruned."""
    if not redactor.secrets:
        return False
    paths = changed_paths(worktree)
    if redactor.holds("\n".join(paths)):
        return True
    return any(c is None or redactor.holds(c) for c in changed_contents(worktree, paths))


def patch_holds_secret(patch: bytes, redactor: Redactor) -> bool:
    """Whether ``patch`` (the staged fix) holds a spelling of a secret ``redactor`` knows."""
    return redactor.holds(patch.decode("utf-8", errors="replace"))


def changed_contents(worktree: Path, paths: list[str]) -> list[str | None]:
    """The content of each of ``paths`` that the fix added or changed in ``worktree`` (a symlink: its
    target), None for one that could not be read (a deleted one is gone)."""
    root = worktree.resolve()
    contents: list[str | None] = []
    for rel in paths:
        path = root / rel
        try:
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                contents.append(os.readlink(path))
                continue
            if not stat.S_ISREG(info.st_mode) or root not in path.resolve().parents:
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as fh:
                contents.append(fh.read().decode("utf-8", errors="replace"))
        except FileNotFoundError:
            continue  # deleted by the fix (or a directory on the way is): nothing of it is committed
        except OSError as exc:  # unreadable here, so unchecked: the fix is not taken on faith
            log.warning("fix.unreadable_file", path=rel, error=exc.strerror)
            contents.append(None)
    return contents
