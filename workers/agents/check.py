"""Running a check agent once: a deterministic checker command whose diagnostics become findings.

The command (``spec.command``, split with shlex, no shell) runs in the worktree, supervised, in the
sandbox (``workers.isolation.sandbox``: no network unless the operator allows it, limits on, an allow-listed
environment); its output is read by ``spec.parser`` (``auto``: chosen by command and content).
With ``scope = "changed"`` only diagnostics on lines the PR added or changed are kept (new-side lines of
``git diff -U0 <base>...HEAD``), plus failed tests wherever they are (a change can break a test it did
not touch). A failing command with nothing parseable gives one finding carrying its output tail. The
report is written like any reviewer's (``FINDING:``/``WHERE:`` or ``NO NEW FINDINGS``). No network, no
model, no cost. As a reply seat it answers ``NO CONTEST``: a checker does not argue.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from orchestrator.diagnostics import PARSERS, Diagnostic, changed_lines, detect_parser, to_report
from orchestrator.errors import GitError
from orchestrator.parse import NO_CONTEST
from orchestrator.spec import AgentSpec, SandboxSettings
from workers.agents.run import AgentRun
from workers.isolation.sandbox import Jail, git_dirs_of
from workers.isolation.supervise import Interrupted, ProcResult, run_supervised
from workers.isolation.worktree import git

log = structlog.get_logger()

MAX_FINDINGS = 100
MAX_OUTPUT = 8_000_000  # bytes kept per stream of the checker (head and tail)
TAIL_LINES = 40
TAIL_CHARS = 3000


def _tail(text: str) -> str:
    lines = [ln for ln in text.rstrip().splitlines()][-TAIL_LINES:]
    return "\n".join(lines)[-TAIL_CHARS:]


def _relative(path: str, roots: list[Path]) -> str:
    """``path`` relative to the worktree when it is absolute and inside it; ``./`` dropped."""
    if os.path.isabs(path):
        for root in roots:
            try:
                return Path(path).relative_to(root).as_posix()
            except ValueError:
                continue
        return path
    while path.startswith("./"):
        path = path[2:]
    return path


def _changed(worktree: Path, base: str) -> dict[str, set[int]]:
    if not base or base.startswith("-"):
        raise GitError(["diff"], 128, f"bad base revision {base!r}")
    diff = git(
        ["diff", "-U0", "--no-color", "--no-ext-diff", "--no-textconv", "--end-of-options", f"{base}...HEAD"],
        worktree,
    )
    return changed_lines(diff)


def _keep(d: Diagnostic, parser: str, changed: dict[str, set[int]]) -> bool:
    if parser == "pytest":
        return True
    if d.line is None:
        return d.path in changed
    return d.line in changed.get(d.path, set())


def _where(changed: dict[str, set[int]]) -> tuple[str, int | None]:
    """The first changed file and its first changed line, else the repository root."""
    for path in sorted(changed):
        lines = changed[path]
        return path, (min(lines) if lines else None)
    return ".", None


def _result(
    *,
    report: str,
    summary: str,
    argv: list[str],
    started: float,
    stdout_path: Path,
    stderr_path: Path,
    error: str | None = None,
    exit_code: int | None = 0,
    timed_out: bool = False,
    cancelled: bool = False,
    usage: dict[str, int] | None = None,
) -> AgentRun:
    stdout_path.write_text(report, encoding="utf-8")
    stderr_path.write_text(summary, encoding="utf-8")
    proc = ProcResult(
        exit_code=exit_code,
        timed_out=timed_out,
        cancelled=cancelled,
        seconds=time.monotonic() - started,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        stdout_bytes=stdout_path.stat().st_size,
        stderr_bytes=stderr_path.stat().st_size,
        error=error,
    )
    return AgentRun(
        proc=proc,
        report=report,
        session_id=None,
        stdout=report,
        stderr=summary,
        argv=argv,
        cost_usd=0.0,
        usage=usage or {},
    )


def run_check_agent(
    spec: AgentSpec,
    *,
    role: str,
    prompt: str,
    worktree: Path,
    out_dir: Path,
    name: str,
    timeout: float,
    base: str,
    env: Mapping[str, str] | None = None,
    grace: float = 5.0,
    tick_every: float = 30.0,
    on_tick: Callable[[float, float], None] | None = None,
    interrupted: Interrupted | None = None,
    sandbox: SandboxSettings | None = None,
    **_: Any,
) -> AgentRun:
    """Run the check ``spec`` as ``role`` in ``worktree`` against ``base``; never raises for the checker.

    Files: ``<name>.stdout.txt`` (the report), ``<name>.stderr.txt`` (what ran and what was kept) and
    the checker's raw output in ``<name>.check.stdout.txt`` / ``<name>.check.stderr.txt``.
    ``proc.exit_code`` is 0 when a report was made (whatever the checker's own exit code), else 1.
    """
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    out_dir = out_dir.resolve()
    worktree_path = worktree
    worktree = worktree.resolve()
    stdout_path, stderr_path = out_dir / f"{name}.stdout.txt", out_dir / f"{name}.stderr.txt"
    command = spec.command or ""

    def fail(error: str, argv: list[str], **flags: Any) -> AgentRun:
        log.warning("agent.check.failed", agent=spec.name, name=name, error=error)
        return _result(
            report="",
            summary=f"$ {command}\nerror: {error}\n",
            argv=argv,
            started=started,
            stdout_path=stdout_path,
            stderr_path=stderr_path,
            error=error,
            exit_code=1,
            **flags,
        )

    if role == "reply":
        return _result(
            report=NO_CONTEST + "\n",
            summary="a check agent does not contest\n",
            argv=[],
            started=started,
            stdout_path=stdout_path,
            stderr_path=stderr_path,
        )
    if role != "reviewer":
        return fail(f"a check agent cannot act as {role}", [])
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return fail(f"cannot split the command: {exc}", [])
    if not argv:
        return fail("a check agent needs command", [])
    changed: dict[str, set[int]] | None = None
    if spec.scope == "changed":
        try:
            changed = _changed(worktree, base)
        except GitError as exc:
            return fail(f"cannot diff against base {base!r}: {exc}", argv)

    # The checker runs the reviewed code's configuration (and, for pytest, its code): a code run's jail,
    # limits on, network as the operator's settings say.
    jail = Jail(
        worktree=worktree,
        settings=sandbox or SandboxSettings(),
        git_dirs=git_dirs_of(worktree),
        env={"PYTHONDONTWRITEBYTECODE": "1", **spec.env},
        env_pass=tuple(spec.env_pass),
    )
    raw_out, raw_err = out_dir / f"{name}.check.stdout.txt", out_dir / f"{name}.check.stderr.txt"
    log.info("agent.check.start", agent=spec.name, name=name, argv0=argv[0], scope=spec.scope)
    proc = run_supervised(
        argv,
        cwd=worktree,
        env=dict(os.environ if env is None else env),
        stdout_path=raw_out,
        stderr_path=raw_err,
        timeout=timeout,
        grace=grace,
        tick_every=tick_every,
        on_tick=on_tick,
        interrupted=interrupted,
        max_output=MAX_OUTPUT,
        jail=jail,
    )
    if proc.error:
        return fail(proc.error, argv)
    if proc.timed_out or proc.cancelled:
        why = "cancelled" if proc.cancelled else f"timed out after {proc.seconds:.0f}s"
        return fail(f"{argv[0]} {why}", argv, timed_out=proc.timed_out, cancelled=proc.cancelled)
    out = raw_out.read_bytes().decode("utf-8", errors="replace")
    err = raw_err.read_bytes().decode("utf-8", errors="replace")
    text = out + ("\n" if out and not out.endswith("\n") else "") + err

    parser = detect_parser(command, text) if spec.parser == "auto" else spec.parser
    roots = [worktree, worktree_path.absolute()]
    found = [d.model_copy(update={"path": _relative(d.path, roots)}) for d in PARSERS[parser](text)]
    if changed is None:
        kept = found
    else:
        kept = [d for d in found if _keep(d, parser, changed)]
    unique: list[Diagnostic] = []
    seen: set[tuple[str, int | None, str, str]] = set()
    for d in kept:
        key = (d.path, d.line, d.code, d.message)
        if key not in seen:
            seen.add(key)
            unique.append(d)
    label = parser if parser != "none" else spec.name
    if proc.exit_code != 0 and not found:
        if changed is None:
            try:
                changed = _changed(worktree, base)
            except GitError:
                changed = {}
        path, line = _where(changed)
        last = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "no output")
        unique = [
            Diagnostic(
                path=path,
                line=line,
                code=f"exit {proc.exit_code}",
                message=f"`{command}` failed: {last[:300]}",
                detail=_tail(text) or "(no output)",
            )
        ]
        label = spec.name
    report = to_report(unique[:MAX_FINDINGS], tool=label)
    summary = (
        f"$ {command}\nexit code {proc.exit_code}\nparser {parser}: {len(found)} diagnostics, "
        f"{len(kept)} kept (scope {spec.scope}), {min(len(unique), MAX_FINDINGS)} reported\n"
        f"--- output tail ---\n{_tail(text)}\n"
    )
    log.info(
        "agent.check.done",
        agent=spec.name,
        name=name,
        exit_code=proc.exit_code,
        parser=parser,
        diagnostics=len(found),
        kept=len(kept),
        seconds=round(proc.seconds, 3),
    )
    return _result(
        report=report,
        summary=summary,
        argv=argv,
        started=started,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        usage={"diagnostics": len(found), "kept": len(kept)},
    )
