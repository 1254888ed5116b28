"""Mechanical verification of a fix: real commands on real trees, no model call.

``verify_fix`` runs the judge's test command on the fixed tree (it must pass) and on the tree with the fix
reverted but the tests kept (it must fail), and checks that the patch does not weaken existing tests. It
reads the runner's own report, not only exit codes (``testcommand``, ``testreport``, ``proof``), measures
that the test runs the changed lines inside a function (``coverage_check``), that the suite keeps every
test that passed on the head (``suite``) and that the fix is no marker its test looks for (``vacuity``);
``weakening`` reads the patch alone. ``run_checks`` runs declared checks (test,
lint ...) on one tree. Commands are split with shlex and run as argv under ``run_supervised`` in the
sandbox (``workers.isolation.sandbox``: the worktree the only writable tree, no network, an allow-listed
environment, output capped); never a shell.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import structlog
from pydantic import BaseModel

from orchestrator.spec import SandboxSettings
from workers.isolation.output_tail import combine, read_tail
from workers.isolation.sandbox import Jail, git_dirs_of
from workers.isolation.supervise import run_supervised
from workers.isolation.worktree import Worktrees, git
from workers.verification import coverage_check, suite, vacuity
from workers.verification.admit import LITERAL, admit
from workers.verification.coverage_check import FileCoverage
from workers.verification.proof import NamedTest, fixed_problem, named_table, reverted_problem
from workers.verification.runs import CommandRun, Tree
from workers.verification.suite import SuiteCache, SuiteDelta, SuiteSide
from workers.verification.testcommand import (
    TestCommand,
    instrument,
    split_command,
)
from workers.verification.testreport import TestReport, read_report, unread
from workers.verification.weakening import is_test_path, weakening

log = structlog.get_logger()

__all__ = [
    "OUTPUT_TAIL",
    "CommandOutcome",
    "Verification",
    "is_test_path",
    "run_checks",
    "run_command",
    "verify_fix",
    "weakening",
]

OUTPUT_TAIL = 4000  # characters of output kept per run
RUN_MAX_OUTPUT = 2_000_000  # bytes kept per stream of a command's output file (head and tail)

REPORT_MAX = 20_000_000  # bytes of a runner's report file read back


class Verification(BaseModel):
    """The verdict of mechanical verification: ``ok`` only when the named tests fail without the fix and
    pass with it, run the changed code, and no existing test is weakened; ``reason`` says why not.

    The table: ``tests`` (both trees' outcomes of the named tests), ``coverage`` (the changed lines each
    touched file had run, or why not measured), ``suite`` (the repository's suite on the head and the
    fixed tree), ``config_changes`` (test configuration and existing tests the fix edited), ``seconds``
    (what the whole verification cost, every run included)."""

    runs: list[CommandRun]
    weakening: list[str]
    ok: bool
    reason: str | None
    runner: str | None = None
    tests: list[NamedTest] = []
    coverage: list[FileCoverage] = []
    coverage_note: str | None = None
    suite: SuiteDelta | None = None
    mutants: list[vacuity.LineMutant] = []
    config_changes: list[str] = []
    seconds: float = 0.0


@dataclass(frozen=True)
class CommandOutcome:
    """How a command ended: ``exit_code`` None with ``error`` when it could not be split or started."""

    exit_code: int | None
    seconds: float
    output_tail: str
    timed_out: bool
    error: str | None


# --- running commands -------------------------------------------------------------------------------


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
    scratch: Path | None = None,
) -> CommandOutcome:
    """Run a shell-free ``command`` in ``cwd`` (a worktree), in the sandbox; never raises for a bad command.

    The command runs the reviewed code, so it is jailed (``workers.isolation.sandbox``) as ``sandbox`` says
    (default:
    bubblewrap, no network, limits on): ``cwd`` is the only writable tree, its git directories are
    read-only, and the environment is the allow-list plus ``env`` plus the leading ``NAME=value`` words.
    Each output stream is capped at ``max_output`` bytes (head and tail) in ``out_dir/<label>.out|.err``;
    the outcome keeps its last ``OUTPUT_TAIL`` characters. A command that cannot be split or needs a
    shell, or a sandbox that cannot run, is an error, not a run. ``scratch`` is a directory outside the
    worktree the command may also write (a test runner's report, coverage data).
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
        rw_paths=(scratch,) if scratch is not None else (),  # where the runner writes its report
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
    tail = combine(
        read_tail(res.stdout_path, OUTPUT_TAIL), read_tail(res.stderr_path, OUTPUT_TAIL), OUTPUT_TAIL
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
    scratch: Path | None = None,
) -> CommandRun:
    outcome = run_command(
        command, wt, timeout=timeout, env=env, out_dir=out_dir, label=label, sandbox=sandbox, scratch=scratch
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


@dataclass
class Reported:
    """A test command run with its runner's report (None: a command Jury reads no report from)."""

    run: CommandRun
    report: TestReport | None
    coverage_data: Path | None = None


def _read_file(path: Path, limit: int = REPORT_MAX) -> str | None:
    try:
        with path.open("rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return None


def run_reported(
    tc: TestCommand,
    wt: Path,
    *,
    tree: Tree,
    sha: str | None,
    env: dict[str, str],
    timeout: float,
    out_dir: Path,
    label: str,
    scratch: Path,
    sandbox: SandboxSettings | None = None,
    python: str | None = None,
    rcfile: Path | None = None,
    bind: Path | None = None,
) -> Reported:
    """Run ``tc`` through ``_run`` (so in the sandbox) with its runner's report written to ``scratch``,
    and read the report back: a JUnit or JSON file, or the runner's result lines in its output. With
    ``python`` and ``rcfile`` a Python runner runs under coverage (data in ``scratch``). ``bind`` (default
    ``scratch``) is the directory the sandbox lets the command write, holding ``scratch`` and ``rcfile``."""
    scratch.mkdir(parents=True, exist_ok=True)
    inst = instrument(tc, str(scratch), python=python, rcfile=str(rcfile) if rcfile else None)
    for stale in (inst.path, inst.coverage):
        if stale:
            Path(stale).unlink(missing_ok=True)
    run = _run(
        shlex.join(inst.argv),
        wt,
        tree=tree,
        sha=sha,
        env={**env, **tc.env},
        timeout=timeout,
        out_dir=out_dir,
        label=label,
        sandbox=sandbox,
        scratch=bind or scratch,
    )
    run = run.model_copy(update={"command": tc.command, "ran": shlex.join(inst.argv)})
    if inst.kind == "none":
        return Reported(run, None)
    name = _label(label)
    text = _read_file(Path(inst.path)) if inst.path else _read_file(out_dir / f"{name}.{inst.stream[3:]}")
    if text is None:
        why = "the command could not start" if run.error else f"the runner wrote no {inst.kind} report"
        return Reported(run, unread(why))
    data = Path(inst.coverage) if inst.coverage and Path(inst.coverage).exists() else None
    return Reported(run, read_report(inst.kind, text, str(wt.resolve())), data)


class _Verifier:
    """One verification in one worktree: its runs, sharing their settings. Each run goes through
    ``run_reported`` / ``_run``, so through ``run_command`` and the sandbox."""

    def __init__(
        self,
        wt: Path,
        scratch: Path,
        name: str,
        timeout: float,
        out_dir: Path,
        sandbox: SandboxSettings | None,
    ):
        self.wt, self.scratch, self.name = wt, scratch, name
        self.timeout, self.out_dir, self.sandbox = timeout, out_dir, sandbox
        self.env = _verify_env()
        self.python: str | None = None
        self.rcfile: Path | None = None

    def under_coverage(self, tc: TestCommand, modules: list[str]) -> None:
        """Python runners run under coverage.py: the command's own interpreter, Jury's coverage package
        (and pytest plugin, which imports ``modules`` before the tests run) alone on PYTHONPATH after the
        command's own entries, Jury's rcfile."""
        self.rcfile, shim = coverage_check.prepare(self.scratch)
        self.env[coverage_check.PREIMPORT_ENV] = os.pathsep.join(modules)
        self.python = tc.python or coverage_check.interpreter_of(
            tc.prefix[0], self.wt, os.environ.get("PATH", "")
        )
        self.env["PYTHONPATH"] = ":".join(filter(None, [tc.env.get("PYTHONPATH"), str(shim)]))

    def reported(
        self, tc: TestCommand, tree: Tree, sha: str, label: str, *, coverage: bool = False
    ) -> Reported:
        return run_reported(
            tc,
            self.wt,
            tree=tree,
            sha=sha,
            env=self.env,
            timeout=self.timeout,
            out_dir=self.out_dir,
            label=f"{self.name}-{label}",
            scratch=self.scratch / label,
            sandbox=self.sandbox,
            python=self.python if coverage else None,
            rcfile=self.rcfile if coverage else None,
            bind=self.scratch,
        )

    def coverage_json(
        self, tc: TestCommand, data: Path, sha: str, files: list[str]
    ) -> tuple[str | None, str]:
        """coverage's JSON report of ``data`` for ``files`` (None and why when there is none)."""
        assert self.python is not None and self.rcfile is not None
        argv = coverage_check.json_argv(self.python, tc.py_flags, data.parent, self.rcfile, files)
        run = self.tool(argv, "fixed", sha, "coverage")
        text = _read_file(data.parent / "coverage.json")
        if text is None and "No data to report" in run.output_tail:
            text = '{"files": {}}'  # nothing of the changed files ran: none was even imported
        return (
            text,
            "" if text is not None else f"coverage json failed: {run.error or run.output_tail[-300:]}",
        )

    def covered(
        self, tc: TestCommand, code: list[tuple[str, str]], fixed_tree: str, data: Path | None
    ) -> list[FileCoverage]:
        """Coverage of the changed lines of ``code`` by the fixed tree's run that left ``data``."""
        return coverage_check.measure(
            wt=self.wt,
            code=code,
            fixed_tree=fixed_tree,
            data=data,
            run_json=lambda f: (
                self.coverage_json(tc, data, fixed_tree, f) if data else (None, "no coverage data")
            ),
        )

    def named(
        self, tc: TestCommand, sha: str, tests: list[str], added: list[str], runs: list[CommandRun]
    ) -> vacuity.RunNamed:
        """A runner of the named tests on the checkout as it stands (``vacuity``'s stripped copy and
        mutants, tree "stripped" or "mutant"): None when they ran and passed, else what happened."""

        def run(label: str) -> str | None:
            r = self.reported(tc, "mutant" if label.startswith("mutant") else "stripped", sha, label)
            runs.append(r.run)
            if r.run.error or r.run.timed_out or r.run.exit_code != 0:
                return _failed(r.run, with_fix=True).removeprefix("the test ") + _first_bad(r.report)
            return fixed_problem(tc, r.report, tests, added)

        return run

    def tool(self, argv: list[str], tree: Tree, sha: str, label: str) -> CommandRun:
        """A run of Jury's own argv (coverage's report, a mutant's bytecode) in the sandbox."""
        return _run(
            shlex.join(argv),
            self.wt,
            tree=tree,
            sha=sha,
            env=self.env,
            timeout=self.timeout,
            out_dir=self.out_dir,
            label=f"{self.name}-{label}",
            sandbox=self.sandbox,
            scratch=self.scratch,
        )

    def compile_pyc(self, tc: TestCommand, sha: str) -> vacuity.CompilePyc:
        """Writes a mutant's bytecode with the test command's interpreter and flags (``vacuity``)."""

        def write(held: Path, path: str) -> str | None:
            argv = [self.python or "python3", *tc.py_flags, "-c", vacuity.PYC_SCRIPT, str(held), path]
            run = self.tool(argv, "mutant", sha, "pyc")
            return None if run.passed else (run.error or run.output_tail[-300:] or f"exit {run.exit_code}")

        return write

    def side(self, stc: TestCommand, tree: Literal["head", "fixed"], sha: str) -> SuiteSide:
        """One run of the suite, as the suite delta keeps it."""
        r = self.reported(stc, tree, sha, f"suite-{tree}")
        return suite.side_of(
            tree,
            sha,
            stc.command,
            r.report if r.report is not None else unread("no report"),
            exit_code=r.run.exit_code,
            seconds=r.run.seconds,
            timed_out=r.run.timed_out,
            error=r.run.error,
        )


@dataclass
class _Gathered:
    """What one verification has gathered so far, its runs and its table, which any verdict reports."""

    name: str
    started: float = field(default_factory=time.monotonic)
    runs: list[CommandRun] = field(default_factory=list)
    table: dict[str, object] = field(default_factory=dict)

    def verdict(self, reason: str | None, weak: list[str]) -> Verification:
        """The verdict (``ok`` when there is no ``reason``), logged."""
        seconds = round(time.monotonic() - self.started, 3)
        v = Verification.model_validate(
            {
                "runs": self.runs,
                "weakening": weak,
                "ok": reason is None,
                "reason": reason,
                "seconds": seconds,
                **self.table,
            }
        )
        log.info("verify.done", name=self.name, ok=v.ok, reason=reason, seconds=seconds, runner=v.runner)
        return v


def _revert(wt: Path, parent: str, code: list[tuple[str, str]]) -> str:
    """The tree with every non-test file of the fix put back as at ``parent`` (added ones deleted)."""
    _reset_to_index(wt)
    for status, path in code:
        if status == "A":
            git(["rm", "-q", "-f", "--", path], wt, env=LITERAL)
        else:
            git(["checkout", parent, "--", path], wt, env=LITERAL)
    return git(["write-tree"], wt).strip()


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
    checks: dict[str, str] | None = None,
    suite_cache: SuiteCache | None = None,
) -> Verification:
    """Check ``patch`` (a fix with its regression test) against ``parent``, mechanically, in the sandbox.

    Before anything runs: the patch applies, adds or changes a test and some code, weakens no existing
    test (``weakening``), and ``test_command`` is a test command Jury can verify (``read_test_command``;
    ``checks`` are the declared ones). Then, each run reading the runner's own report: on the fixed tree
    the named tests pass (under coverage for Python, which must show the changed lines run by a test); on
    the reverted tree (every non-test file put back, added ones deleted, tests kept) a test the fix added
    or changed FAILS; the suite on the fixed tree keeps every test that passed on the head
    (``suite_cache`` holds the head's result per tree); and, for Python, the named tests pass with the
    fix's comments stripped and fail with each changed executable line deleted (``vacuity``). Never
    raises for a bad patch or command: ``ok`` False with the first reason. The worktree and the scratch
    directory are always removed.
    """
    gathered = _Gathered(name)
    runs, table, verdict = gathered.runs, gathered.table, gathered.verdict

    with (
        worktrees.checkout(repo, parent, name) as wt,
        tempfile.TemporaryDirectory(prefix="jury-verify-") as tmp,
    ):
        admitted, weak = admit(repo, parent, patch, test_command, wt, checks=checks or {}, table=table)
        if isinstance(admitted, str):
            return verdict(admitted, weak)
        tc, tests, added = admitted.tc, admitted.tests, admitted.added
        fixed_tree, code = admitted.tree, admitted.code
        v = _Verifier(wt, Path(tmp), name, timeout, out_dir, sandbox)
        measured = tc.runner in ("pytest", "unittest")
        if measured:
            v.under_coverage(tc, [p for s, p in code if s != "D" and coverage_check.is_python(p)])
        fixed = v.reported(tc, "fixed", fixed_tree, "fixed", coverage=measured)
        runs.append(fixed.run)
        table["tests"] = named_table(tc, fixed.report, None, tests, added)
        problem = fixed_problem(tc, fixed.report, tests, added)
        if fixed.run.error or fixed.run.timed_out or (fixed.run.exit_code != 0 and not _unran(problem)):
            return verdict(_failed(fixed.run, with_fix=True) + _first_bad(fixed.report), weak)
        if problem is not None:
            return verdict(problem, weak)
        if measured:
            table["coverage"] = cov = v.covered(tc, code, fixed_tree, fixed.coverage_data)
            if (problem := coverage_check.coverage_problem(cov)) is not None:
                return verdict(problem, weak)
        else:
            table["coverage_note"] = f"coverage not measured ({tc.runner or 'a declared check'})"
        reverted_tree = _revert(wt, parent, code)
        reverted = v.reported(tc, "reverted", reverted_tree, "reverted", coverage=measured)
        runs.append(reverted.run)
        table["tests"] = named_table(tc, fixed.report, reverted.report, tests, added)
        if reverted.run.error:
            return verdict(_failed(reverted.run, with_fix=False), weak)
        if (
            problem := reverted_problem(tc, reverted.report, reverted.run.exit_code, tests, added)
        ) is not None:
            return verdict(problem, weak)
        delta = suite.measure(wt, tc, checks or {}, fixed_tree, suite_cache, v.side)
        table["suite"] = delta
        if (problem := suite.delta_problem(delta)) is None and measured:
            # the fix is what the test checks: no marker it reads, no line it passes without (last: most runs)
            named, pyc = v.named(tc, fixed_tree, tests, added, runs), v.compile_pyc(tc, fixed_tree)
            table["mutants"], problem = vacuity.check(wt, fixed_tree, cov, named, pyc, Path(tmp))
        return verdict(problem, weak)


def _unran(problem: str | None) -> bool:
    """Whether the fixed tree's problem is that the named tests did not run (clearer than an exit code)."""
    return problem is not None and not problem.startswith("the named tests do not all pass")


def _first_bad(report: TestReport | None) -> str:
    bad = [r for r in (report.results if report else []) if r.outcome not in ("passed", "skipped")]
    return f": {bad[0].id} {bad[0].outcome}" if bad else ""


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
