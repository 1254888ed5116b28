"""The git tools of an http agent: ``git_diff``, ``git_log``, ``git_show``, each an argument vector Jury
builds itself from validated fields.

No text from the model ever reaches git as an option. A revision must match ``REV_RE`` (a sha, ``HEAD``,
a branch-like name that cannot start with ``-``, with ``~N``/``^N`` suffixes) and a range is two of
them joined by ``..`` or ``...``; paths go after ``--`` as worktree-relative paths (``worktree_path``:
inside the worktree lexically and after resolving symlinks, never ``.git``) with
``GIT_LITERAL_PATHSPECS=1`` so no pathspec magic applies.

The repository is hostile too: its ``.git/config`` and ``.gitattributes`` can name programs for git to
run (``diff.external``, a ``textconv`` or external diff driver, a ``filter`` whose ``clean`` runs when git
reads the worktree, ``core.fsmonitor``, a lazy fetch through a promisor remote, a gpg program). So every
call carries ``--no-ext-diff --no-textconv``, the overrides in ``GIT_OVERRIDES`` (command-line config,
which beats every file), ``GIT_ALLOW_PROTOCOL=`` (no transport, whatever the config allows), and blanks
every ``filter``/``diff`` driver command the repository's config defines (``_driver_overrides``: git 2.39
cannot ignore ``.gitattributes``, so the drivers are disarmed instead). ``--work-tree`` is given
explicitly so a planted ``core.worktree`` cannot point git elsewhere.

Git itself runs outside the sandbox: it is Jury's own program, reading, with every way it could be told to
run something else closed above; the sandbox is for what executes the reviewed code (``run_command``).
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field

from workers.agents.toolbase import (
    Args,
    ToolContext,
    ToolFailed,
    ToolRefusal,
    cap,
    run_process,
    tool_env,
    worktree_path,
)
from workers.isolation.worktree import pinned_git_dir

GIT_TIMEOUT = 60.0
MAX_PATHS = 50
MAX_REV_CHARS = 200

_NAME = r"[A-Za-z0-9_][A-Za-z0-9_./+-]*"
_SUFFIX = r"(?:[~^][0-9]{0,6})*"
REV_RE = re.compile(rf"{_NAME}{_SUFFIX}")

# Config given on the command line: it wins over the system, global, repository and included files.
GIT_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.attributesFile", "/dev/null"),
    ("diff.external", ""),
    ("diff.orderFile", "/dev/null"),
    ("diff.submodule", "short"),
    ("log.showSignature", "false"),
    ("log.mailmap", "false"),
    ("mailmap.file", "/dev/null"),
    ("gpg.program", "/nonexistent/jury-no-gpg"),
    ("gpg.openpgp.program", "/nonexistent/jury-no-gpg"),
    ("gpg.ssh.program", "/nonexistent/jury-no-gpg"),
    ("gpg.x509.program", "/nonexistent/jury-no-gpg"),
    ("core.sshCommand", "/nonexistent/jury-no-ssh"),
    ("color.ui", "false"),
)
# Driver keys whose value git runs as a command; every one the repository defines is blanked.
_DRIVER_COMMANDS = {"filter": ("clean", "smudge", "process"), "diff": ("textconv", "command")}
# Options common to the three commands: no program from config or attributes, no submodule git runs.
_NO_PROGRAMS = ("--no-ext-diff", "--no-textconv", "--no-color", "--ignore-submodules=all")


# --- validation -----------------------------------------------------------------------------------


def revision(value: str, what: str = "revision") -> str:
    """``value`` when it is one plain revision (see ``REV_RE``); ToolRefusal otherwise."""
    if not isinstance(value, str) or not value:
        raise ToolRefusal(f"{what} is empty")
    if value.startswith("-"):
        raise ToolRefusal(f"{what} {value!r} refused: it starts with '-' (options are not accepted)")
    bad = (
        len(value) > MAX_REV_CHARS
        or not REV_RE.fullmatch(value)
        or ".." in value
        or "//" in value
        or "/." in value
        or value.endswith((".", "/", ".lock"))
    )
    if bad:
        raise ToolRefusal(
            f"{what} {value!r} refused: use a commit sha, HEAD, HEAD~N, HEAD^ or a branch or tag name"
        )
    return value


def revision_range(value: str, what: str = "rev_range") -> str:
    """One revision, or ``A..B`` / ``A...B`` of two (an empty side is HEAD); ToolRefusal otherwise."""
    if not isinstance(value, str):
        raise ToolRefusal(f"{what} must be a string")
    for sep in ("...", ".."):
        if sep in value:
            left, right = value.split(sep, 1)
            if not left and not right:
                raise ToolRefusal(f"{what} {value!r} refused: name at least one side of the range")
            return f"{revision(left or 'HEAD', what)}{sep}{revision(right or 'HEAD', what)}"
    return revision(value, what)


def _paths(ctx: ToolContext, paths: list[str]) -> list[str]:
    if len(paths) > MAX_PATHS:
        raise ToolRefusal(f"too many paths ({len(paths)}; at most {MAX_PATHS})")
    return [worktree_path(ctx.worktree, p) for p in paths]


class GitDiffArgs(Args):
    rev_range: str | None = None
    paths: list[str] = Field(default_factory=list)
    stat: bool = False


class GitLogArgs(Args):
    rev_range: str | None = None
    max_count: int = Field(default=20, ge=1, le=500)
    paths: list[str] = Field(default_factory=list)


class GitShowArgs(Args):
    rev: str
    path: str | None = None


# --- running git ----------------------------------------------------------------------------------


def _base_argv(root: Path) -> list[str]:
    # A checkout Jury made has its git directory pinned (workers.isolation.worktree): whatever ran in it since
    # cannot point git at a repository, and a config, of its own.
    admin = pinned_git_dir(root)
    argv = ["git", "--no-pager", *([f"--git-dir={admin}"] if admin else []), f"--work-tree={root}"]
    for key, value in GIT_OVERRIDES:
        argv += ["-c", f"{key}={value}"]
    return argv


def _git_env(ctx: ToolContext, overrides: list[tuple[str, str]]) -> dict[str, str]:
    extra = {
        "GIT_LITERAL_PATHSPECS": "1",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        # No transport at all, whatever ``protocol.<name>.allow`` the repository sets: a partial clone
        # would otherwise fetch a missing object lazily from its promisor remote (``ext::`` runs a program).
        "GIT_ALLOW_PROTOCOL": "",
        "GIT_CONFIG_COUNT": str(len(overrides)),
    }
    for i, (key, value) in enumerate(overrides):
        extra[f"GIT_CONFIG_KEY_{i}"] = key
        extra[f"GIT_CONFIG_VALUE_{i}"] = value
    return tool_env(ctx.env, extra)


def _driver_overrides(ctx: ToolContext, root: Path) -> list[tuple[str, str]]:
    """A blank value for every ``filter.<name>.*`` / ``diff.<name>.*`` command the config defines.

    Read with ``git config --list`` (includes followed), which runs no program. Passed through
    ``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` so a driver name with odd characters cannot bend the
    ``-c key=value`` parsing.
    """
    ran = run_process(
        [*_base_argv(root), "config", "--null", "--list"],
        cwd=root,
        env=_git_env(ctx, []),
        timeout=min(GIT_TIMEOUT, ctx.timeout),
    )
    if ran.problem or ran.code != 0:
        raise ToolFailed(f"git config: {ran.problem or ran.stderr.strip()[-500:]}")
    names: set[tuple[str, str]] = set()
    for entry in ran.stdout.split("\0"):
        key = entry.split("\n", 1)[0]
        section, _, rest = key.partition(".")
        subsection, _, _var = rest.rpartition(".")
        if section.lower() in _DRIVER_COMMANDS and subsection:
            names.add((section.lower(), subsection))
    overrides = []
    for section, name in sorted(names):
        overrides += [(f"{section}.{name}.{var}", "") for var in _DRIVER_COMMANDS[section]]
        if section == "filter":
            overrides.append((f"filter.{name}.required", "false"))
    return overrides


def run_git(ctx: ToolContext, args: list[str]) -> str:
    """``git <args>`` in the worktree with every program git could be told to run disarmed."""
    root = ctx.worktree.resolve()
    env = _git_env(ctx, _driver_overrides(ctx, root))
    ran = run_process([*_base_argv(root), *args], cwd=root, env=env, timeout=min(GIT_TIMEOUT, ctx.timeout))
    if ran.problem:
        raise ToolFailed(f"git {args[0]}: {ran.problem}")
    if ran.code != 0:
        raise ToolFailed(f"git {args[0]} exited {ran.code}: {ran.stderr.strip()[-2000:]}")
    return cap(ran.stdout) if ran.stdout else "(no output)"


# --- the tools ------------------------------------------------------------------------------------


def git_diff(ctx: ToolContext, args: GitDiffArgs) -> str:
    """``git diff`` of a revision range, or of uncommitted changes against HEAD; optionally some paths."""
    rev = revision_range(args.rev_range) if args.rev_range is not None else "HEAD"
    paths = _paths(ctx, args.paths)
    stat = ["--stat"] if args.stat else []
    return run_git(ctx, ["diff", *_NO_PROGRAMS, *stat, "--end-of-options", rev, "--", *paths])


def git_log(ctx: ToolContext, args: GitLogArgs) -> str:
    """``git log`` of a revision range (default HEAD); optionally only commits touching some paths."""
    rev = revision_range(args.rev_range) if args.rev_range is not None else "HEAD"
    paths = _paths(ctx, args.paths)
    count = f"--max-count={args.max_count}"
    return run_git(
        ctx, ["log", *_NO_PROGRAMS, "--no-show-signature", count, "--end-of-options", rev, "--", *paths]
    )


def git_show(ctx: ToolContext, args: GitShowArgs) -> str:
    """``git show`` of one commit, or of one file at a revision (``path``, or ``rev:path``)."""
    rev_text, path = args.rev, args.path
    if ":" in rev_text:
        if path is not None:
            raise ToolRefusal("give the file either as rev:path or as path, not both")
        rev_text, path = rev_text.split(":", 1)
    rev = revision(rev_text, "rev")
    if path is not None:
        if not path:
            raise ToolRefusal("path is empty: name a file (rev:path)")
        rel = worktree_path(ctx.worktree, path)
        if rel == ".":
            raise ToolRefusal("name a file of the revision, not the root")
        obj = f"{rev}:{rel}"
    else:
        obj = rev
    return run_git(ctx, ["show", *_NO_PROGRAMS, "--no-show-signature", "--end-of-options", obj])
