"""What every http-agent tool shares: the refusal and failure types, the context, path confinement,
output capping and the way a tool starts a process.

A model's arguments are hostile input, and so is the worktree they point into (the code under review
chose its files and symlinks). Paths are therefore checked twice — lexically (no absolute path, no
``..`` out, no ``.git``) and after resolving symlinks (still inside the resolved worktree) — before any
tool opens them, and a tool process gets an environment built from an allow-list, never the worker's.
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from orchestrator.domain import Role
from orchestrator.spec import SandboxSettings
from workers.isolation.sandbox import Jail
from workers.isolation.supervise import run_supervised

OUTPUT_CAP = 20_000
DEFAULT_TOOL_TIMEOUT = 300.0
RUN_MAX_OUTPUT = 2_000_000  # bytes kept per stream of a tool process (head and tail)

# The only variables a tool process inherits from the worker; everything else it needs is set here.
ENV_ALLOWED: frozenset[str] = frozenset({"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TERM"})
ENV_FIXED: dict[str, str] = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "PYTHONDONTWRITEBYTECODE": "1",
}


class ToolRefusal(Exception):
    """A call that is not allowed (outside the worktree, not offered to the role, bad arguments): the
    model is told the reason, and the run records it as a ``tool.refused`` event (``domain.ToolRefused``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ToolFailed(Exception):
    """An allowed call that did not work (no such file, ambiguous edit, git error, a pattern too slow)."""


@dataclass(frozen=True)
class ToolResult:
    """What a call gave back: ``text`` goes to the model; ``refused`` says why it was not run."""

    ok: bool
    text: str
    refused: str | None = None


@dataclass(frozen=True)
class ToolContext:
    """Where and how tools run for one agent run; ``sandbox`` confines the declared checks it runs."""

    worktree: Path
    role: Role
    checks: Mapping[str, str]
    env: Mapping[str, str]
    timeout: float = DEFAULT_TOOL_TIMEOUT
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)


class Args(BaseModel):
    """A tool's arguments: unknown keys are ignored (models add some), known ones are validated."""

    model_config = ConfigDict(extra="ignore")


# --- paths ----------------------------------------------------------------------------------------


def resolve_in(worktree: Path, rel: str) -> Path:
    """``rel`` resolved (symlinks followed) inside the resolved ``worktree``; ToolRefusal otherwise.

    Refused: absolute paths, anything that lands outside the worktree (``..``, a symlink pointing out)
    and anything inside ``.git``.
    """
    if not isinstance(rel, str):
        raise ToolRefusal("path must be a string")
    if "\0" in rel:
        raise ToolRefusal("path contains a NUL byte")
    if os.path.isabs(rel):
        raise ToolRefusal(f"absolute path {rel!r} refused: paths are relative to the worktree")
    root = worktree.resolve()
    try:
        target = (root / (rel or ".")).resolve()
    except (OSError, RuntimeError) as exc:
        raise ToolRefusal(f"cannot resolve {rel!r}: {exc}") from None
    if target != root and not target.is_relative_to(root):
        raise ToolRefusal(f"path {rel!r} resolves outside the worktree")
    if ".git" in target.relative_to(root).parts:
        raise ToolRefusal(f"path {rel!r} is inside .git")
    return target


def worktree_path(worktree: Path, rel: str) -> str:
    """``rel`` as a normalized worktree-relative POSIX path (``.`` for the root), for git to read.

    It must pass ``resolve_in`` (no symlink out) and also stay inside lexically: git reads the path as
    written, so ``a/../b`` is ``b`` and ``../x`` is refused even where a symlink would bring it back.
    """
    resolve_in(worktree, rel)
    norm = posixpath.normpath(rel.replace(os.sep, "/") or ".")
    parts = norm.split("/")
    if norm == ".." or norm.startswith("../") or norm.startswith("/"):
        raise ToolRefusal(f"path {rel!r} leaves the worktree")
    if ".git" in parts:
        raise ToolRefusal(f"path {rel!r} is inside .git")
    return norm


def rel_to(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() or "."


# --- output ---------------------------------------------------------------------------------------


def cap(text: str, limit: int = OUTPUT_CAP, *, keep_tail: bool = False) -> str:
    """``text`` cut to about ``limit`` characters, saying how much was dropped."""
    if len(text) <= limit:
        return text
    dropped = len(text) - limit
    if keep_tail:
        head = limit // 4
        return f"{text[:head]}\n[... {dropped} characters cut ...]\n{text[len(text) - (limit - head) :]}"
    return f"{text[:limit]}\n[... {dropped} more characters cut; narrow the request]"


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


# --- processes ------------------------------------------------------------------------------------


def tool_env(base: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a tool process: ``ENV_ALLOWED`` and ``LC_*`` from ``base``, ``ENV_FIXED``,
    then ``extra``. An allow-list: no key, no broker URL, no ``GIT_DIR`` or ``LD_PRELOAD`` gets through,
    whatever the worker's environment holds."""
    env = {k: v for k, v in base.items() if k in ENV_ALLOWED or k.startswith("LC_")}
    env.update(ENV_FIXED)
    if extra:
        env.update(extra)
    return env


@dataclass(frozen=True)
class Ran:
    """How a tool process ended: its exit code, output, and why it did not finish (None when it did)."""

    code: int | None
    stdout: str
    stderr: str
    problem: str | None


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    jail: Jail | None = None,
    max_output: int = RUN_MAX_OUTPUT,
) -> Ran:
    """Run ``argv`` supervised (own process group, killed at ``timeout``, output capped), in ``jail``
    when given; never raises for the program failing."""
    with tempfile.TemporaryDirectory(prefix="jury-tool-") as tmp:
        out, err = Path(tmp) / "out", Path(tmp) / "err"
        proc = run_supervised(
            argv,
            cwd=cwd,
            env=env,
            stdout_path=out,
            stderr_path=err,
            timeout=timeout,
            grace=2.0,
            tick_every=3600.0,
            max_output=max_output,
            jail=jail,
        )
        stdout = out.read_bytes().decode("utf-8", errors="replace") if out.exists() else ""
        stderr = err.read_bytes().decode("utf-8", errors="replace") if err.exists() else ""
    problem = proc.error or (f"timed out after {timeout:.0f}s" if proc.timed_out else None)
    return Ran(proc.exit_code, stdout, stderr, problem)
