"""The tools an http agent may call, confined to its worktree.

``dispatch`` is the one entry point: it refuses a tool the role was not offered (a reviewer, reply or
refuter cannot write, whatever the model asks for), an unknown tool and bad arguments, and never raises
for any of that. Paths resolve symlinks and must stay inside the resolved worktree (``.git`` excluded);
git runs read-only with hooks off; ``run_command`` runs only a declared check or a read-only git command,
supervised, with a timeout and a scrubbed environment.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workers.supervise import run_supervised, scrub_env

log = structlog.get_logger()

ToolRole = Literal["reviewer", "judge", "reply", "refuter"]

OUTPUT_CAP = 20_000
SEARCH_MAX_RESULTS = 200
SEARCH_MAX_FILE_BYTES = 2_000_000
SEARCH_SECONDS = 20.0
WRITE_MAX_BYTES = 2_000_000
LIST_MAX_ENTRIES = 1000
DEFAULT_TOOL_TIMEOUT = 300.0
GIT_TIMEOUT = 60.0
RUN_MAX_OUTPUT = 2_000_000  # bytes kept per stream of a tool process (head and tail)

READ_TOOLS: frozenset[str] = frozenset(
    {"read_file", "list_dir", "search_text", "git_diff", "git_log", "git_show", "run_command"}
)
WRITE_TOOLS: frozenset[str] = frozenset({"write_file", "edit_file"})
READONLY_GIT: frozenset[str] = frozenset(
    {"diff", "log", "show", "status", "blame", "grep", "ls-files", "rev-parse"}
)
# Options that write files, read files outside the repository or run other programs.
_GIT_DENIED_PREFIXES: tuple[str, ...] = (
    "--output",
    "--no-index",
    "--ext-diff",
    "--textconv",
    "--open-files-in-pager",
    "--contents",
    "--exec",
    "--upload-pack",
)
_GIT_SAFE = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.pager=cat"]
_GIT_LOCATION_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")


class ToolRefused(Exception):
    """A call that is not allowed (outside the worktree, not offered to the role, bad arguments)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ToolFailed(Exception):
    """An allowed call that did not work (no such file, ambiguous edit, git error)."""


@dataclass(frozen=True)
class ToolResult:
    """What a call gave back: ``text`` goes to the model; ``refused`` says why it was not run."""

    ok: bool
    text: str
    refused: str | None = None


@dataclass(frozen=True)
class ToolContext:
    """Where and how tools run for one agent run."""

    worktree: Path
    role: ToolRole
    checks: Mapping[str, str]
    env: Mapping[str, str]
    timeout: float = DEFAULT_TOOL_TIMEOUT


# --- paths ----------------------------------------------------------------------------------------


def resolve_in(worktree: Path, rel: str) -> Path:
    """``rel`` resolved (symlinks followed) inside the resolved ``worktree``; ToolRefused otherwise.

    Refused: absolute paths, anything that lands outside the worktree (``..``, a symlink pointing out)
    and anything inside ``.git``.
    """
    if not isinstance(rel, str):
        raise ToolRefused("path must be a string")
    if "\0" in rel:
        raise ToolRefused("path contains a NUL byte")
    if os.path.isabs(rel):
        raise ToolRefused(f"absolute path {rel!r} refused: paths are relative to the worktree")
    root = worktree.resolve()
    try:
        target = (root / (rel or ".")).resolve()
    except (OSError, RuntimeError) as exc:
        raise ToolRefused(f"cannot resolve {rel!r}: {exc}") from None
    if target != root and not target.is_relative_to(root):
        raise ToolRefused(f"path {rel!r} resolves outside the worktree")
    if ".git" in target.relative_to(root).parts:
        raise ToolRefused(f"path {rel!r} is inside .git")
    return target


def _rel(root: Path, path: Path) -> str:
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


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


# --- arguments ------------------------------------------------------------------------------------


class _Args(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ReadFileArgs(_Args):
    path: str
    start_line: int | None = Field(default=None, ge=1)
    end_line: int | None = Field(default=None, ge=1)


class ListDirArgs(_Args):
    path: str = "."


class SearchTextArgs(_Args):
    pattern: str = Field(min_length=1)
    path: str = "."


class GitDiffArgs(_Args):
    rev_range: str | None = None


class GitLogArgs(_Args):
    rev_range: str | None = None
    max_count: int = Field(default=20, ge=1, le=500)


class GitShowArgs(_Args):
    rev: str


class RunCommandArgs(_Args):
    command: str = Field(min_length=1)


class WriteFileArgs(_Args):
    path: str
    content: str


class EditFileArgs(_Args):
    path: str
    old: str = Field(min_length=1)
    new: str


def _schema(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


_PATH = {"type": "string", "description": "path relative to the repository root"}
_REV = {"type": "string", "description": "a revision or range such as HEAD~1 or main...HEAD"}

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "read_file": _schema(
        "read_file",
        "Read a text file of the repository; lines come numbered (number, tab, text).",
        {
            "path": _PATH,
            "start_line": {"type": "integer", "minimum": 1, "description": "first line (1-based)"},
            "end_line": {"type": "integer", "minimum": 1, "description": "last line (inclusive)"},
        },
        ["path"],
    ),
    "list_dir": _schema(
        "list_dir", "List a directory of the repository (directories end with /).", {"path": _PATH}, []
    ),
    "search_text": _schema(
        "search_text",
        "Search text files for a Python regular expression; prints path:line: text.",
        {"pattern": {"type": "string"}, "path": _PATH},
        ["pattern"],
    ),
    "git_diff": _schema(
        "git_diff",
        "Show git diff for a revision range (default: uncommitted changes against HEAD).",
        {"rev_range": _REV},
        [],
    ),
    "git_log": _schema(
        "git_log",
        "Show git log for a revision range (default: HEAD).",
        {"rev_range": _REV, "max_count": {"type": "integer", "minimum": 1, "maximum": 500}},
        [],
    ),
    "git_show": _schema("git_show", "Show one git object (a commit, or rev:path).", {"rev": _REV}, ["rev"]),
    "run_command": _schema(
        "run_command",
        "Run one of the repository's declared check commands exactly as declared, or a read-only git "
        "command (git diff/log/show/status/blame/grep/ls-files/rev-parse). No shell.",
        {"command": {"type": "string"}},
        ["command"],
    ),
    "write_file": _schema(
        "write_file",
        "Create or overwrite a file with the given content.",
        {"path": _PATH, "content": {"type": "string"}},
        ["path", "content"],
    ),
    "edit_file": _schema(
        "edit_file",
        "Replace the text `old` (which must occur exactly once in the file) with `new`.",
        {"path": _PATH, "old": {"type": "string"}, "new": {"type": "string"}},
        ["path", "old", "new"],
    ),
}


def tools_for(role: str) -> set[str]:
    """The tools offered to ``role``: reads and ``run_command`` for all; the judge may also write."""
    if role == "judge":
        return set(READ_TOOLS | WRITE_TOOLS)
    if role in ("reviewer", "reply", "refuter"):
        return set(READ_TOOLS)
    return set()


def schemas_for(role: str, checks: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The OpenAI tool schemas of ``tools_for(role)``, in a stable order; ``run_command`` names the
    declared checks it accepts, so a model learns them before it is refused."""
    allowed = tools_for(role)
    schemas = [schema for name, schema in TOOL_SCHEMAS.items() if name in allowed]
    if not checks:
        return schemas
    listed = "; ".join(f"{name}: `{command}`" for name, command in checks.items())
    out = []
    for schema in schemas:
        if schema["function"]["name"] == "run_command":
            schema = copy.deepcopy(schema)
            schema["function"]["description"] += f" The declared checks: {listed}."
        out.append(schema)
    return out


# --- processes ------------------------------------------------------------------------------------


def tool_env(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` scrubbed for a tool process: no secrets, no git location overrides, no pagers."""
    env = scrub_env(base)
    for name in _GIT_LOCATION_VARS:
        env.pop(name, None)
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_PAGER": "cat",
            "PAGER": "cat",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return env


def _run(argv: list[str], ctx: ToolContext, timeout: float) -> tuple[int | None, str, str, str | None]:
    """Run ``argv`` in the worktree, supervised; (exit code, stdout, stderr, why it did not finish)."""
    with tempfile.TemporaryDirectory(prefix="jury-tool-") as tmp:
        out, err = Path(tmp) / "out", Path(tmp) / "err"
        proc = run_supervised(
            argv,
            cwd=ctx.worktree,
            env=tool_env(ctx.env),
            stdout_path=out,
            stderr_path=err,
            timeout=timeout,
            grace=2.0,
            tick_every=3600.0,
            max_output=RUN_MAX_OUTPUT,
        )
        stdout = out.read_bytes().decode("utf-8", errors="replace") if out.exists() else ""
        stderr = err.read_bytes().decode("utf-8", errors="replace") if err.exists() else ""
    problem = proc.error or (f"timed out after {timeout:.0f}s" if proc.timed_out else None)
    return proc.exit_code, stdout, stderr, problem


def _git(args: list[str], ctx: ToolContext) -> str:
    code, stdout, stderr, problem = _run([*_GIT_SAFE, *args], ctx, min(GIT_TIMEOUT, ctx.timeout))
    if problem:
        raise ToolFailed(f"git {args[0]}: {problem}")
    if code != 0:
        raise ToolFailed(f"git {args[0]} exited {code}: {stderr.strip()[-2000:]}")
    return cap(stdout) if stdout else "(no output)"


def _rev(value: str, what: str) -> str:
    text = value.strip()
    if not text:
        raise ToolRefused(f"{what} is empty")
    if text.startswith("-"):
        raise ToolRefused(f"{what} {value!r} refused: it starts with '-' (options are not accepted)")
    if any(ch.isspace() or ch == "\0" for ch in text) or len(text) > 300:
        raise ToolRefused(f"{what} {value!r} refused: one revision or range, no spaces")
    return text


def _readonly_git(words: list[str]) -> None:
    """Refuse a git command line that is not a plain read-only subcommand with harmless options."""
    if len(words) < 2 or words[1] not in READONLY_GIT:
        allowed = ", ".join(sorted(READONLY_GIT))
        raise ToolRefused(f"only read-only git subcommands are allowed, right after 'git': {allowed}")
    for arg in words[2:]:
        if arg == "--":
            break
        if arg.startswith("--"):
            if arg.startswith(_GIT_DENIED_PREFIXES):
                raise ToolRefused(f"git option {arg!r} refused: it writes, runs programs or leaves the repo")
        elif arg.startswith("-") and len(arg) > 1 and ("o" in arg[1:] or "O" in arg[1:]):
            raise ToolRefused(f"git option {arg!r} refused: -o/-O write output or open programs")


# --- the tools ------------------------------------------------------------------------------------


def read_file(ctx: ToolContext, args: ReadFileArgs) -> str:
    """The numbered lines of a text file (a range of them when asked)."""
    path = resolve_in(ctx.worktree, args.path)
    if not path.is_file():
        raise ToolFailed(f"not a file: {args.path}")
    data = path.read_bytes()
    if _is_binary(data):
        raise ToolFailed(f"binary file: {args.path}")
    lines = data.decode("utf-8", errors="replace").splitlines()
    start = args.start_line or 1
    end = min(args.end_line or len(lines), len(lines))
    if start > max(len(lines), 1):
        raise ToolFailed(f"{args.path} has {len(lines)} lines; start_line {start} is past the end")
    body = "\n".join(f"{n}\t{lines[n - 1]}" for n in range(start, end + 1))
    return cap(body) if body else "(empty file)"


def list_dir(ctx: ToolContext, args: ListDirArgs) -> str:
    """The entries of a directory, sorted, directories marked with ``/``."""
    path = resolve_in(ctx.worktree, args.path)
    if not path.is_dir():
        raise ToolFailed(f"not a directory: {args.path}")
    entries = []
    for child in sorted(path.iterdir(), key=lambda p: p.name):
        if child.name == ".git":
            continue
        entries.append(child.name + ("/" if child.is_dir() else ""))
    if len(entries) > LIST_MAX_ENTRIES:
        entries = [*entries[:LIST_MAX_ENTRIES], f"[... {len(entries) - LIST_MAX_ENTRIES} more]"]
    return cap("\n".join(entries)) if entries else "(empty directory)"


def search_text(ctx: ToolContext, args: SearchTextArgs) -> str:
    """``path:line: text`` for each line matching the regex, in text files under ``path`` (capped)."""
    try:
        regex = re.compile(args.pattern)
    except re.error as exc:
        raise ToolRefused(f"bad regular expression: {exc}") from None
    root = ctx.worktree.resolve()
    start = resolve_in(ctx.worktree, args.path)
    if start.is_file():
        files = [start]
    elif start.is_dir():
        files = []
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames[:] = sorted(d for d in dirnames if d != ".git")
            files.extend(Path(dirpath) / f for f in sorted(filenames))
    else:
        raise ToolFailed(f"no such path: {args.path}")
    hits: list[str] = []
    deadline = time.monotonic() + SEARCH_SECONDS
    for file in files:
        if len(hits) >= SEARCH_MAX_RESULTS or time.monotonic() > deadline:
            hits.append("[... more matches not shown; narrow the pattern or the path]")
            break
        try:
            real = file.resolve()
            if not real.is_relative_to(root) or ".git" in real.relative_to(root).parts:
                continue  # a symlink pointing out of the worktree (or into .git) is not followed
            if not real.is_file():
                continue
            if real.stat().st_size > SEARCH_MAX_FILE_BYTES:
                continue
            data = real.read_bytes()
        except (OSError, RuntimeError, ValueError):
            continue
        if _is_binary(data):
            continue
        for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                hits.append(f"{_rel(root, file)}:{n}: {line[:300]}")
                if len(hits) >= SEARCH_MAX_RESULTS:
                    break
    return cap("\n".join(hits)) if hits else "(no matches)"


def git_diff(ctx: ToolContext, args: GitDiffArgs) -> str:
    """``git diff`` of a revision range, or of uncommitted changes against HEAD."""
    rev = _rev(args.rev_range, "rev_range") if args.rev_range is not None else "HEAD"
    return _git(["diff", "--no-color", "--no-ext-diff", "--no-textconv", "--end-of-options", rev, "--"], ctx)


def git_log(ctx: ToolContext, args: GitLogArgs) -> str:
    """``git log`` of a revision range (default HEAD)."""
    rev = _rev(args.rev_range, "rev_range") if args.rev_range is not None else "HEAD"
    return _git(["log", "--no-color", f"--max-count={args.max_count}", "--end-of-options", rev, "--"], ctx)


def git_show(ctx: ToolContext, args: GitShowArgs) -> str:
    """``git show`` of one revision (or ``rev:path``)."""
    rev = _rev(args.rev, "rev")
    return _git(["show", "--no-color", "--no-ext-diff", "--no-textconv", "--end-of-options", rev], ctx)


def run_command(ctx: ToolContext, args: RunCommandArgs) -> str:
    """A declared check (exactly as declared) or a read-only git command; exit code and output."""
    try:
        words = shlex.split(args.command)
    except ValueError as exc:
        raise ToolRefused(f"cannot split the command: {exc}") from None
    if not words:
        raise ToolRefused("empty command")
    declared = {name: shlex.split(cmd) for name, cmd in ctx.checks.items()}
    if words in declared.values():
        argv, timeout = words, ctx.timeout
    elif words[0] == "git":
        _readonly_git(words)
        argv, timeout = [*_GIT_SAFE, *words[1:]], min(GIT_TIMEOUT, ctx.timeout)
    else:
        checks = "; ".join(f"{n}: {c}" for n, c in ctx.checks.items()) or "none declared"
        raise ToolRefused(
            f"command not allowed: only a declared check ({checks}) or a read-only git command may run"
        )
    code, stdout, stderr, problem = _run(argv, ctx, timeout)
    status = problem or f"exit code {code}"
    output = stdout + (("\n[stderr]\n" + stderr) if stderr.strip() else "")
    text = f"$ {shlex.join(words)}\n{status}\n{output}"
    if problem:
        raise ToolFailed(cap(text, keep_tail=True))
    return cap(text, keep_tail=True)


def write_file(ctx: ToolContext, args: WriteFileArgs) -> str:
    """Create or overwrite a file (parents created)."""
    path = resolve_in(ctx.worktree, args.path)
    data = args.content.encode("utf-8")
    if len(data) > WRITE_MAX_BYTES:
        raise ToolRefused(f"content too large ({len(data)} bytes; limit {WRITE_MAX_BYTES})")
    if path.is_dir():
        raise ToolFailed(f"is a directory: {args.path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return f"wrote {len(data)} bytes to {_rel(ctx.worktree.resolve(), path)}"


def edit_file(ctx: ToolContext, args: EditFileArgs) -> str:
    """Replace ``old`` with ``new``; ``old`` must occur exactly once."""
    path = resolve_in(ctx.worktree, args.path)
    if not path.is_file():
        raise ToolFailed(f"not a file: {args.path}")
    text = path.read_bytes().decode("utf-8", errors="surrogateescape")
    count = text.count(args.old)
    if count == 0:
        raise ToolFailed(f"old text not found in {args.path}")
    if count > 1:
        raise ToolFailed(f"old text occurs {count} times in {args.path}; include more context")
    path.write_bytes(text.replace(args.old, args.new, 1).encode("utf-8", errors="surrogateescape"))
    return f"edited {_rel(ctx.worktree.resolve(), path)}"


_TOOLS: dict[str, tuple[type[_Args], Callable[[ToolContext, Any], str]]] = {
    "read_file": (ReadFileArgs, read_file),
    "list_dir": (ListDirArgs, list_dir),
    "search_text": (SearchTextArgs, search_text),
    "git_diff": (GitDiffArgs, git_diff),
    "git_log": (GitLogArgs, git_log),
    "git_show": (GitShowArgs, git_show),
    "run_command": (RunCommandArgs, run_command),
    "write_file": (WriteFileArgs, write_file),
    "edit_file": (EditFileArgs, edit_file),
}


def _parse_args(raw: str | Mapping[str, Any] | None) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ToolRefused(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ToolRefused("arguments must be a JSON object")
    return value


def dispatch(
    name: str,
    args: str | Mapping[str, Any] | None,
    *,
    role: ToolRole,
    worktree: Path,
    checks: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
) -> ToolResult:
    """Run tool ``name`` for ``role`` with ``args`` (a JSON string or a mapping); never raises.

    A tool not offered to the role, an unknown tool, bad arguments or a path outside the worktree is
    refused (``refused`` set, nothing run); an allowed call that fails gives ``ok=False``.
    """
    ctx = ToolContext(
        worktree=worktree,
        role=role,
        checks=dict(checks or {}),
        env=os.environ if env is None else env,
        timeout=timeout,
    )
    try:
        if name not in _TOOLS:
            raise ToolRefused(f"unknown tool {name!r}")
        if name not in tools_for(role):
            raise ToolRefused(f"tool {name!r} is not allowed for the {role} role")
        model, func = _TOOLS[name]
        try:
            parsed = model.model_validate(_parse_args(args))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors(include_url=False, include_input=False)
            )
            raise ToolRefused(f"bad arguments for {name}: {problems}") from None
        text = func(ctx, parsed)
    except ToolRefused as exc:
        log.info("tool.refused", tool=name, role=role, reason=exc.reason)
        return ToolResult(ok=False, text=f"REFUSED: {exc.reason}", refused=exc.reason)
    except ToolFailed as exc:
        log.info("tool.failed", tool=name, role=role, error=str(exc)[:300])
        return ToolResult(ok=False, text=f"ERROR: {exc}")
    except (OSError, UnicodeError, ValueError) as exc:
        log.warning("tool.error", tool=name, role=role, error=str(exc)[:300])
        return ToolResult(ok=False, text=f"ERROR: {type(exc).__name__}: {exc}")
    log.debug("tool.ran", tool=name, role=role, chars=len(text))
    return ToolResult(ok=True, text=text)
