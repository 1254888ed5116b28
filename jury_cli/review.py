"""``jury review`` and ``jury demo``: a new run's first events (target, configuration), or a stopped run's
resume marker, appended to the live store; the coordinator kicked; the run followed until it ends."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from jury_cli.backend import Backend, backend
from jury_cli.context import DirOpt, RefuteOpt, RefuteRejectionsOpt, RefuterOpt, err, out, settings_for
from jury_cli.progress import Progress, summary
from orchestrator.config import Settings, load_config, operator_config_file
from orchestrator.decide import awaiting_publish, publish_key, wants_publish
from orchestrator.errors import StoreError, UsageError
from orchestrator.fold import RunState, apply, tick
from orchestrator.spec import TERMINAL_STATES
from orchestrator.start import RunOptions, StartRequest, first_events, jury_config, pr_head, start_run
from orchestrator.store.base import RunVanished


def new_run(
    settings: Settings, what: str, opts: RunOptions, extra_agents: dict[str, Any] | None = None
) -> StartRequest:
    """What ``start_run`` starts for ``jury review WHAT``: the slug wanted, the first events (target,
    configuration) and, for a PR URL, the PR's head (claimed with the run)."""
    from orchestrator.target import make_slug, repo_config, resolve

    target = resolve(
        what, branch=opts.branch, trunk=opts.trunk, state_dir=settings.dir, forge_hosts=settings.forge_hosts
    )
    # The repository's jury.toml from the trunk side, cut down to what it may set; the operator's file last.
    cfg = load_config(repo_config(target), operator_config_file(settings, opts.config))
    if extra_agents:
        cfg.agents.update(extra_agents)
    jury = jury_config(settings, cfg, target, opts)
    base = make_slug(target.repo or "repo", target.id or "run", target.attempt or "")
    return StartRequest(base, first_events(target, jury), head=pr_head(target, settings.forge_hosts))


STORE_PATIENCE = 120.0  # seconds ``follow`` waits for an unreachable store before giving up


def follow(b: Backend, slug: str, console: Console, origin: str | None = None) -> RunState:
    """Show the run until it ends; returns the final fold. RunVanished when its log leaves the store
    (deleted, or deleted and begun again by a late writer; ``origin``: the first entry's id when the log
    was written): nothing would ever end it."""
    state = RunState(slug=slug)
    seen, outage, origin = 0, None, origin or b.store.origin(slug)
    with Progress(console, slug) as progress:
        while True:
            try:
                new = b.store.wait(slug, after=seen, timeout=1.0)
                gone = origin is None or b.store.origin(slug) != origin
            except StoreError as exc:  # Redis restarting: wait for it, for a while
                outage = outage or time.monotonic()
                if time.monotonic() - outage > STORE_PATIENCE:
                    raise StoreError(
                        f"the run's store has not answered for {STORE_PATIENCE:.0f}s: {exc}; "
                        f"the run is kept: jury review --resume {slug}"
                    ) from exc
                time.sleep(1.0)
                continue
            outage = None
            if gone:
                raise RunVanished(slug, b.files.root / "runs" / slug)
            seen += len(new)
            for e in new:
                apply(state, e)
            for t in b.store.alive(slug):  # liveness ticks are kept beside the log, not in it
                tick(state, t)
            progress.update(state, new)
            if state.state in TERMINAL_STATES and not awaiting_publish(state):
                return state  # ended, and published when it was to be


def exit_code(state: RunState) -> int:
    """0: the run converged and, when it was to be published (``--publish``), publishing its end
    succeeded; 1: it ended otherwise, or it converged but publishing failed (the summary says why)."""
    if state.state != "converged":
        return 1
    return 1 if publish_failed(state) else 0


def publish_failed(state: RunState) -> bool:
    """The run was to be published and the record of publishing its end is a failure."""
    if not wants_publish(state):
        return False
    key = publish_key(state)
    tries = [p for p in state.published if p.get("key") == key]
    return bool(tries) and not tries[-1].get("ok")


def run_review(
    settings: Settings, request: StartRequest, *, detach: bool, concurrency: int, console: Console
) -> tuple[int, str]:
    """Start (or resume) the run through ``orchestrator.start.start_run`` and follow it until it ends
    (``detach``: print its slug and return). A PR whose head a run in flight reviews already starts
    nothing: the command is refused, naming that run. Returns the exit code and the run's slug."""
    with ExitStack() as stack:
        b = stack.enter_context(backend(settings, concurrency))
        if detach and b.embedded:
            raise UsageError("--detach needs JURY_REDIS_URL and workers started with `jury worker`")
        started = start_run(
            b.store,
            request,
            b.waker(),
            state_dir=settings.dir,
            # Claimed in the state directory too: the commands started together on it (each with its own
            # private Redis) never share a slug, nor so a record.
            claim_in=b.files,
            recorded=b.sync,  # the files record first, then the coordinator's first pass
            forge_hosts=settings.forge_hosts,
        )
        if started.slug is None or started.outcome not in ("started", "resumed"):
            raise UsageError(started.refusal)
        slug = started.slug
        if detach:
            console.print(slug)
            return 0, slug
        # The log's first entry, read before the run is named: whoever acts on the name (a test deleting
        # the run, a late writer) acts after it, so the follow ends when the log is replaced.
        origin = b.store.origin(slug)
        console.print(f"run {slug}" + (" (embedded Redis and local workers)" if b.embedded else ""))
        try:
            follow(b, slug, console, origin)
        except KeyboardInterrupt:
            b.sync(slug)
            err.print(f"interrupted; the run is kept. Continue it with: jury review --resume {slug}")
            return 1, slug
        state = b.sync(slug)
    summary(console, state, where=str(settings.dir / "runs" / slug))
    return exit_code(state), slug


def review(
    target: Annotated[str | None, typer.Argument(help="A local repository path or a PR/MR URL.")] = None,
    branch: Annotated[str | None, typer.Option(help="Branch to review (local repositories).")] = None,
    trunk: Annotated[str | None, typer.Option(help="Trunk to diff against (default: the remote's).")] = None,
    reviewer: Annotated[str | None, typer.Option(help="Reviewers, comma-separated.")] = None,
    judge: Annotated[str | None, typer.Option(help="The judge agent.")] = None,
    rounds: Annotated[int | None, typer.Option(help="Round cap (default 10).")] = None,
    timeout: Annotated[float | None, typer.Option(help="Wall-clock seconds per agent run.")] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="The operator's config file (default $JURY_CONFIG, else ~/.jury/config.toml)."
        ),
    ] = None,
    push: Annotated[
        bool | None,
        typer.Option(
            "--push/--no-push",
            help="Push accepted fixes: to the reviewed branch, or a PR's jury/SLUG branch "
            "(default: the operator's [jury] push, else no).",
            show_default=False,
        ),
    ] = None,
    publish: Annotated[
        bool, typer.Option(help="Publish the run to its PR when it ends: a review and the `jury` check.")
    ] = False,
    refute: RefuteOpt = True,
    refuter: RefuterOpt = None,
    refute_rejections: RefuteRejectionsOpt = False,
    task: Annotated[
        str | None, typer.Option(help="What the change should do; commands named in it are checks.")
    ] = None,
    budget: Annotated[
        float | None, typer.Option(help="USD ceiling for the run (default $JURY_BUDGET).")
    ] = None,
    detach: Annotated[bool, typer.Option(help="Enqueue and print the slug (needs JURY_REDIS_URL).")] = False,
    resume: Annotated[str | None, typer.Option("--resume", help="Continue the run with this slug.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Local worker concurrency (embedded mode).")] = 4,
    dir: DirOpt = None,
) -> None:
    """Review a branch or a PR with a jury of agents."""
    settings = settings_for(dir)
    if resume:
        if target:
            raise UsageError("give either a target or --resume SLUG, not both")
        request = StartRequest(resume, resume=True)
        raise typer.Exit(
            run_review(settings, request, detach=detach, concurrency=concurrency, console=out)[0]
        )
    if not target:
        raise UsageError("name what to review: a repository path (with --branch) or a PR URL")
    opts = RunOptions(
        branch=branch,
        trunk=trunk,
        reviewers=reviewer,
        judge=judge,
        rounds=rounds,
        timeout=timeout,
        config=config,
        push=push,
        refute=refute,
        refuter=refuter,
        refute_rejections=refute_rejections,
        task=task,
        budget=budget,
        publish=publish,
    )
    request = new_run(settings, target, opts)
    raise typer.Exit(run_review(settings, request, detach=detach, concurrency=concurrency, console=out)[0])


def demo(dir: DirOpt = None) -> None:
    """Review a small sample repository with bundled scripted agents (no real agents, no Redis needed)."""
    from orchestrator.demo import demo_agents, make_sample_repo

    settings = settings_for(dir)
    repo = make_sample_repo(settings.dir / "demo")
    out.print(
        "Jury demo: the agents here are SCRIPTED stand-ins (no model is called).\n"
        f"  sample repository: {repo} (branch feature, with a real bug, against main)\n"
        "  reviewers: demo-finder (finds the bug while it is there), demo-quiet (finds nothing)\n"
        "  judge: demo-judge (writes a real fix and a real regression test)",
        markup=False,
    )
    opts = RunOptions(
        branch="feature",
        trunk="main",
        reviewers="demo-finder,demo-quiet",
        judge="demo-judge",
        rounds=4,
        timeout=120,
        refuter="demo-refuter",
    )
    request = new_run(settings, str(repo), opts, extra_agents=demo_agents())
    code, slug = run_review(settings, request, detach=False, concurrency=4, console=out)
    if code == 0:
        out.print(f"  the fix: git -C {repo} log --stat jury/{slug}", markup=False)
    else:
        out.print(
            "  the demo did not converge: `jury doctor` says whether this machine can run Jury", markup=False
        )
    raise typer.Exit(code)
