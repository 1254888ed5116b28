"""Whether a judge's fix holds a secret: the one output of an agent that cannot be redacted.

Everything else an agent writes enters the record redacted (``workers.agents.seat.run_seat``). A judge's
fix is code: its patch is stored as an artifact, committed into the run's tree, pushed to ``jury/<slug>``
or published as ``fixes.patch``, and redacting it would corrupt it. So a fix that holds any spelling the
redactor finds of a secret the worker registered (``orchestrator.logs``) is not taken at all: ``triage``
defers its finding with ``FIX_HOLDS_SECRET`` as the reason (which never shows the secret), stores no
patch, and verifies, commits and pushes nothing of it.

Where a spelling may hide, and where this looks:

- the patch's text: its removed lines, its paths, a symlink's target;
- each changed file's content in the worktree, whole: a key split over two lines of new code is two
  lines of the patch, each behind its ``+``, and the patch of a binary file is compressed base85, which
  no redactor can read; the file itself is what would be committed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import structlog

from orchestrator.redaction import Redactor
from workers.worktree import changed_paths

log = structlog.get_logger()

FIX_HOLDS_SECRET = (
    "the fix holds a secret (redacted): it was not kept, verified or committed; left for a human"
)


def fix_holds_secret(patch: bytes, worktree: Path, redactor: Redactor) -> bool:
    """Whether the fix in ``worktree`` (whose whole change is ``patch``) holds a spelling of a secret
    ``redactor`` knows: in the patch or in a changed file (see the module's doc)."""
    if not redactor.secrets:
        return False
    if redactor.holds(patch.decode("utf-8", errors="replace")):
        return True
    return any(c is None or redactor.holds(c) for c in changed_contents(worktree))


def changed_contents(worktree: Path) -> list[str | None]:
    """The content of each regular file the fix added or changed in ``worktree``, None for one that
    could not be read (a deleted file is gone; a symlink is its target's path, which the patch holds)."""
    root = worktree.resolve()
    contents: list[str | None] = []
    for rel in changed_paths(worktree):
        path = root / rel
        try:
            info = path.lstat()
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
