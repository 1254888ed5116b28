"""The sandbox: what a process that runs the reviewed code (or an agent reading it) may see and do.

API CONTRACT (stub: being implemented; callers may already build ``Jail`` values and pass them to
``workers.supervise.run_supervised(..., jail=...)``).

- ``Jail`` describes one confined run: the worktree (writable or read-only), the git directories mounted
  read-only, network on or off, the HOME state directories an agent keeps, the limits, and the variables
  passed by name. The environment inside is an allow-list: PATH, LANG, LC_*, TZ, TERM, a private HOME,
  the jail's ``env`` and the values of ``env_pass`` taken from the worker's environment; never the
  worker's own environment.
- ``sandbox_problem(settings)`` is None when the sandbox works on this machine, else the reason (used
  by ``jury doctor`` and before any job that would need it).
- ``SandboxUnavailable`` is raised by ``require_sandbox`` where a job needs the sandbox and cannot
  have it; the job ends the run ``human`` with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.domain import SandboxSettings
from orchestrator.errors import JuryError


class SandboxUnavailable(JuryError):
    """The sandbox is required (``[sandbox] mode = "bwrap"``) and cannot run here; the reason says why."""


@dataclass(frozen=True)
class Jail:
    """One confined run. ``worktree`` is the only tree it may write (unless ``writable`` is False)."""

    worktree: Path
    settings: SandboxSettings = field(default_factory=SandboxSettings)
    writable: bool = True
    network: bool | None = None  # None: the settings' ``network`` (code runs); agents pass True
    git_dirs: tuple[Path, ...] = ()  # mounted read-only: the worktree's git admin and common dirs
    state_dirs: tuple[str, ...] = ()  # an agent's HOME state dirs, bound read-write ("~/.codex")
    ro_paths: tuple[Path, ...] = ()  # extra host paths visible read-only (beyond the read-only root)
    env: Mapping[str, str] = field(default_factory=dict)  # set inside, after the allow-list
    env_pass: tuple[str, ...] = ()  # names whose values pass from the worker's environment
    limits: bool = True  # memory / processes / file size from ``settings`` (code runs; agents: False)


def sandbox_problem(settings: SandboxSettings) -> str | None:
    """None when runs can be confined as ``settings`` ask (or ``mode`` is none); else why not."""
    raise NotImplementedError


def require_sandbox(settings: SandboxSettings) -> None:
    """Raise ``SandboxUnavailable`` when ``sandbox_problem`` names a problem."""
    problem = sandbox_problem(settings)
    if problem is not None:
        raise SandboxUnavailable(problem)
