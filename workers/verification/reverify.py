"""Re-verification on trunk (``jury verify``, and the scheduler's ``verify`` firings): every accepted
finding of the converged runs of some repositories gets its regression test run again, in the sandbox, on
what their trunk is now.

For each finding: the trunk's current commit is checked out (a PR URL run's mirror fetches it first);
the test files the fix added or changed are the ones trunk holds, or, where trunk has none (the fix not
merged), the fix's own, laid on trunk's code; the judge's ``test_command`` is read and run as the
acceptance ran it (``read_test_command``, ``run_reported``, the runner's own report read with the same
rules: ``proof.fixed_problem``). The outcome is a ``verify.ran`` event on the original run with ``tree``
"trunk" and ``trunk`` the branch, so the run's record keeps the history; the fold keeps these apart from
the acceptance's own runs (``FindingState.trunk_runs``).

A **regression** is a test that passed at acceptance and now FAILS on trunk (a named test of the fix ran
and failed). A test that cannot run on trunk (no such module, a collection error: typically a fix never
merged) is an ``error`` row, reported, not a regression: it proves nothing about the fix. The range a
regression came in is the last trunk commit it passed on (or the fix's own commit) up to trunk now.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import structlog

from orchestrator.config import Settings
from orchestrator.domain import VerifyRan
from orchestrator.errors import GitError, JuryError, TargetError, UsageError
from orchestrator.fold import FindingState, RunState
from orchestrator.run_reader import fold_run
from orchestrator.spec import agent_timeout
from orchestrator.store.base import EventStore
from orchestrator.store.files import FileStore, mirror
from workers.isolation.mirror import run_repo
from workers.isolation.names import run_key, safe_name
from workers.isolation.worktree import git, host_worktrees
from workers.verification.proof import fixed_problem, relevant
from workers.verification.testcommand import TestCommand, added_test_names, read_test_command
from workers.verification.verify import OUTPUT_TAIL, Reported, run_reported
from workers.verification.weakening import is_test_path, name_status

log = structlog.get_logger()

Status = Literal["passed", "failed", "error"]


@dataclass
class VerifyRow:
    """One accepted finding's regression test on trunk now."""

    slug: str
    finding: str
    claim: str
    loc: str
    command: str
    trunk: str
    trunk_sha: str | None
    status: Status
    passed_at_acceptance: bool
    since: str | None = None  # the last commit it passed on: a trunk commit, else the fix's
    problem: str | None = None
    seconds: float = 0.0

    @property
    def regression(self) -> bool:
        return self.status == "failed" and self.passed_at_acceptance

    @property
    def range(self) -> str:
        return f"{(self.since or '?')[:12]}..{(self.trunk_sha or '?')[:12]}"


@dataclass
class VerifyReport:
    rows: list[VerifyRow] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)  # the converged runs looked at
    notes: list[str] = field(default_factory=list)  # runs that could not be re-verified, and why

    @property
    def regressions(self) -> list[VerifyRow]:
        return [r for r in self.rows if r.regression]

    @property
    def exit_code(self) -> int:
        """1: a test that passed at acceptance fails now; else 2: some run or finding could not be checked
        (its repository or trunk is not there): never 0 for a check that did not happen."""
        return 1 if self.regressions else 2 if self.notes else 0


# --- which runs -----------------------------------------------------------------------------------------


def _repo_root(path: str) -> str | None:
    p = Path(path).expanduser()
    if not p.exists():
        return None
    try:
        return str(Path(git(["rev-parse", "--show-toplevel"], p).strip()).resolve())
    except GitError:
        return str(p.resolve())


def _forge_repo(url: str, forge_hosts: Sequence[str] = ()) -> str | None:
    """``kind:owner/repo`` of a PR/MR URL run (lower case), as ``_wanted`` spells a forge repository."""
    from orchestrator.target import parse_pr_url

    try:
        pr = parse_pr_url(url, forge_hosts)
    except TargetError:
        return None
    return f"{pr.forge}:{pr.project.lower()}"


def _wanted(target: str) -> tuple[str, str]:
    """``("path", root)`` for a local path, ``("forge", kind:owner/repo)`` for a forge name or URL (a bare
    ``OWNER/REPO`` is GitHub's, ``GROUP/SUB/PROJECT`` GitLab's, as everywhere Jury takes one)."""
    text = target.strip()
    if text.startswith(("/", ".", "~")) or Path(text).expanduser().exists():
        root = _repo_root(text)
        if root is None:
            raise UsageError(f"no such repository: {text}")
        return "path", root
    from orchestrator.forge import parse_ref

    try:
        ref = parse_ref(text)
    except UsageError:
        raise UsageError(
            f"not a repository: {text!r} (expected a local PATH, OWNER/REPO, github:OWNER/REPO, "
            "gitlab:GROUP/PROJECT or a forge URL)"
        ) from None
    return "forge", f"{ref.kind}:{ref.repo.lower()}"


def matches(s: RunState, wanted: Sequence[tuple[str, str]], forge_hosts: Sequence[str] = ()) -> bool:
    """Whether run ``s`` reviewed one of the ``wanted`` repositories (any, when none is named)."""
    if not wanted:
        return True
    t = s.target
    for kind, value in wanted:
        if kind == "forge" and t.url and _forge_repo(t.url, forge_hosts) == value:
            return True
        if kind == "path" and not t.url and t.path and str(Path(t.path).resolve()) == value:
            return True
    return False


def _stores(settings: Settings) -> tuple[EventStore | None, FileStore]:
    files = FileStore(settings.dir)
    if settings.redis_url:
        from orchestrator.store.redis_archive import open_store

        return open_store(settings.redis_url), files
    return None, files


# --- one finding ----------------------------------------------------------------------------------------


def passed_at_acceptance(f: FindingState) -> bool:
    """Its test passed when it was accepted: mechanical verification held, or its fixed-tree run passed."""
    if f.verification_table is not None and f.verification_table.get("ok"):
        return True
    return any(v.get("tree") == "fixed" and v.get("exitCode") == 0 for v in f.verification)


def run_repository(settings: Settings, store: EventStore, s: RunState, shas: Sequence[str | None]) -> Path:
    """The run's repository on this host holding ``shas`` (its fixes): a PR URL run's is this host's own
    mirror, its fixes rebuilt from the store's patches (``workers/isolation/mirror.py``); a local run's, its
    path."""
    return run_repo(
        settings.dir,
        s.target,
        shas,
        events=lambda: store.read(s.slug),
        patches=lambda name: store.get_artifact(s.slug, name),
        forge_hosts=settings.forge_hosts,
    )


def trunk_commit(s: RunState, trunk: str, repo: Path | None = None) -> str:
    """Trunk's commit now in the run's repository: a PR URL run's mirror fetches it from its remote."""
    repo = repo or Path(s.target.path or ".")
    if s.target.url:
        try:
            git(["fetch", "--quiet", "origin", f"+refs/heads/{trunk}:refs/remotes/origin/{trunk}"], repo)
        except GitError as exc:
            raise TargetError(f"cannot fetch {trunk} for {s.slug}: {exc.stderr.strip()[-300:]}") from None
        ref = f"refs/remotes/origin/{trunk}"
    else:
        ref = f"refs/heads/{trunk}"
    try:
        return git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], repo).strip()
    except GitError:
        raise TargetError(f"trunk {trunk!r} not found in {repo} (run {s.slug})") from None


def _row(
    s: RunState, f: FindingState, trunk: str, sha: str | None, status: Status, **kw: object
) -> VerifyRow:
    return VerifyRow(
        slug=s.slug,
        finding=f.id,
        claim=f.claim,
        loc=f.loc,
        command=f.test_command or "",
        trunk=trunk,
        trunk_sha=sha,
        status=status,
        passed_at_acceptance=passed_at_acceptance(f),
        **kw,  # type: ignore[arg-type]
    )


def _run_on_trunk(
    settings: Settings,
    s: RunState,
    f: FindingState,
    tc: TestCommand,
    tests: list[str],
    sha: str,
    repo: Path,
) -> tuple[Reported, list[str]]:
    """Run ``tc`` on trunk commit ``sha`` in a worktree of its own; with the test files the fix added
    that trunk lacks, laid from the fix (trunk's own version of a test file wins)."""
    cfg = s.config
    timeout = agent_timeout(cfg.timeout if cfg else None)  # a test re-run, for no agent
    name = f"{run_key(s)}.reverify.{safe_name(f.id)}.{uuid.uuid4().hex[:8]}"
    with (
        host_worktrees(settings).checkout(repo, sha, name) as wt,
        tempfile.TemporaryDirectory(prefix="jury-reverify-") as tmp,
    ):
        laid = []
        for path in tests:
            if not (wt / path).exists():
                git(["checkout", f.sha or "", "--", path], wt)
                laid.append(path)
        out = Path(tmp) / "out"
        out.mkdir()
        reported = run_reported(
            tc,
            wt,
            tree="final",
            sha=sha,
            env={"PYTHONDONTWRITEBYTECODE": "1"},
            timeout=timeout,
            out_dir=out,
            label=f"trunk-{f.id}",
            scratch=Path(tmp) / "scratch",
            sandbox=cfg.sandbox if cfg else None,
        )
    return reported, laid


def _trunk_outcome(
    tc: TestCommand, reported: Reported, tests: list[str], added: list[str]
) -> tuple[Status, str | None]:
    """Whether the regression test passed on trunk, failed, or could not tell (and why not passed)."""
    run, report = reported.run, reported.report
    problem = fixed_problem(tc, report, tests, added)
    status: Status
    if run.error or run.timed_out:
        status, problem = "error", run.error or "timed out"
    elif report is None:
        status = "passed" if run.exit_code == 0 else "failed"
        problem = None if status == "passed" else f"exit {run.exit_code}"
    elif problem is None and run.exit_code == 0:
        status = "passed"
    elif any(r.outcome == "failed" and relevant(tc, r, tests, added) for r in report.results):
        status = "failed"
    else:
        status = "error"
        problem = problem or f"exit {run.exit_code}"
    return status, problem


def check_finding(
    settings: Settings, s: RunState, f: FindingState, trunk: str, sha: str, repo: Path | None = None
) -> tuple[VerifyRow, VerifyRan]:
    """Run finding ``f``'s regression test on trunk commit ``sha``; the row and the event recording it."""
    repo = repo or Path(s.target.path or ".")
    fix = f.sha or ""
    started = time.monotonic()
    since = next((r.get("sha") for r in reversed(f.trunk_runs) if r.get("passed")), None) or fix
    changes = name_status(repo, f"{fix}^", fix, renames=False)
    tests = [p for st, _, p in changes if st != "D" and is_test_path(p)]
    diff = git(["diff", "--no-color", "--no-ext-diff", f"{fix}^", fix, "--", *tests], repo) if tests else ""
    cfg = s.config
    tc = read_test_command(
        f.test_command or "",
        checks=cfg.checks if cfg else {},
        changed_tests=tests,
        added_names=added_test_names(diff),
    )
    problem: str | None
    status: Status
    exit_code: int | None = None
    tail, error = "", None
    if isinstance(tc, str):
        status, problem = "error", tc
    else:
        reported, laid = _run_on_trunk(settings, s, f, tc, tests, sha, repo)
        run = reported.run
        exit_code, tail, error = run.exit_code, run.output_tail, run.error
        status, problem = _trunk_outcome(tc, reported, tests, added_test_names(diff))
        if problem:
            problem = problem.replace("with the fix", "on trunk")
        if laid and problem:
            problem += f" (the fix's {', '.join(laid)} laid on trunk: trunk has no such file)"
    seconds = round(time.monotonic() - started, 2)
    row = _row(s, f, trunk, sha, status, since=since, problem=problem, seconds=seconds)
    event = VerifyRan(
        eid=f"reverify:{f.id}:{sha[:12]}:{uuid.uuid4().hex[:8]}",
        id=f.id,
        command=f.test_command or "",
        tree="trunk",
        sha=sha,
        exit_code=exit_code,
        seconds=seconds,
        output_tail=tail[-OUTPUT_TAIL // 2 :],
        error=error,
        trunk=trunk,
        passed=status == "passed",
        problem=problem[:1000] if problem else None,
    )
    return row, event


# --- the whole re-verification ------------------------------------------------------------------------


def reverify(settings: Settings, targets: Sequence[str] = (), trunk: str | None = None) -> VerifyReport:
    """Re-run the regression test of every accepted finding of the converged runs of ``targets`` (local
    paths or forge names; every run when empty) on ``trunk`` (default: each run's own trunk), record a
    ``verify.ran`` on each run, and report. Raises ``UsageError`` for a target that names nothing."""
    wanted = [_wanted(t) for t in targets]
    live, files = _stores(settings)
    slugs = list(dict.fromkeys([*(live.runs() if live is not None else []), *files.runs()]))
    report = VerifyReport()
    for slug in slugs:
        store: EventStore = live if live is not None and live.exists(slug) else files
        try:
            s = fold_run(store, slug)
        except Exception as exc:  # one unreadable run never stops the others
            log.warning("reverify.unreadable", slug=slug, error=str(exc))
            continue
        if s.state != "converged" or not matches(s, wanted, list(settings.forge_hosts)):
            continue
        accepted = [f for f in s.findings.values() if f.status == "accepted" and f.sha and f.test_command]
        if not accepted:
            continue
        report.runs.append(slug)
        branch = trunk or s.target.trunk or "main"
        try:
            repo = run_repository(settings, store, s, [f.sha for f in accepted])
            sha = trunk_commit(s, branch, repo)
        except (JuryError, OSError) as exc:  # OSError: a local run's repository is not on this host
            report.notes.append(f"{slug}: {exc}")
            continue
        events = []
        for f in accepted:
            try:
                row, event = check_finding(settings, s, f, branch, sha, repo)
            except (GitError, OSError) as exc:
                report.notes.append(f"{slug} {f.id}: {exc}")
                continue
            report.rows.append(row)
            events.append(event)
        if events:
            store.append(slug, events)
            mirror(store, files, slug)  # the record under the state directory, and run.json
    return report
