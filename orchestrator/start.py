"""A new run's first events: what ``jury review`` and ``jury sweep`` both write before the coordinator's
first pass — the resolved target, and the jury configuration built from the merged configuration and the
run options.

Kept apart from the commands so a sweep builds a hundred runs' first events in one process, and a
single review builds its one the same way: whatever a run option means (a budget, a refuter, a round
cap), it means it alike for both.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config import RepoConfig, Settings, resolve_jury
from orchestrator.domain import Event, JuryConfigEvent, TargetEvent
from orchestrator.errors import UsageError
from orchestrator.spec import JuryConfig, Target


def split_names(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [n.strip() for n in value.split(",") if n.strip()]


@dataclass
class RunOptions:
    """What a run was asked for, beyond the target (``jury review``'s options; a sweep's too)."""

    branch: str | None = None
    trunk: str | None = None
    reviewers: str | None = None
    judge: str | None = None
    rounds: int | None = None
    timeout: float | None = None
    config: Path | None = None
    # Push the fixes when the run converges: a local target's branch moved, a PR URL's jury/<slug> pushed
    # to its repository. None: the operator's ``[jury] push`` (default false).
    push: bool | None = None
    refute: bool = True
    refuter: str | None = None
    refute_rejections: bool = False
    task: str | None = None
    budget: float | None = None
    publish: bool = False  # publish the run to its PR when it ends (needs a PR/MR URL target)


def pick_refuter(
    cfg: RepoConfig, reviewers: list[str], judge: str, forced: str | None
) -> tuple[str | None, str]:
    """The second opinion's agent (the user's choice, else a juror of another family than the judge) and,
    when it cannot be an independent one, why (a config note the run shows: ``jury show``, the console,
    the PR's summary), naming any entry without a family."""
    from orchestrator.refute.families import refuter_for

    if forced is not None and forced not in cfg.agents:
        raise UsageError(f"--refuter: unknown agent '{forced}' (known: {', '.join(sorted(cfg.agents))})")
    choice = refuter_for(cfg.agents, [*reviewers, judge], judge, forced)
    if choice.independent:
        return choice.agent, ""
    who = f"{choice.agent}, not independent" if choice.agent else "nobody fits, it will be skipped"
    return choice.agent, f"second opinion: {who}: {choice.reason}"


def check_options(opts: RunOptions) -> None:
    """Refuse options that are wrong whatever the target (before anything is fetched)."""
    if opts.rounds is not None and opts.rounds < 1:
        raise UsageError(f"--rounds must be at least 1, got {opts.rounds}")
    if opts.timeout is not None and opts.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if opts.budget is not None and opts.budget < 0:
        raise UsageError("--budget must be zero or more US dollars")


def jury_config(settings: Settings, cfg: RepoConfig, target: Target, opts: RunOptions) -> JuryConfig:
    """The run's jury: reviewers, judge, refuter, limits and the agents' specs, from the merged
    configuration ``cfg`` of ``target`` and the options."""
    names, judge_name, n_rounds = resolve_jury(cfg, split_names(opts.reviewers), opts.judge, opts.rounds)
    check_options(opts)
    budget = opts.budget if opts.budget is not None else settings.budget
    if budget is not None and budget < 0:
        raise UsageError("--budget must be zero or more US dollars")
    if opts.publish and not target.url:
        raise UsageError(
            "--publish needs a PR/MR URL to publish to; a local branch has no PR (review its PR's URL)"
        )
    refuter, refuter_note = pick_refuter(cfg, names, judge_name, opts.refuter) if opts.refute else (None, "")
    return JuryConfig(
        reviewers=names,
        judge=judge_name,
        rounds=n_rounds,
        timeout=opts.timeout,
        push=opts.push if opts.push is not None else cfg.jury.push,
        publish=opts.publish,
        agents={
            n: cfg.agents[n] for n in dict.fromkeys([*names, judge_name, *([refuter] if refuter else [])])
        },
        alive_every=settings.alive_every,
        refute=opts.refute,
        refuter=refuter,
        refuter_forced=opts.refuter is not None,
        refute_rejections=opts.refute_rejections,
        checks=cfg.checks,
        task=opts.task,
        budget=budget,
        sandbox=cfg.sandbox,
        limits=cfg.limits,
        config_notes=[*cfg.notes, *([refuter_note] if refuter_note else [])],
    )


def first_events(target: Target, jury: JuryConfig) -> list[Event]:
    """The events every new run's log begins with; the target gets the run's unique id (``run_id``)."""
    target = target.model_copy(update={"judge": jury.judge, "run_id": uuid.uuid4().hex[:12]})
    return [TargetEvent(eid="target:0", target=target), JuryConfigEvent(eid="config:0", config=jury)]
