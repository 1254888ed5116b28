"""The umasks Jury's processes write with, in a module that imports nothing: ``jury``'s ``main`` sets the
private one on every command without importing the workers (tests/unit/test_cli_startup.py); a worker
sets it at start, and ``workers.isolation.supervise`` gives a jail's processes ``JAIL_UMASK``."""

from __future__ import annotations

import os

PRIVATE_UMASK = 0o077
# A jail's processes write for their group too: an agent's state directory (``~/.codex``) is shared by the
# jails running that agent through ``[sandbox] state_gid`` (workers.isolation.jailuid.share_state), and a file
# one jail makes there must stay reachable by the jail beside it. Others get nothing; and everything a jail
# writes lies in its own worktree, its tmpfs or those state directories, under Jury's 0700 directory.
JAIL_UMASK = 0o007


def write_privately() -> None:
    """Every file this process creates from now on is its owner's alone (0600, directories 0700),
    whoever writes it: prompt files, the agents' stdout and stderr, transcripts. Set when a ``jury``
    command or a worker starts; a jail's processes get ``JAIL_UMASK`` instead (``run_supervised``)."""
    os.umask(PRIVATE_UMASK)
