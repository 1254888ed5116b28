"""A new run's first events: what ``jury review`` and ``jury sweep`` both write before the coordinator's
first pass — the resolved target, and the jury configuration built from the merged configuration and the
run options.

Kept apart from the commands so a sweep builds a hundred runs' first events in one process, and a
single review builds its one the same way: whatever a run option means (a budget, a refuter, a round
cap), it means it alike for both.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from orchestrator.config import RepoConfig, Settings, resolve_jury
from orchestrator.domain import Event, JuryConfigEvent, RunResumed, TargetEvent
from orchestrator.errors import UsageError
from orchestrator.spec import TERMINAL_STATES, JuryConfig, Target
from orchestrator.store.base import LiveStore, PullHead, SweptStart, pull_head
from orchestrator.store.files import FileStore


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


# --- starting a run: the one service behind `jury review`, the console's resume, sweeps and schedules ---

Wake = Callable[[Sequence[str]], None]  # wakes the coordinators of runs (workers.runtime.wake, bound)
StartOutcome = Literal["started", "resumed", "held", "no-slug"]
SLUG_TRIES = 999  # suffixes tried for a slug: base, base-2 ... base-999


@dataclass
class StartRequest:
    """One run to start. A new run: ``slug`` is the name wanted (the first free of ``slug``, ``slug-2``
    ... is taken), ``events`` its first events (``first_events``), ``head`` its PR's head when it reviews
    a PR (``pr_head``), ``replace`` the ended run whose hold on that head it takes over. A resume
    (``resume``): ``slug`` is the run, brought back with a resume marker."""

    slug: str
    events: list[Event] = field(default_factory=list)
    head: PullHead | None = None
    replace: str | None = None
    resume: bool = False


@dataclass
class StartedRun:
    """What became of a ``StartRequest``: ``started``/``resumed`` (``slug``: the run, its coordinator
    woken), ``held`` (another run in flight holds the PR's head: ``holder``; nothing was written) or
    ``no-slug`` (no free name)."""

    slug: str | None
    outcome: StartOutcome
    holder: str | None = None

    @property
    def refusal(self) -> str:
        """Why nothing started, said to a person."""
        if self.outcome == "held":
            return (
                f"run {self.holder} is already reviewing this PR's head: at most one run per PR head is "
                f"in flight (follow it with `jury show {self.holder}`, or cancel it first)"
            )
        return "no free run name" if self.outcome == "no-slug" else ""


def pr_head(target: Target, forge_hosts: Sequence[str] = ()) -> PullHead | None:
    """The PR head ``target`` reviews (forge, repository, number, head sha), keyed as a sweep keys it; None
    for a local branch."""
    if not target.url or not target.head:
        return None
    from orchestrator.target import parse_pr_url

    pr = parse_pr_url(target.url, forge_hosts)
    return pull_head(pr.forge, pr.project, int(pr.number), target.head)


def start_run(
    store: LiveStore,
    request: StartRequest,
    wake: Wake,
    *,
    state_dir: Path,
    claim_in: FileStore | None = None,
    recorded: Callable[[str], object] | None = None,
    forge_hosts: Sequence[str] = (),
) -> StartedRun:
    """Start (or resume) one run: ``jury review``, the console's resume. A PR run's head is looked up
    first: held by a run in flight, nothing starts (``held``: at most one run in flight per PR head,
    whoever started either); held by an ended run (or one gone from the store), the new run takes the
    head over. Then ``start_runs``. ``claim_in``: the state directory's files where the slug is claimed
    too; ``recorded``: what the caller does with the run once its events are written, before its
    coordinator is woken (the CLI mirrors it into the files record). A resume reads a run the live store
    lost back from ``claim_in``."""
    if request.resume:
        return _resume(store, request.slug, wake, files=claim_in, recorded=recorded, forge_hosts=forge_hosts)
    if request.head is not None and request.replace is None:
        holder = _holder(store, request.head)
        if holder is not None and holder[1]:
            return StartedRun(holder[0], "held", holder=holder[0])
        request.replace = holder[0] if holder is not None else None
    started = start_runs(store, [request], wake, state_dir=state_dir, claim_in=claim_in, recorded=recorded)[0]
    if started.outcome == "started" and started.slug and request.head is not None:
        supersede_earlier(store, started.slug, request.head, wake)
    return started


def supersede_earlier(store: LiveStore, slug: str, head: PullHead, wake: Wake) -> list[str]:
    """Cancel the PR's runs still in flight that started before ``slug`` (for an earlier head: only one
    run holds a head), as a sweep does when a PR's head moved (``workers.fleet.sweep._supersede``), so a
    PR has one run in flight whoever started them. Returns the runs cancelled, their coordinators woken."""
    from orchestrator.cancel import cancel_run

    runs = store.sweep_lookup([head])[0].runs  # newest first: ours, then the ones it supersedes
    earlier = runs[runs.index(slug) + 1 :] if slug in runs else []
    states = store.run_states(earlier)
    cancelled = []
    reason = f"superseded by {slug}: the PR's head moved to {head.sha}"
    for run in (r for r in earlier if states.get(r) not in (None, *TERMINAL_STATES)):
        done = cancel_run(store, run, who="jury", reason=reason, superseded_by=slug)
        if done.outcome == "cancelled":
            cancelled.append(run)
    wake(cancelled)
    return cancelled


def _holder(store: LiveStore, head: PullHead) -> tuple[str, bool] | None:
    """The run that holds ``head`` and whether it is in flight; None when none holds it."""
    holder = store.sweep_lookup([head])[0].holder
    if holder is None:
        return None
    state = store.run_states([holder]).get(holder)
    return holder, state is not None and state not in TERMINAL_STATES


def start_runs(
    store: LiveStore,
    requests: Sequence[StartRequest],
    wake: Wake,
    *,
    state_dir: Path,
    claim_in: FileStore | None = None,
    recorded: Callable[[str], object] | None = None,
) -> list[StartedRun]:
    """Start new runs, each atomically in the store, then wake their coordinators in one batch (a sweep's
    hundred runs: one pipeline, one broker connection). Each gets the first free slug of its name (none
    of this batch, of ``state_dir``'s records, of ``claim_in``'s claims or of the store); a PR run claims
    its head with its start (``LiveStore.start_swept``), so two starters at once never start two runs of
    one head: the second is ``held``. A slug claimed in ``claim_in`` for a run that did not start is
    given back."""
    results: list[StartedRun | None] = [None] * len(requests)
    taken: set[str] = set()
    todo = list(range(len(requests)))
    try:
        for _ in range(20):
            if not todo:
                break
            slugs = {i: _free_slug(requests[i].slug, taken, state_dir, claim_in) for i in todo}
            todo = _start_batch(store, requests, slugs, results, claim_in)
    except BaseException:
        if claim_in is not None:
            for slug in taken - {r.slug for r in results if r is not None and r.outcome == "started"}:
                claim_in.unclaim(slug)
        raise
    done = [r or StartedRun(None, "no-slug") for r in results]
    started = [r.slug for r in done if r.outcome == "started" and r.slug]
    if recorded is not None:
        for slug in started:
            recorded(slug)
    wake(started)
    return done


def _free_slug(base: str, taken: set[str], state_dir: Path, claim_in: FileStore | None) -> str | None:
    """The first of ``base``, ``base-2`` ... that this batch has not taken, no record of ``state_dir``
    has, and ``claim_in`` (when given) claims now."""
    for i in range(1, SLUG_TRIES + 1):
        slug = base if i == 1 else f"{base}-{i}"
        if slug in taken or (claim_in is None and (state_dir / "runs" / slug).exists()):
            continue
        if claim_in is not None and not claim_in.create_run(slug):
            continue
        taken.add(slug)
        return slug
    return None


def _start_batch(
    store: LiveStore,
    requests: Sequence[StartRequest],
    slugs: dict[int, str | None],
    results: list[StartedRun | None],
    claim_in: FileStore | None,
) -> list[int]:
    """One try at starting the runs of ``slugs`` (request index -> slug): PR runs in one ``start_swept``,
    the others each registered, logged and activated. Returns the indexes whose slug was taken in the
    store meanwhile (to try again with the next suffix)."""
    again: list[int] = []
    named = [i for i, slug in slugs.items() if slug is not None]
    prs = [i for i in named if requests[i].head is not None]
    starts = [_swept(requests[i], slugs[i] or "") for i in prs]
    outcomes = {i: (c.outcome, c.holder) for i, c in zip(prs, store.start_swept(starts), strict=True)}
    for i in (i for i in named if requests[i].head is None):
        slug = slugs[i] or ""
        registered = store.create_run(slug)
        if registered:
            store.append(slug, requests[i].events)
            store.activate(slug)  # the reaper wakes it again should the first wake be lost
        outcomes[i] = ("started" if registered else "taken", None)
    for i, (outcome, holder) in outcomes.items():
        slug = slugs[i] or ""
        if outcome == "started":
            results[i] = StartedRun(slug, "started")
        elif outcome == "claimed":
            results[i] = StartedRun(holder, "held", holder=holder)
        else:
            again.append(i)
        if claim_in is not None and outcome != "started":
            claim_in.unclaim(slug)
    for i in (i for i, slug in slugs.items() if slug is None):
        results[i] = StartedRun(None, "no-slug")
    return again


def _swept(request: StartRequest, slug: str) -> SweptStart:
    assert request.head is not None
    return SweptStart(request.head, slug, request.events, request.replace)


def _resume(
    store: LiveStore,
    slug: str,
    wake: Wake,
    *,
    files: FileStore | None,
    recorded: Callable[[str], object] | None,
    forge_hosts: Sequence[str],
) -> StartedRun:
    """Bring a stopped run back (``jury review --resume``, the console): its log into the live store when
    the store lost it (from ``files``), a resume marker, its cancel flag taken down (the cancel it may
    have ended by is spent: the agents it starts now must run), activated, its coordinator woken. A
    converged run is refused (nothing to resume); a PR run whose head another run in flight holds now
    is ``held``."""
    from orchestrator.run_reader import read_state

    state = read_state(store, slug)[0] if store.exists(slug) else None
    if state is None or state.events == 0:
        if files is None or not files.exists(slug) or not (kept := files.read(slug)):
            raise UsageError(f"no run named {slug} (see `jury runs`)")
        store.create_run(slug)
        store.append(slug, kept)  # the files record back into the live store
        state = read_state(store, slug)[0]
    if state.state == "converged":
        raise UsageError(f"run {slug} already converged; nothing to resume")
    head = pr_head(state.target, forge_hosts)
    holder = _holder(store, head) if head is not None else None
    if holder is not None and holder[0] != slug and holder[1]:
        return StartedRun(holder[0], "held", holder=holder[0])
    epoch = state.epoch + 1
    store.create_run(slug)  # registered again if its index entry expired
    store.clear_cancel_flag(slug)
    store.append(
        slug,
        [
            RunResumed(eid=f"resume:{epoch}", epoch=epoch, note=f"resumed from {state.state}"),
            TargetEvent(eid=f"state:review:e{epoch}", target=Target(state="review", state_note=None)),
        ],
    )
    if recorded is not None:
        recorded(slug)
    store.activate(slug)
    wake([slug])
    return StartedRun(slug, "resumed")
