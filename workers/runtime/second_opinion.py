"""``jury refute``: the second opinion on its own, for any claim about a repository.

Signals first (the named commands and those in the task text, run on the repository's HEAD); no
signal, no critique. Then an agent of another family than the judge's tries to refute the claim, in a
read-only worktree. The result is the three-state ``RefutationRecord``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from orchestrator.config import RepoConfig, Settings
from orchestrator.errors import GitError, TargetError, UsageError
from orchestrator.git import rev_parse
from orchestrator.prompts import refute_prompt
from orchestrator.refute.commands import commands_in_task
from orchestrator.refute.families import independence, refuter_for, spec_family
from orchestrator.refute.record import RefutationRecord
from orchestrator.refute.signals import Signal, gate
from orchestrator.refute.verdicts import ParsedRefutation, parse_refutation
from orchestrator.spec import agent_timeout
from workers.agents import SeatRequest, run_seat
from workers.agents.run import AgentRun
from workers.isolation.worktree import Worktrees, changed_paths, host_worktrees
from workers.runtime.context import call_cost
from workers.verification.runs import signals_of
from workers.verification.verify import run_checks


def _signals(
    settings: Settings,
    cfg: RepoConfig,
    repo: Path,
    head: str,
    named: dict[str, str],
    worktrees: Worktrees,
    timeout: float | None,
) -> list[Signal]:
    """The signals of the named commands (``command-<n>``) and the task's (``task-<n>``), run on ``head``."""
    work = settings.dir / "refute"
    work.mkdir(parents=True, exist_ok=True)
    runs = (
        run_checks(
            repo,
            head,
            named,
            worktrees=worktrees,
            name=f"refute-checks-{os.getpid()}",
            timeout=agent_timeout(timeout),
            out_dir=work,
            sandbox=cfg.sandbox,
        )
        if named
        else []
    )
    signals = signals_of([r for r in runs if (r.check or "").startswith("command-")], "declared")
    return signals + signals_of([r for r in runs if (r.check or "").startswith("task-")], "task")


def _verdict(run: AgentRun, wrote: list[str]) -> ParsedRefutation:
    """The refuter's verdict: "unclear" when it could not run; what it wrote (discarded) is said."""
    verdict = parse_refutation(run.report)
    if run.proc.error or run.proc.timed_out:
        why = run.proc.error or "timed out"
        verdict = verdict.model_copy(
            update={"outcome": "unclear", "reason": f"the refuter could not run: {why}"}
        )
    if wrote:
        verdict = verdict.model_copy(
            update={"reason": f"{verdict.reason} (it changed {', '.join(wrote)}; discarded)"}
        )
    return verdict


def second_opinion(
    settings: Settings,
    cfg: RepoConfig,
    repo: Path,
    *,
    claim: str,
    task: str | None,
    commands: list[str],
    refuter: str | None,
    timeout: float | None,
) -> RefutationRecord:
    """Whether ``claim`` about ``repo`` (at its HEAD) survives an agent of another family than the judge's
    (``refuter``, else one chosen among the reviewers) trying to break it; skipped without a signal."""
    try:
        head = rev_parse(repo, "HEAD")
    except GitError:
        raise TargetError(f"not a git repository with a commit: {repo}") from None
    judge = cfg.jury.judge or "codex"
    if refuter is not None and refuter not in cfg.agents:
        raise UsageError(f"--refuter: unknown agent '{refuter}' (known: {', '.join(sorted(cfg.agents))})")
    names = [refuter] if refuter else [n for n in (cfg.jury.reviewers or list(cfg.agents)) if n != judge]
    choice = refuter_for(cfg.agents, names, judge, refuter)

    named = {f"command-{i}": c for i, c in enumerate(commands, 1)}
    named |= {f"task-{i}": c for i, c in enumerate(commands_in_task(task or ""), 1)}
    worktrees = host_worktrees(settings)
    g = gate(_signals(settings, cfg, repo, head, named, worktrees, timeout))
    if not g.open:
        return RefutationRecord.skipped(g.reason)
    if choice.agent is None:
        return RefutationRecord.skipped(choice.reason, signal=g.signals[0])
    spec = cfg.agents[choice.agent]
    full_claim = f"{claim}\n\nTask: {task}" if task else claim
    prompt = refute_prompt(
        claim=full_claim, finding_id=None, signals=g.signals, commands=list(named.values()), base=None
    )
    limit = agent_timeout(timeout, spec)
    with worktrees.checkout(repo, head, f"refute-{os.getpid()}") as wt, tempfile.TemporaryDirectory() as out:
        request = SeatRequest(
            spec=spec,
            role="refuter",
            prompt=prompt,
            worktree=wt,
            out_dir=Path(out),
            name="refute",
            timeout=limit,
            base=head,
            checks=named,
            grace=settings.kill_grace,
            sandbox=cfg.sandbox,
        )
        run = run_seat(request)
        wrote = changed_paths(wt)
    verdict = _verdict(run, wrote)
    judge_family = spec_family(cfg.agents[judge]) if judge in cfg.agents else None
    return RefutationRecord.from_verdict(
        verdict,
        cost_usd=call_cost(run, spec),
        reviewer_model=run.model or spec.model,
        reviewer_agent=choice.agent,
        independent=choice.independent and independence(judge_family, spec_family(spec, run.model)),
        signal=g.signals[0],
    )
