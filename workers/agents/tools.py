"""The tools an http agent may call, confined to its worktree.

``call_tool`` is the one entry point: it refuses a tool the role was not offered (a reviewer, reply or
refuter cannot write, whatever the model asks for), an unknown tool and bad arguments, and never raises
for any of that. Every tool is built so the model's arguments cannot bend it:

- paths must stay inside the worktree lexically and after resolving symlinks, never in ``.git``
  (``toolbase.resolve_in``), and are checked before anything is opened;
- git is read through ``git_diff``/``git_log``/``git_show`` only, argument vectors Jury builds from
  validated revisions and paths with every program git could run disarmed (``gittools``);
- ``run_command`` runs a declared ``[checks]`` command chosen by name, exactly as declared, in the
  sandbox (``workers.isolation.sandbox``) — never a command the model wrote;
- ``search_text`` matches in a separate, limited process (``textsearch``), so a pathological pattern
  costs a tool error, not a stalled worker.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog
from pydantic import Field, ValidationError

from orchestrator.domain import Role
from orchestrator.refute.commands import split_command
from orchestrator.spec import SandboxSettings
from workers.agents import textsearch
from workers.agents.gittools import (
    GitDiffArgs,
    GitLogArgs,
    GitShowArgs,
    git_diff,
    git_log,
    git_show,
)
from workers.agents.toolbase import (
    DEFAULT_TOOL_TIMEOUT,
    OUTPUT_CAP,
    Args,
    ToolContext,
    ToolFailed,
    ToolRefusal,
    ToolResult,
    cap,
    is_binary,
    rel_to,
    resolve_in,
    run_process,
    tool_env,
)
from workers.isolation.sandbox import Jail, git_dirs_of

__all__ = [
    "DEFAULT_TOOL_TIMEOUT",
    "OUTPUT_CAP",
    "TOOL_SCHEMAS",
    "ToolContext",
    "ToolFailed",
    "ToolRefusal",
    "ToolResult",
    "call_tool",
    "resolve_in",
    "schemas_for",
    "tool_env",
    "tools_for",
]

log = structlog.get_logger()

SEARCH_SECONDS = 20.0  # a search's own limit (the tool timeout, when shorter, wins)
SEARCH_STARTUP = 2.0  # the search process's start, on top of its limit, before it is killed
SEARCH_MAX_PATTERN = 1000
READ_MAX_BYTES = 5_000_000
WRITE_MAX_BYTES = 2_000_000
LIST_MAX_ENTRIES = 1000
# Set inside the sandbox for a declared check, on top of its allow-listed environment.
CHECK_ENV: dict[str, str] = {"PYTHONDONTWRITEBYTECODE": "1", "GIT_TERMINAL_PROMPT": "0", "PAGER": "cat"}

READ_TOOLS: frozenset[str] = frozenset(
    {"read_file", "list_dir", "search_text", "git_diff", "git_log", "git_show", "run_command"}
)
WRITE_TOOLS: frozenset[str] = frozenset({"write_file", "edit_file"})


# --- arguments ------------------------------------------------------------------------------------


class ReadFileArgs(Args):
    path: str
    start_line: int | None = Field(default=None, ge=1)
    end_line: int | None = Field(default=None, ge=1)


class ListDirArgs(Args):
    path: str = "."


class SearchTextArgs(Args):
    pattern: str = Field(min_length=1)
    path: str = "."


class RunCommandArgs(Args):
    check: str | None = None  # a declared check's name
    command: str | None = None  # or the declared command's exact text


class WriteFileArgs(Args):
    path: str
    content: str


class EditFileArgs(Args):
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
_PATHS = {"type": "array", "items": _PATH, "description": "limit to these paths (relative to the root)"}
_REV = {"type": "string", "description": "a revision: a commit sha, HEAD, HEAD~2, HEAD^, a branch or tag"}
_RANGE = {"type": "string", "description": "a revision or a range of two: HEAD~1, main..HEAD, main...HEAD"}

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
        "Search text files for a regular expression (Python syntax), line by line; prints "
        "path:line: text. A pattern that takes too long is stopped with an error.",
        {"pattern": {"type": "string"}, "path": _PATH},
        ["pattern"],
    ),
    "git_diff": _schema(
        "git_diff",
        "Show git diff for a revision range (default: uncommitted changes against HEAD).",
        {"rev_range": _RANGE, "paths": _PATHS, "stat": {"type": "boolean", "description": "only a diffstat"}},
        [],
    ),
    "git_log": _schema(
        "git_log",
        "Show git log for a revision range (default: HEAD).",
        {
            "rev_range": _RANGE,
            "max_count": {"type": "integer", "minimum": 1, "maximum": 500},
            "paths": _PATHS,
        },
        [],
    ),
    "git_show": _schema(
        "git_show",
        "Show one commit, or one file as it is at a revision (rev and path, or rev as REV:PATH).",
        {"rev": _REV, "path": _PATH},
        ["rev"],
    ),
    "run_command": _schema(
        "run_command",
        "Run one of the repository's declared checks, by name, exactly as declared, in a sandbox; "
        "prints its exit code and output. No other command can run (read git with the git tools).",
        {"check": {"type": "string", "description": "the name of a declared check"}},
        ["check"],
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
    out = []
    for schema in schemas:
        if schema["function"]["name"] == "run_command":
            schema = copy.deepcopy(schema)
            if checks:
                listed = "; ".join(f"{name}: `{command}`" for name, command in checks.items())
                schema["function"]["description"] += f" The declared checks: {listed}."
                schema["function"]["parameters"]["properties"]["check"]["enum"] = list(checks)
            else:
                schema["function"]["description"] += " This repository declares no checks."
        out.append(schema)
    return out


# --- the tools ------------------------------------------------------------------------------------


def read_file(ctx: ToolContext, args: ReadFileArgs) -> str:
    """The numbered lines of a text file (a range of them when asked)."""
    path = resolve_in(ctx.worktree, args.path)
    if not path.is_file():
        raise ToolFailed(f"not a file: {args.path}")
    with path.open("rb") as fh:
        data = fh.read(READ_MAX_BYTES)
    if is_binary(data):
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
    """``path:line: text`` for each line matching the pattern, in text files under ``path`` (capped).

    The search runs in its own process (``textsearch``: why there, and its limits), killed past its
    limit; the worker only waits for it, so its threads keep running whatever the pattern does.
    """
    if len(args.pattern) > SEARCH_MAX_PATTERN:
        raise ToolRefusal(f"pattern too long ({len(args.pattern)} characters; at most {SEARCH_MAX_PATTERN})")
    if "\0" in args.pattern:
        raise ToolRefusal("pattern contains a NUL byte")
    root = ctx.worktree.resolve()
    start = resolve_in(ctx.worktree, args.path)
    if not start.exists():
        raise ToolFailed(f"no such path: {args.path}")
    limit = max(0.5, min(SEARCH_SECONDS, ctx.timeout))
    ran = run_process(
        [sys.executable, "-I", textsearch.__file__, str(root), str(start), args.pattern, f"{limit:.3f}"],
        cwd=Path("/"),
        env=tool_env(ctx.env),
        timeout=limit + SEARCH_STARTUP,
    )
    try:
        result = json.loads(ran.stdout) if ran.code == 0 and not ran.problem else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        raise ToolFailed("pattern took too long; simplify it")  # killed: the limit, CPU or memory
    if "error" in result:
        if result.get("kind") in ("pattern", "path"):
            raise ToolRefusal(str(result["error"]))
        raise ToolFailed(str(result["error"]))
    hits = [str(h) for h in result.get("hits") or []]
    if result.get("more"):
        hits.append("[... more matches not shown; narrow the pattern or the path]")
    return cap("\n".join(hits)) if hits else "(no matches)"


def _declared(ctx: ToolContext, args: RunCommandArgs) -> tuple[str, str]:
    """The declared check ``args`` names — by name, or by its exact command text — as (name, command)."""
    asked = args.check if args.check is not None else args.command
    text = (asked or "").strip()
    for name, command in ctx.checks.items():
        if text and (text == name or text == command.strip()):
            return name, command
    declared = ", ".join(f"{n} (`{c}`)" for n, c in ctx.checks.items()) or "none are declared"
    raise ToolRefusal(
        f"{asked!r} is not a declared check: run_command runs only a declared check, by name, exactly "
        f"as declared ({declared}); read git with git_diff, git_log and git_show"
    )


def run_command(ctx: ToolContext, args: RunCommandArgs) -> str:
    """A declared check, exactly as declared, in the sandbox: its exit code and output.

    The check runs the reviewed code, so it runs jailed: the worktree its only writable tree (checks
    write caches and temporary files there; the worktree is this seat's own), its git directories
    read-only, no network unless the operator allows it, an allow-listed environment without the key.
    """
    if args.check is None and args.command is None:
        raise ToolRefusal("name the declared check to run (check)")
    name, command = _declared(ctx, args)
    split = split_command(command)
    if isinstance(split, str):
        raise ToolFailed(f"declared check {name!r} cannot run: {split}")
    argv, assigns = split
    worktree = ctx.worktree.resolve()
    jail = Jail(
        worktree=worktree,
        settings=ctx.sandbox,
        git_dirs=git_dirs_of(worktree),
        env={**CHECK_ENV, **assigns},
    )
    ran = run_process(argv, cwd=worktree, env=tool_env(ctx.env), timeout=ctx.timeout, jail=jail)
    status = ran.problem or f"exit code {ran.code}"
    output = ran.stdout + (("\n[stderr]\n" + ran.stderr) if ran.stderr.strip() else "")
    text = f"$ {command}\n{status}\n{output}"
    if ran.problem:
        raise ToolFailed(cap(text, keep_tail=True))
    return cap(text, keep_tail=True)


def write_file(ctx: ToolContext, args: WriteFileArgs) -> str:
    """Create or overwrite a file (parents created)."""
    path = resolve_in(ctx.worktree, args.path)
    data = args.content.encode("utf-8")
    if len(data) > WRITE_MAX_BYTES:
        raise ToolRefusal(f"content too large ({len(data)} bytes; limit {WRITE_MAX_BYTES})")
    if path.is_dir():
        raise ToolFailed(f"is a directory: {args.path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return f"wrote {len(data)} bytes to {rel_to(ctx.worktree.resolve(), path)}"


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
    return f"edited {rel_to(ctx.worktree.resolve(), path)}"


_TOOLS: dict[str, tuple[type[Args], Callable[[ToolContext, Any], str]]] = {
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
    from orchestrator import jsonsafe

    if raw is None or raw == "":
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        value = jsonsafe.loads(raw)  # bounded: size and depth (hostile input)
    except (ValueError, RecursionError) as exc:
        raise ToolRefusal(f"arguments are not valid JSON: {type(exc).__name__}") from None
    if not isinstance(value, dict):
        raise ToolRefusal("arguments must be a JSON object")
    return value


def call_tool(
    name: str,
    args: str | Mapping[str, Any] | None,
    *,
    role: Role,
    worktree: Path,
    checks: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    sandbox: SandboxSettings | None = None,
) -> ToolResult:
    """Run tool ``name`` for ``role`` with ``args`` (a JSON string or a mapping); never raises.

    A tool not offered to the role, an unknown tool, bad arguments or a path outside the worktree is
    refused (``refused`` set, nothing run); an allowed call that fails gives ``ok=False``. Declared checks
    run in the sandbox ``sandbox`` describes (default: bubblewrap, no network).
    """
    ctx = ToolContext(
        worktree=worktree,
        role=role,
        checks=dict(checks or {}),
        env=os.environ if env is None else env,
        timeout=timeout,
        sandbox=sandbox or SandboxSettings(),
    )
    try:
        if name not in _TOOLS:
            raise ToolRefusal(f"unknown tool {name!r}")
        if name not in tools_for(role):
            raise ToolRefusal(f"tool {name!r} is not allowed for the {role} role")
        model, func = _TOOLS[name]
        try:
            parsed = model.model_validate(_parse_args(args))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors(include_url=False, include_input=False)
            )
            raise ToolRefusal(f"bad arguments for {name}: {problems}") from None
        text = func(ctx, parsed)
    except ToolRefusal as exc:
        log.info("tool.refused", tool=name, role=role, reason=exc.reason[:300])
        return ToolResult(ok=False, text=f"REFUSED: {exc.reason}", refused=exc.reason)
    except ToolFailed as exc:
        log.info("tool.failed", tool=name, role=role, error=str(exc)[:300])
        return ToolResult(ok=False, text=f"ERROR: {exc}")
    except (OSError, UnicodeError, ValueError) as exc:
        log.warning("tool.error", tool=name, role=role, error=str(exc)[:300])
        return ToolResult(ok=False, text=f"ERROR: {type(exc).__name__}: {exc}")
    log.debug("tool.ran", tool=name, role=role, chars=len(text))
    return ToolResult(ok=True, text=text)
