"""Jury's exceptions.

JuryError                 a user-facing failure; its message names what to fix
├── ConfigError           a bad setting, jury.toml or agent entry (exit 2)
├── UsageError            bad command-line input (exit 2)
├── TargetError           the repository, branch or PR cannot be resolved (exit 2)
├── StoreError            the event store cannot be read or written
│   ├── BadName           a run slug or artifact name that is not one (exit 2: the input is wrong)
│   └── StoreUnreachable  the Redis of JURY_REDIS_URL does not answer (exit 2: the setting is wrong)
└── GitError              a git command failed (carries its stderr)
"""

from __future__ import annotations


class JuryError(Exception):
    """Jury could not do what was asked."""

    exit_code = 1


class ConfigError(JuryError):
    """The configuration is invalid."""

    exit_code = 2


class UsageError(JuryError):
    """The command line is invalid."""

    exit_code = 2


class TargetError(JuryError):
    """The review target cannot be resolved."""

    exit_code = 2


class StoreError(JuryError):
    """The event store failed."""


class BadName(StoreError):
    """A run slug or an artifact name that the store refuses to look up: what was typed is wrong."""

    exit_code = 2


class StoreUnreachable(StoreError):
    """The shared Redis does not answer at all: the setting that names it (or the server) is what to fix,
    a configuration error as any other."""

    exit_code = 2


class GitError(JuryError):
    """A git command failed."""

    def __init__(self, args: list[str], code: int, stderr: str) -> None:
        self.git_args = args
        self.code = code
        self.stderr = stderr
        super().__init__(f"git {' '.join(args)} exited {code}: {stderr.strip()[-500:]}")
