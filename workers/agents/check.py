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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Outcome:
    """How one check agent's run ends: its report and summary written to ``<name>.stdout.txt`` and
    ``<name>.stderr.txt`` in ``out_dir``, made into the run's result."""

    agent: str
    name: str
    command: str
    started: float
    out_dir: Path

    def made(
        self, report: str, summary: str, argv: list[str], usage: dict[str, int] | None = None
    ) -> AgentRun:
        return _result(
            report=report,
            summary=summary,
            argv=argv,
            started=self.started,
            stdout_path=self.out_dir / f"{self.name}.stdout.txt",
            stderr_path=self.out_dir / f"{self.name}.stderr.txt",
            usage=usage,
        )

    def fail(self, error: str, argv: list[str], **flags: Any) -> AgentRun:
        """No report: the summary says what ran and why it failed (``flags``: timed out, cancelled)."""
        log.warning("agent.check.failed", agent=self.agent, name=self.name, error=error)
        return _result(
            report="",
            summary=f"$ {self.command}\nerror: {error}\n",
            argv=argv,
            started=self.started,
            stdout_path=self.out_dir / f"{self.name}.stdout.txt",
            stderr_path=self.out_dir / f"{self.name}.stderr.txt",
            error=error,
            exit_code=1,
            **flags,
        )


def _supervise_checker(
    spec: AgentSpec,
    argv: list[str],
    *,
    worktree: Path,
    raw_out: Path,
    raw_err: Path,
    env: Mapping[str, str] | None,
    sandbox: SandboxSettings | None,
    **limits: Any,
) -> ProcResult:
    """The checker run in a code run's jail: it runs the reviewed code's configuration (and, for pytest,
    its code), so limits are on and the network is as the operator's settings say. ``limits`` are
    ``run_supervised``'s timeout, grace and tick and interruption callbacks."""
    jail = Jail(
        worktree=worktree,
        settings=sandbox or SandboxSettings(),
        git_dirs=git_dirs_of(worktree),
        env={"PYTHONDONTWRITEBYTECODE": "1", **spec.env},
        env_pass=tuple(spec.env_pass),
    )
    return run_supervised(
        argv,
        cwd=worktree,
        env=dict(os.environ if env is None else env),
        stdout_path=raw_out,
        stderr_path=raw_err,
        max_output=MAX_OUTPUT,
        jail=jail,
        **limits,
    )


def _output_text(raw_out: Path, raw_err: Path) -> str:
    """The checker's stdout then its stderr, as one text for the parser."""
    out = raw_out.read_bytes().decode("utf-8", errors="replace")
    err = raw_err.read_bytes().decode("utf-8", errors="replace")
    return out + ("\n" if out and not out.endswith("\n") else "") + err


def _unique(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """The diagnostics in order, each (path, line, code, message) once."""
    unique: list[Diagnostic] = []
    seen: set[tuple[str, int | None, str, str]] = set()
    for d in diagnostics:
        key = (d.path, d.line, d.code, d.message)
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return unique


def _failure(
    command: str,
    exit_code: int | None,
    text: str,
    changed: dict[str, set[int]] | None,
    worktree: Path,
    base: str,
) -> Diagnostic:
    """The one finding for a checker that failed with nothing parseable: its last line and output tail, on
    the first changed line (or the repository root when the diff cannot be had)."""
    if changed is None:
        try:
            changed = _changed(worktree, base)
        except GitError:
            changed = {}
    path, line = _where(changed)
    last = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "no output")
    return Diagnostic(
        path=path,
        line=line,
        code=f"exit {exit_code}",
        message=f"`{command}` failed: {last[:300]}",
        detail=_tail(text) or "(no output)",
    )


def _checker_argv(role: str, command: str) -> list[str] | str:
    """The checker's argument vector (split like a shell would, never run by one), or why there is none."""
    if role != "reviewer":
        return f"a check agent cannot act as {role}"
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return f"cannot split the command: {exc}"
    if not argv:
        return "a check agent needs command"
    return argv


@dataclass(frozen=True)
class _Reading:
    """What the checker's output came to: the report and the summary of how it was made."""

    parser: str
    found: int  # diagnostics parsed
    kept: int  # of them, in scope
    report: str
    summary: str


def _read(
    spec: AgentSpec,
    text: str,
    exit_code: int | None,
    changed: dict[str, set[int]] | None,
    *,
    roots: list[Path],
    worktree: Path,
    base: str,
) -> _Reading:
    """Parse the checker's ``text``, keep the diagnostics in scope (``changed``, when the scope is the
    change) and make the report; a failed checker with nothing parseable is one finding of its own."""
    command = spec.command or ""
    parser = detect_parser(command, text) if spec.parser == "auto" else spec.parser
    found = [d.model_copy(update={"path": _relative(d.path, roots)}) for d in PARSERS[parser](text)]
    if changed is None:
        kept = found
    else:
        kept = [d for d in found if _keep(d, parser, changed)]
    unique = _unique(kept)
    label = parser if parser != "none" else spec.name
    if exit_code != 0 and not found:
        unique = [_failure(command, exit_code, text, changed, worktree, base)]
        label = spec.name
    summary = (
        f"$ {command}\nexit code {exit_code}\nparser {parser}: {len(found)} diagnostics, "
        f"{len(kept)} kept (scope {spec.scope}), {min(len(unique), MAX_FINDINGS)} reported\n"
        f"--- output tail ---\n{_tail(text)}\n"
    )
    return _Reading(parser, len(found), len(kept), to_report(unique[:MAX_FINDINGS], tool=label), summary)


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
    outcome = _Outcome(spec.name, name, spec.command or "", started, out_dir)
    if role == "reply":
        return outcome.made(NO_CONTEST + "\n", "a check agent does not contest\n", [])
    argv = _checker_argv(role, outcome.command)
    if isinstance(argv, str):
        return outcome.fail(argv, [])
    changed: dict[str, set[int]] | None = None
    if spec.scope == "changed":
        try:
            changed = _changed(worktree, base)
        except GitError as exc:
            return outcome.fail(f"cannot diff against base {base!r}: {exc}", argv)

    raw_out, raw_err = out_dir / f"{name}.check.stdout.txt", out_dir / f"{name}.check.stderr.txt"
    log.info("agent.check.start", agent=spec.name, name=name, argv0=argv[0], scope=spec.scope)
    proc = _supervise_checker(
        spec,
        argv,
        worktree=worktree,
        raw_out=raw_out,
        raw_err=raw_err,
        env=env,
        sandbox=sandbox,
        timeout=timeout,
        grace=grace,
        tick_every=tick_every,
        on_tick=on_tick,
        interrupted=interrupted,
    )
    if proc.error:
        return outcome.fail(proc.error, argv)
    if proc.timed_out or proc.cancelled:
        why = "cancelled" if proc.cancelled else f"timed out after {proc.seconds:.0f}s"
        return outcome.fail(f"{argv[0]} {why}", argv, timed_out=proc.timed_out, cancelled=proc.cancelled)
    text = _output_text(raw_out, raw_err)
    roots = [worktree, worktree_path.absolute()]
    reading = _read(spec, text, proc.exit_code, changed, roots=roots, worktree=worktree, base=base)
    log.info(
        "agent.check.done",
        agent=spec.name,
        name=name,
        exit_code=proc.exit_code,
        parser=reading.parser,
        diagnostics=reading.found,
        kept=reading.kept,
        seconds=round(proc.seconds, 3),
    )
    return outcome.made(
        reading.report, reading.summary, argv, {"diagnostics": reading.found, "kept": reading.kept}
    )
