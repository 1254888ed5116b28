"""The tests' fake forge: ``ForgeServer`` and its state, which ship with Jury as the core of ``jury dev
forge`` (``jury_cli.devforge.server``, routes in ``jury_cli.devforge.github`` and ``.gitlab``). The tests
import them from here, so the fake the tests trust and the one users try sweeps on are the same code."""

from __future__ import annotations

from jury_cli.devforge.server import (
    GITHUB_PREFIX,
    GITLAB_PREFIX,
    FakePR,
    Fault,
    ForgeServer,
    Garble,
    HttpError,
    Recorded,
    Reply,
    Repo,
    User,
    iso,
)

__all__ = [
    "GITHUB_PREFIX",
    "GITLAB_PREFIX",
    "FakePR",
    "Fault",
    "ForgeServer",
    "Garble",
    "HttpError",
    "Recorded",
    "Reply",
    "Repo",
    "User",
    "iso",
]
