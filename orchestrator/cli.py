"""The ``jury`` command.

Exit codes: 0 converged (or the command did what was asked), 1 a run ended ``human``/``failed``, or a
failure at run time, 2 a usage or configuration error.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import structlog
import typer
from rich.console import Console
from rich.table import Table

from orchestrator import logs
from orchestrator.actions import queues as action_queues
from orchestrator.config import (
    RepoConfig,
    Settings,
    load_config,
    load_settings,
    operator_config_file,
    resolve_jury,
)
from orchestrator.domain import (
    TERMINAL_STATES,
    Event,
    JuryConfig,
    JuryConfigEvent,
    RunResumed,
    Target,
    TargetEvent,
)
from orchestrator.errors import JuryError, StoreError, UsageError
from orchestrator.fold import RunState, apply, fold
from orchestrator.progress import Progress, summary
from orchestrator.store.base import EventStore, RunVanished, read_run
from orchestrator.store.files import FileStore, mirror

if TYPE_CHECKING:
    from orchestrator.store.redis import RedisStore

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Jury: a code jury of AI agents.",
)
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, soft_wrap=True)
log = structlog.get_logger()

DirOpt = Annotated[Path | None, typer.Option("--dir", help="State directory (default $JURY_DIR or ~/.jury).")]


def settings_for(dir_: Path | None) -> Settings:
    settings = load_settings()
    if dir_ is not None:
        settings = settings.model_copy(update={"dir": dir_.expanduser().resolve()})
    logs.configure(settings.log_level if os.environ.get("JURY_LOG_LEVEL") else "WARNING", settings.log_json)
    return settings


# --- where runs live -------------------------------------------------------------------------


@dataclass
class Backend:
    """The live store of a run and how to reach its workers."""

    store: RedisStore
    files: FileStore
    settings: Settings
    celery: Any
    embedded: bool

    def kick(self, slug: str) -> None:
        self.celery.send_task("jury.coordinate", args=[slug])

    def sync(self, slug: str) -> RunState:
        """Mirror the live log into the files under --dir and rewrite run.json."""
        return mirror(self.store, self.files, slug)


@contextmanager
def backend(settings: Settings, concurrency: int = 4) -> Iterator[Backend]:
    """The shared Redis of JURY_REDIS_URL, or a private Redis with local workers for this command."""
    from orchestrator.store.redis import from_url as redis_store
    from workers.app import make_app
    from workers.embedded import EmbeddedRedis, LocalWorkers

    files = FileStore(settings.dir)
    if settings.redis_url:
        store = redis_store(settings.redis_url)
        yield Backend(store, files, settings, make_app(settings), embedded=False)
        return
    with EmbeddedRedis(settings.dir) as url:
        local = settings.model_copy(update={"redis_url": url})
        with LocalWorkers(url, settings.dir, concurrency=concurrency):
            yield Backend(redis_store(url), files, local, make_app(local), embedded=True)


def reading_store(settings: Settings) -> EventStore:
    """Where ``runs`` and ``show`` read: the shared Redis when JURY_REDIS_URL is set, else the files."""
    if settings.redis_url:
        from orchestrator.store.redis import from_url as redis_store

        return redis_store(settings.redis_url)
    return FileStore(settings.dir)


# --- review ----------------------------------------------------------------------------------


def split_names(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [n.strip() for n in value.split(",") if n.strip()]


@dataclass
class RunOptions:
    """What ``jury review`` was asked for, beyond the target."""

    branch: str | None = None
    trunk: str | None = None
    reviewers: str | None = None
    judge: str | None = None
    rounds: int | None = None
    timeout: float | None = None
    config: Path | None = None
    push: bool = False
    refute: bool = True
    refuter: str | None = None
    refute_rejections: bool = False
    task: str | None = None
    budget: float | None = None


def pick_refuter(
    cfg: RepoConfig, reviewers: list[str], judge: str, forced: str | None
) -> tuple[str | None, str]:
    """The second opinion's agent: the user's choice, else a juror of another family than the judge."""
    from orchestrator.refute.families import refuter_for

    if forced is not None and forced not in cfg.agents:
        raise UsageError(f"--refuter: unknown agent '{forced}' (known: {', '.join(sorted(cfg.agents))})")
    choice = refuter_for(cfg.agents, [*reviewers, judge], judge, forced)
    return choice.agent, choice.reason


def new_run(
    settings: Settings, what: str, opts: RunOptions, extra_agents: dict[str, Any] | None = None
) -> tuple[str, list[Event]]:
    from orchestrator.target import make_slug, repo_config, resolve

    target = resolve(
        what, branch=opts.branch, trunk=opts.trunk, state_dir=settings.dir, forge_hosts=settings.forge_hosts
    )
    # The repository's jury.toml from the trunk side, cut down to what it may set; the operator's file last.
    cfg = load_config(repo_config(target), operator_config_file(settings, opts.config))
    if extra_agents:
        cfg.agents.update(extra_agents)
    names, judge_name, n_rounds = resolve_jury(cfg, split_names(opts.reviewers), opts.judge, opts.rounds)
    if opts.timeout is not None and opts.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    budget = opts.budget if opts.budget is not None else settings.budget
    if budget is not None and budget < 0:
        raise UsageError("--budget must be zero or more US dollars")
    if opts.push and target.url:
        raise UsageError(
            "--push needs the PR's branch name, which git alone cannot tell for a PR URL; "
            "review the branch locally to push"
        )
    refuter, _ = pick_refuter(cfg, names, judge_name, opts.refuter) if opts.refute else (None, "")
    jury = JuryConfig(
        reviewers=names,
        judge=judge_name,
        rounds=n_rounds,
        timeout=opts.timeout,
        push=opts.push,
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
        config_notes=cfg.notes,
    )
    base = make_slug(target.repo or "repo", target.id or "run", target.attempt or "")
    slug, i = base, 1
    while (settings.dir / "runs" / slug).exists():
        i += 1
        slug = f"{base}-{i}"
    target = target.model_copy(update={"judge": judge_name})
    return slug, [TargetEvent(eid="target:0", target=target), JuryConfigEvent(eid="config:0", config=jury)]


def resume_events(b: Backend, slug: str) -> list[Event]:
    """Bring a stopped run back: its log into the live store, then a resume marker."""
    events = b.store.read(slug) if b.store.exists(slug) else []
    if not events:
        events = b.files.read(slug) if b.files.exists(slug) else []
        if not events:
            raise UsageError(f"no run named {slug} (see `jury runs`)")
        b.store.append(slug, events)
    state = fold(events, slug)
    if state.state == "converged":
        raise UsageError(f"run {slug} already converged; nothing to resume")
    epoch = state.epoch + 1
    return [
        RunResumed(eid=f"resume:{epoch}", epoch=epoch, note=f"resumed from {state.state}"),
        TargetEvent(eid=f"state:review:e{epoch}", target=Target(state="review", state_note=None)),
    ]


def unique_slug(b: Backend, slug: str) -> str:
    """``slug`` with the first ``-N`` suffix no run of the shared store has yet."""
    for i in range(2, 1000):
        if b.store.create_run(candidate := f"{slug}-{i}"):
            return candidate
    raise JuryError(f"cannot find a free run name after {slug}-999")


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
            progress.update(state, new)
            if state.state in TERMINAL_STATES:
                return state


def exit_code(state: RunState) -> int:
    return 0 if state.state == "converged" else 1


def run_review(
    settings: Settings,
    slug: str,
    first: list[Event] | None,
    *,
    detach: bool,
    resume: bool,
    concurrency: int,
    console: Console,
) -> int:
    with backend(settings, concurrency) as b:
        if detach and b.embedded:
            raise UsageError("--detach needs JURY_REDIS_URL and workers started with `jury worker`")
        events = resume_events(b, slug) if resume else (first or [])
        if not b.store.create_run(slug) and not resume:
            slug = unique_slug(b, slug)  # another host took this slug in the same minute
        b.store.append(slug, events)
        origin = b.store.origin(slug)  # the log this command wrote: follow ends if it is replaced
        b.sync(slug)
        # Active from now on: the reaper kicks it again should this first kick be lost.
        b.store.activate(slug)
        b.kick(slug)
        if detach:
            console.print(slug)
            return 0
        console.print(f"run {slug}" + (" (embedded Redis and local workers)" if b.embedded else ""))
        try:
            follow(b, slug, console, origin)
        except KeyboardInterrupt:
            b.sync(slug)
            err.print(f"interrupted; the run is kept. Continue it with: jury review --resume {slug}")
            return 1
        state = b.sync(slug)
    summary(console, state, where=str(settings.dir / "runs" / slug))
    return exit_code(state)


@app.command()
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
    push: Annotated[bool, typer.Option(help="Push accepted fixes to the reviewed branch.")] = False,
    refute: Annotated[bool, typer.Option(help="Give settled claims a second opinion.")] = True,
    refuter: Annotated[
        str | None, typer.Option(help="The second opinion's agent (default: another family).")
    ] = None,
    refute_rejections: Annotated[
        bool, typer.Option(help="Also try to refute the judge's rejections.")
    ] = False,
    task: Annotated[
        str | None, typer.Option(help="What the change should do; commands named in it are checks.")
    ] = None,
    budget: Annotated[
        float | None, typer.Option(help="USD ceiling for the run (default $JURY_BUDGET).")
    ] = None,
    detach: Annotated[bool, typer.Option(help="Enqueue and print the slug (needs JURY_REDIS_URL).")] = False,
    resume: Annotated[str | None, typer.Option("--resume", help="Continue the run with this slug.")] = None,
    concurrency: Annotated[int, typer.Option(help="Local worker concurrency (embedded mode).")] = 4,
    dir: DirOpt = None,
) -> None:
    """Review a branch or a PR with a jury of agents."""
    settings = settings_for(dir)
    if resume:
        if target:
            raise UsageError("give either a target or --resume SLUG, not both")
        raise typer.Exit(
            run_review(
                settings, resume, None, detach=detach, resume=True, concurrency=concurrency, console=out
            )
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
    )
    slug, events = new_run(settings, target, opts)
    raise typer.Exit(
        run_review(settings, slug, events, detach=detach, resume=False, concurrency=concurrency, console=out)
    )


@app.command()
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
    slug, events = new_run(settings, str(repo), opts, extra_agents=demo_agents())
    code = run_review(settings, slug, events, detach=False, resume=False, concurrency=4, console=out)
    out.print(f"  the fix: git -C {repo} log --stat jury/{slug}", markup=False)
    raise typer.Exit(code)


# --- reading runs ----------------------------------------------------------------------------


@app.command()
def runs(dir: DirOpt = None) -> None:
    """List runs: slug, state, rounds, findings, open."""
    store = reading_store(settings_for(dir))
    slugs = store.runs()
    if not slugs:
        out.print("no runs yet")
        return
    for slug in slugs:
        try:
            s = fold(store.read(slug), slug)
            if s.events == 0:
                raise ValueError("no readable events")
        except Exception as exc:  # one unreadable run never blanks the list
            out.print(f"{slug}  skipped: {exc}", markup=False)
            continue
        n_open = len(s.open_findings())
        out.print(
            f"{slug}  {s.state}  rounds={len(s.rounds)}  findings={len(s.findings)}  open={n_open}",
            markup=False,
        )


@app.command()
def show(
    slug: str,
    as_json: Annotated[bool, typer.Option("--json", help="Print the folded run state as JSON.")] = False,
    dir: DirOpt = None,
) -> None:
    """Show one run."""
    settings = settings_for(dir)
    store = reading_store(settings)
    s = fold(read_run(store, slug, settings.dir if settings.redis_url else None), slug)  # gone: exit 1
    if as_json:
        sys.stdout.write(json.dumps(s.wire(), indent=2) + "\n")
        return
    summary(out, s, where=str(settings.dir / "runs" / slug))


@app.command()
def agents(
    config: Annotated[Path | None, typer.Option("--config", help="The operator's config file.")] = None,
    repo: Annotated[
        Path | None, typer.Option(help="A repository whose trunk-side jury.toml applies.")
    ] = None,
) -> None:
    """Which catalog agents are installed, with their roles and install hints."""
    from orchestrator.target import checkout_config

    settings = load_settings()
    cfg = load_config(checkout_config(repo) if repo else None, operator_config_file(settings, config))
    table = Table(box=None, header_style="bold")
    for col in ("agent", "installed", "roles", "model", "install"):
        table.add_column(col)
    for name, spec in sorted(cfg.agents.items()):
        if spec.kind == "cli":
            exe = spec.argv[0]
            found = shutil.which(exe) or (exe if Path(exe).is_file() else None)
        elif spec.kind == "check":
            exe = (spec.command or "").split()[0] if spec.command else ""
            found = shutil.which(exe) or (exe if exe and Path(exe).is_file() else None)
        else:
            found = spec.base_url  # an endpoint: nothing to install
        roles = "reviewer, judge" if spec.can_judge else "reviewer"
        table.add_row(name, "yes" if found else "no", roles, spec.model or "-", spec.install or "-")
    out.print(table)


@app.command()
def cancel(slug: str, dir: DirOpt = None) -> None:
    """Cancel a run: its running agents are killed and it ends ``cancelled``."""
    settings = settings_for(dir)
    sock = settings.dir / "redis" / "redis.sock"
    if not settings.redis_url and sock.exists():  # a run on this machine's embedded Redis
        settings = settings.model_copy(update={"redis_url": f"unix://{sock}"})
    if not settings.redis_url:
        raise UsageError(
            "no Redis to reach the run through: set JURY_REDIS_URL, or cancel while the "
            "run's `jury review` is running on this machine"
        )
    from orchestrator.domain import RunCancel
    from orchestrator.store.redis import from_url as redis_store
    from workers.app import make_app

    store = redis_store(settings.redis_url)
    if not store.exists(slug):
        raise UsageError(f"no run named {slug} (see `jury runs`)")
    store.set_cancel_flag(slug)
    store.append(slug, [RunCancel(eid="cancel", who=os.environ.get("USER", "user"))])
    make_app(settings).send_task("jury.coordinate", args=[slug])
    out.print(f"cancelling {slug}", markup=False)


@app.command()
def refute(
    claim: Annotated[str, typer.Option(help="The claim to try to refute.")],
    repo: Annotated[Path, typer.Option(help="The repository the claim is about.")] = Path("."),
    task: Annotated[str | None, typer.Option(help="The task text; commands named in it are signals.")] = None,
    command: Annotated[
        list[str] | None, typer.Option(help="A test, lint, typecheck or build command.")
    ] = None,
    refuter: Annotated[str | None, typer.Option(help="The refuting agent (default: another family).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="The operator's config file.")] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Wall-clock seconds for each command and the agent.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the three-state record as JSON.")] = False,
    dir: DirOpt = None,
) -> None:
    """The second opinion on its own. Exit 1 only on a concrete refutation."""
    from orchestrator.target import checkout_config
    from workers.second_opinion import second_opinion

    settings = settings_for(dir)
    if not repo.is_dir():
        raise UsageError(f"no such directory: {repo}")
    cfg = load_config(checkout_config(repo), operator_config_file(settings, config))
    record = second_opinion(
        settings,
        cfg,
        repo.resolve(),
        claim=claim,
        task=task,
        commands=command or [],
        refuter=refuter,
        timeout=timeout,
    )
    if as_json:
        sys.stdout.write(record.model_dump_json(indent=2) + "\n")
    elif not record.ran:
        out.print(f"not run: {record.skipped_reason}", markup=False)
    else:
        who = f"{record.reviewer_agent} ({record.reviewer_model or 'model unknown'}"
        who += ", independent)" if record.independent else ", NOT independent)"
        out.print(f"{record.outcome}: {record.reason}\n  by {who}", markup=False)
    raise typer.Exit(1 if record.outcome == "refuted" else 0)


@app.command()
def worker(
    queues: Annotated[str, typer.Option(help="Queues to consume.")] = ",".join(action_queues()),
    concurrency: Annotated[int | None, typer.Option(help="Tasks at once.")] = None,
    pool: Annotated[str, typer.Option(help="Celery pool: threads or prefork.")] = "threads",
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
    beat: Annotated[
        bool, typer.Option(help="Also run the reaper's schedule (run exactly one per fleet).")
    ] = False,
) -> None:
    """Run a worker against the shared Redis of JURY_REDIS_URL."""
    settings = settings_for(None)
    if not settings.redis_url:
        raise UsageError("set JURY_REDIS_URL to the shared Redis (e.g. redis://host:6379/0) to run a worker")
    from workers.app import QUEUES, make_app

    unknown = set(queues.split(",")) - set(QUEUES)
    if unknown:
        raise UsageError(f"unknown queue(s) {', '.join(sorted(unknown))}; known: {', '.join(QUEUES)}")
    celery = make_app(settings)
    argv = [
        "worker",
        "-Q",
        queues,
        "-c",
        str(concurrency or settings.worker_concurrency),
        "-P",
        pool,
        "-l",
        loglevel,
        "--without-gossip",
        "--without-mingle",
    ]
    celery.worker_main([*argv, "--beat"] if beat else argv)


@app.command()
def doctor(
    config: Annotated[Path | None, typer.Option("--config", help="The operator's config file.")] = None,
    dir: DirOpt = None,
) -> None:
    """Whether this machine can run Jury: git, Redis, bubblewrap, user namespaces, and the sandbox with
    the operator's [sandbox] settings. Exit 0 when it can, 1 with the reason otherwise."""
    from workers.doctor import diagnose

    settings = settings_for(dir)
    report = diagnose(settings, load_config(None, operator_config_file(settings, config)).sandbox)
    for c in report.checks:
        mark = "ok" if c.ok else ("--" if c.ok is None else "FAIL")
        out.print(f"{c.what:<10} {mark:<5} {c.text}", markup=False)
    for note in report.notes:
        out.print(f"note: {note}", markup=False)
    if report.problems:
        err.print(f"jury doctor: {'; '.join(report.problems)}", markup=False, highlight=False)
        raise typer.Exit(1)


def usage_error_types() -> tuple[type[Any], ...]:
    """The classes of click's usage errors: typer may vendor its own click, so both are looked up.

    ``typer.BadParameter`` derives from the ``ClickException`` that typer really raises, whichever
    click that is; the standalone ``click`` package's class is added when it is installed.
    """
    found = {cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "ClickException"}
    try:
        import click

        found.add(click.ClickException)
    except ImportError:
        pass
    return tuple(found)


def main() -> None:
    try:
        code = app(prog_name="jury", standalone_mode=False)  # click returns the code of a typer.Exit here
    except JuryError as exc:
        err.print(f"jury: {exc}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        err.print("jury: interrupted")
        sys.exit(130)
    except usage_error_types() as exc:
        exc.show()
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
