"""Mechanical verification of a fix: real commands on real trees, no model call (DESIGN "Verification").

``verify_fix`` runs the judge's test command on the fixed tree (it must pass) and on the tree with the fix
reverted but the tests kept (it must fail), and checks that the patch does not weaken existing tests.
``run_checks`` runs declared checks (test, lint ...) on one tree. Commands are split with shlex and run as
argv under ``run_supervised`` in the sandbox (``workers.sandbox``: the worktree the only writable tree, no
network, an allow-listed environment, output capped); never a shell.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import structlog
from pydantic import BaseModel

from orchestrator.domain import SandboxSettings
from orchestrator.errors import GitError
from orchestrator.refute import Signal, SignalKind, SignalSource, classify_command
from workers.sandbox import Jail, git_dirs_of
from workers.supervise import run_supervised
from workers.worktree import Worktrees, commit_deterministic, git, git_bytes

log = structlog.get_logger()

__all__ = [
    "OUTPUT_TAIL",
    "CommandOutcome",
    "CommandRun",
    "Verification",
    "is_test_path",
    "run_checks",
    "run_command",
    "signals_of",
    "split_command",
    "verify_fix",
    "weakening",
]

OUTPUT_TAIL = 4000  # characters of output kept per run
RUN_MAX_OUTPUT = 2_000_000  # bytes kept per stream of a command's output file (head and tail)
_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}  # paths from the patch are paths, not globs
_SHELL_TOKENS = frozenset({"&&", "||", ";", "|", "&", ">", ">>", "<", "<<", "2>", "2>&1", "&>", "|&"})
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

Tree = Literal["fixed", "reverted", "final"]


class CommandRun(BaseModel):
    """One command run on one tree. ``sha``: the commit for "final", the git tree id for fixed/reverted.

    ``exit_code`` is None when the command could not be started (``error`` says why).
    """

    command: str
    tree: Tree
    sha: str | None
    exit_code: int | None
    seconds: float
    output_tail: str
    timed_out: bool = False
    error: str | None = None
    check: str | None = None  # the declared check's name (run_checks)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None


class Verification(BaseModel):
    """The verdict of mechanical verification: ``ok`` only when the test fails without the fix, passes
    with it, and no existing test is weakened; ``reason`` says why not."""

    runs: list[CommandRun]
    weakening: list[str]
    ok: bool
    reason: str | None


@dataclass(frozen=True)
class CommandOutcome:
    """How a command ended: ``exit_code`` None with ``error`` when it could not be split or started."""

    exit_code: int | None
    seconds: float
    output_tail: str
    timed_out: bool
    error: str | None


# --- test paths and weakening -----------------------------------------------------------------------

_TEST_DIRS = frozenset({"tests", "test", "__tests__", "spec", "specs"})
_TEST_NAME_RE = re.compile(
    r"^(?:test_.*\.py|.*_test\.py|conftest\.py|.*_test\.go|.*\.(?:test|spec)\.(?:js|ts|jsx|tsx|mjs|cjs|mts|cts)"
    r"|.*_spec\.rb|.*Tests?\.(?:java|kt|scala|cs)|.*Spec\.(?:java|kt|scala|groovy)|.*Test\.php|test_.*\.rs)$"
)


def is_test_path(path: str) -> bool:
    """Whether ``path`` (repo-relative, ``/``-separated) is a test file: under a tests/test/__tests__/spec
    directory, or named like one (``test_*.py``, ``*_test.go``, ``*.spec.ts``, ``FooTest.java`` ...)."""
    parts = path.replace("\\", "/").strip("/").split("/")
    if any(p.lower() in _TEST_DIRS for p in parts[:-1]):
        return True
    return bool(_TEST_NAME_RE.match(parts[-1]))


_ASSERTION_RE = re.compile(
    r"\bassert|\bexpect\s*\(|\bshould\b|\.should|\bt\.(?:Error|Fatal|Fail)|\brequire\.|"
    r"\b(?:CHECK|REQUIRE|EXPECT|ASSERT|STATIC_ASSERT)(?:_\w+)?\s*\(|pytest\.raises|\bverify\s*\(",
    re.IGNORECASE,
)
_TEST_DEF_RE = re.compile(
    r"^\s*(?:async\s+)?def\s+test\w*|^\s*class\s+Test\w*|^\s*func\s+Test\w*|^\s*(?:pub\s+)?fn\s+test_\w*|"
    r"^\s*(?:it|test|describe)(?:\.\w+)?\s*\(|@Test\b|#\[test\]|^\s*(?:public\s+)?void\s+test\w*\s*\("
)
_COMMENT_RE = re.compile(r"^\s*(?:#(?!\[)|//|/\*|\*|--|<!--)")


def _norm(line: str) -> str:
    return " ".join(line.split())


@dataclass
class _FileDiff:
    removed: list[tuple[int, str]]  # (line number at parent, text)
    added: set[str]  # whitespace-normalized


_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


def _file_diff(repo: Path, parent: str, new: str, old_path: str, new_path: str) -> _FileDiff:
    raw = git(
        [
            "diff",
            "-U0",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "-M",
            parent,
            new,
            "--",
            old_path,
            new_path,
        ],
        repo,
        env=_LITERAL,
    )
    out = _FileDiff(removed=[], added=set())
    old_line = 0
    in_hunks = False
    for line in raw.splitlines():
        m = _HUNK_RE.match(line)
        if m:
            old_line, in_hunks = int(m[1]), True
            continue
        if not in_hunks:
            continue
        if line.startswith("-"):
            out.removed.append((old_line, line[1:]))
            old_line += 1
        elif line.startswith("+"):
            out.added.add(_norm(line[1:]))
    return out


def _name_status(repo: Path, a: str, b: str, *, renames: bool) -> list[tuple[str, str, str]]:
    """(status letter, old path, new path) of each file changed between trees/commits ``a`` and ``b``."""
    raw = git_bytes(["diff", "--name-status", "-z", "-M" if renames else "--no-renames", a, b], repo).decode(
        "utf-8", errors="surrogateescape"
    )
    fields = raw.split("\0")
    out: list[tuple[str, str, str]] = []
    i = 0
    while i < len(fields) and fields[i]:
        status = fields[i][0]
        if status in "RC":
            out.append((status, fields[i + 1], fields[i + 2]))
            i += 3
        else:
            out.append((status, fields[i + 1], fields[i + 1]))
            i += 2
    return out


def weakening(repo: Path, parent: str, patch: bytes) -> list[str]:
    """Why ``patch`` weakens tests that exist at ``parent`` (empty: it does not); each names file and line.

    Flags: an existing test file deleted (or moved to a non-test path); a removed assertion line in an
    existing test file, unless the same line (whitespace aside) is added back in that file (a move); a
    removed test function. GitError when the patch does not apply at ``parent``.
    """
    with tempfile.TemporaryDirectory(prefix="jury-weak-") as tmp:
        new = commit_deterministic(repo, parent, patch, "jury weakening check", Path(tmp))
    reasons: list[str] = []
    for status, old, path in _name_status(repo, parent, new, renames=True):
        if status == "A" or not is_test_path(old):
            continue
        if status == "D":
            reasons.append(f"{old}: existing test file deleted")
            continue
        if status == "R" and not is_test_path(path):
            reasons.append(f"{old}: existing test file moved out of the tests ({path})")
            continue
        diff = _file_diff(repo, parent, new, old, path)
        for n, text in diff.removed:
            if _COMMENT_RE.match(text) or _norm(text) in diff.added:
                continue
            shown = _norm(text)[:200]
            if _TEST_DEF_RE.search(text):
                reasons.append(f"{old}:{n}: test removed: {shown}")
            elif _ASSERTION_RE.search(text):
                reasons.append(f"{old}:{n}: assertion removed or changed: {shown}")
    return reasons


# --- running commands -------------------------------------------------------------------------------


def split_command(command: str) -> tuple[list[str], dict[str, str]] | str:
    """``(argv, env assignments)`` of a shell-free command, or why it cannot be run without a shell."""
    try:
        tokens = shlex.split(command)
    except ValueError as exc:
        return f"cannot split {command!r}: {exc}"
    assigns: dict[str, str] = {}
    while tokens and _ASSIGN_RE.match(tokens[0]):
        name, _, value = tokens.pop(0).partition("=")
        assigns[name] = value
    if not tokens:
        return f"no program in {command!r}"
    ops = [t for t in tokens if t in _SHELL_TOKENS]
    if ops:
        return f"{command!r} needs a shell ({ops[0]}); give one plain command"
    return tokens, assigns


def _read_tail(path: Path, limit: int) -> str:
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - limit * 4))
            data = fh.read()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[-limit:]


_STDERR_MARK = "\n--- stderr ---\n"


def _combine(out: str, err: str, limit: int) -> str:
    """The ends of stdout and stderr in at most ``limit`` characters; each gets half, or what the other
    leaves."""
    if not err.strip():
        return out[-limit:]
    if not out.strip():
        return err[-limit:]
    room = limit - len(_STDERR_MARK)
    half = room // 2
    if len(err) <= half:
        out_room = room - len(err)
    elif len(out) <= half:
        out_room = len(out)
    else:
        out_room = half
    return out[-out_room:] + _STDERR_MARK + err[-(room - out_room) :]


def _label(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "command"


def run_command(
    command: str,
    cwd: Path,
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    out_dir: Path,
    label: str = "command",
    sandbox: SandboxSettings | None = None,
    max_output: int = RUN_MAX_OUTPUT,
) -> CommandOutcome:
    """Run a shell-free ``command`` in ``cwd`` (a worktree), in the sandbox; never raises for a bad command.

    The command runs the reviewed code, so it is jailed (``workers.sandbox``) as ``sandbox`` says (default:
    bubblewrap, no network, limits on): ``cwd`` is the only writable tree, its git directories are
    read-only, and the environment is the allow-list plus ``env`` plus the leading ``NAME=value`` words.
    Each output stream is capped at ``max_output`` bytes (head and tail) in ``out_dir/<label>.out|.err``;
    the outcome keeps its last ``OUTPUT_TAIL`` characters. A command that cannot be split or needs a
    shell, or a sandbox that cannot run, is an error, not a run.
    """
    split = split_command(command)
    if isinstance(split, str):
        return CommandOutcome(exit_code=None, seconds=0.0, output_tail="", timed_out=False, error=split)
    argv, assigns = split
    jail = Jail(
        worktree=cwd,
        settings=sandbox or SandboxSettings(),
        git_dirs=git_dirs_of(cwd),
        env={**(env or {}), **assigns},
    )
    name = _label(label)
    res = run_supervised(
        argv,
        cwd=cwd,
        env=dict(os.environ),
        stdout_path=out_dir / f"{name}.out",
        stderr_path=out_dir / f"{name}.err",
        timeout=timeout,
        max_output=max_output,
        jail=jail,
    )
    tail = _combine(
        _read_tail(res.stdout_path, OUTPUT_TAIL), _read_tail(res.stderr_path, OUTPUT_TAIL), OUTPUT_TAIL
    )
    return CommandOutcome(
        exit_code=None if res.error else res.exit_code,
        seconds=res.seconds,
        output_tail=tail,
        timed_out=res.timed_out,
        error=res.error,
    )


def _run(
    command: str,
    wt: Path,
    *,
    tree: Tree,
    sha: str | None,
    env: dict[str, str],
    timeout: float,
    out_dir: Path,
    label: str,
    check: str | None = None,
    sandbox: SandboxSettings | None = None,
) -> CommandRun:
    outcome = run_command(
        command, wt, timeout=timeout, env=env, out_dir=out_dir, label=label, sandbox=sandbox
    )
    return CommandRun(
        command=command,
        tree=tree,
        sha=sha,
        exit_code=outcome.exit_code,
        seconds=round(outcome.seconds, 3),
        output_tail=outcome.output_tail,
        timed_out=outcome.timed_out,
        error=outcome.error,
        check=check,
    )


def _verify_env() -> dict[str, str]:
    """What verification sets inside the sandbox, on top of its allow-list."""
    # No bytecode: a stale .pyc of the fixed code must not answer for the reverted source.
    return {"PYTHONDONTWRITEBYTECODE": "1"}


def _reset_to_index(wt: Path) -> None:
    """Undo what a run did to the checkout: tracked files back to the index, untracked/ignored removed."""
    git(["checkout-index", "--all", "--force"], wt)
    git(["clean", "-fdxq"], wt)


def _failed(outcome: CommandRun, with_fix: bool) -> str:
    where = "with the fix" if with_fix else "without the fix"
    if outcome.error:
        return f"test_command cannot be run {where}: {outcome.error}"
    if outcome.timed_out:
        return f"the test times out {where}"
    return f"the test fails {where} (exit {outcome.exit_code})"


def verify_fix(
    repo: Path,
    parent: str,
    patch: bytes,
    test_command: str,
    *,
    worktrees: Worktrees,
    name: str,
    timeout: float,
    out_dir: Path,
    sandbox: SandboxSettings | None = None,
) -> Verification:
    """Check ``patch`` (a fix with its regression test) against ``parent``, mechanically.

    In a worktree at ``parent`` with the patch applied, ``test_command`` must exit 0 (the fixed tree);
    with every non-test file the patch touched put back as at ``parent`` (added ones deleted) and the
    test files kept, it must exit non-zero (the reverted tree); and ``weakening`` must find nothing.
    Never raises for a bad patch or command: ``ok`` False with the reason. The worktree is always removed.
    """
    runs: list[CommandRun] = []

    def verdict(reason: str | None, weak: list[str]) -> Verification:
        return Verification(runs=runs, weakening=weak, ok=reason is None, reason=reason)

    with worktrees.checkout(repo, parent, name) as wt:
        try:
            git(["apply", "--index", "--binary", "--whitespace=nowarn", "-"], wt, input=patch)
        except GitError as exc:
            return verdict(f"the patch does not apply at {parent[:12]}: {exc.stderr.strip()[-300:]}", [])
        try:
            weak = weakening(repo, parent, patch)
        except GitError as exc:
            return verdict(f"cannot check the patch for weakened tests: {exc}", [])
        split = split_command(test_command)
        if isinstance(split, str):
            return verdict(f"test_command cannot be run: {split}", weak)
        changes = _name_status(wt, "HEAD", git(["write-tree"], wt).strip(), renames=False)
        tests = [p for s, _, p in changes if s != "D" and is_test_path(p)]
        code = [(s, p) for s, _, p in changes if not is_test_path(p)]
        if not tests:
            return verdict("the fix adds or changes no test file", weak)
        if not code:
            return verdict("the fix changes only test files: there is nothing to revert", weak)
        env = _verify_env()
        fixed_tree = git(["write-tree"], wt).strip()
        fixed = _run(
            test_command,
            wt,
            tree="fixed",
            sha=fixed_tree,
            env=env,
            timeout=timeout,
            out_dir=out_dir,
            label=f"{name}-fixed",
            sandbox=sandbox,
        )
        runs.append(fixed)
        if not fixed.passed:
            return verdict(_failed(fixed, with_fix=True), weak)
        _reset_to_index(wt)
        for status, path in code:
            if status == "A":
                git(["rm", "-q", "-f", "--", path], wt, env=_LITERAL)
            else:
                git(["checkout", parent, "--", path], wt, env=_LITERAL)
        reverted_tree = git(["write-tree"], wt).strip()
        reverted = _run(
            test_command,
            wt,
            tree="reverted",
            sha=reverted_tree,
            env=env,
            timeout=timeout,
            out_dir=out_dir,
            label=f"{name}-reverted",
            sandbox=sandbox,
        )
        runs.append(reverted)
        log.info(
            "verify.ran",
            name=name,
            fixed=fixed.exit_code,
            reverted=reverted.exit_code,
            weakening=len(weak),
        )
        if reverted.error:
            return verdict(_failed(reverted, with_fix=False), weak)
        if reverted.exit_code == 0:
            return verdict("the test passes without the fix", weak)
        if weak:
            shown = "; ".join(weak[:3]) + (f" (and {len(weak) - 3} more)" if len(weak) > 3 else "")
            return verdict(f"the fix weakens existing tests: {shown}", weak)
        return verdict(None, weak)


def run_checks(
    repo: Path,
    sha: str,
    checks: dict[str, str],
    *,
    worktrees: Worktrees,
    name: str,
    timeout: float,
    out_dir: Path,
    sandbox: SandboxSettings | None = None,
) -> list[CommandRun]:
    """Run each declared check (name -> command, in order) on a checkout of ``sha`` (tree "final").

    Files a check changed are reset before the next one. A bad command is a run with ``error`` set.
    """
    runs: list[CommandRun] = []
    with worktrees.checkout(repo, sha, name) as wt:
        commit = git(["rev-parse", "HEAD"], wt).strip()
        env: dict[str, str] = {}  # the sandbox's allow-list only
        for check, command in checks.items():
            run = _run(
                command,
                wt,
                tree="final",
                sha=commit,
                env=env,
                timeout=timeout,
                out_dir=out_dir,
                label=f"{name}-{check}",
                check=check,
                sandbox=sandbox,
            )
            runs.append(run)
            _reset_to_index(wt)
    return runs


_CHECK_KINDS: dict[str, SignalKind] = {
    "test": "test",
    "typecheck": "typecheck",
    "lint": "lint",
    "build": "build",
}


def signals_of(runs: list[CommandRun], source: SignalSource) -> list[Signal]:
    """The runs as refuter signals: a run's kind is its command's, else (a declared check) its name's
    (``test``, ``lint`` ...). A plain program run is no signal (REFERENCE §3), even in verification."""
    out: list[Signal] = []
    for run in runs:
        kind = classify_command(run.command)
        if kind is None and run.check is not None:
            kind = _CHECK_KINDS.get(run.check.lower())
        if kind is None:
            continue
        out.append(
            Signal(
                kind=kind,
                command=run.command,
                exit_code=run.exit_code,
                source=source,
                output_tail=run.output_tail,
                tree=run.tree if run.sha is None else f"{run.tree} {run.sha[:12]}",
            )
        )
    return out
