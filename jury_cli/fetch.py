"""``jury fetch SLUG... [--into PATH]``: a run's fixes as the local branch ``jury/<slug>``.

A fleet keeps no shared disk, so the branch a run built lives in the mirror of whichever host integrated
it; what every host can read is the store. This command rebuilds the branch in any clone from there: the
reviewed head fetched from the forge (a PR URL's) or the reviewed repository (a local target's), then each
fix committed from its patch (the run's artifacts) exactly as the run did (deterministic commits), every
sha checked against the one the run recorded before the branch is set. Without ``JURY_REDIS_URL`` (a run
of the embedded mode) the run is read from this host's files record and its commits from this host's
mirror, where the run built them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jury_cli.backend import reading_store
from jury_cli.context import DirOpt, out, settings_for
from orchestrator.config import Settings
from orchestrator.errors import GitError, JuryError, UsageError
from orchestrator.git import git, rev_parse
from orchestrator.run_reader import fold_named
from orchestrator.store.base import EventStore
from orchestrator.target import fetch_mirror, mirror_path, parse_pr_url, pr_ref, remote_url
from workers.isolation.mirror import MirrorError, ensure
from workers.runtime.context import jury_branch


def fetch(
    slugs: Annotated[list[str], typer.Argument(help="The runs whose fixes to fetch.", metavar="SLUG...")],
    into: Annotated[
        Path | None, typer.Option("--into", help="The git repository to make the branch in (default: here).")
    ] = None,
    dir: DirOpt = None,
) -> None:
    """Make each run's fixes the local branch jury/SLUG, rebuilt from the fleet's store and checked."""
    settings = settings_for(dir)
    path = (into or Path.cwd()).expanduser().resolve()
    try:
        git(["rev-parse", "--absolute-git-dir"], path)
    except (GitError, OSError):
        raise UsageError(f"--into {path}: not a git repository (clone the reviewed one first)") from None
    store = reading_store(settings)  # the fleet's Redis; without one, this host's files record
    for slug in slugs:
        fetch_one(settings, store, slug, path)


def fetch_one(settings: Settings, store: EventStore, slug: str, path: Path) -> None:
    """Rebuild run ``slug``'s ``jury/<slug>`` in the repository ``path``."""
    record = settings.dir if settings.redis_url else None  # None: ``store`` is the files record itself
    state = fold_named(store, slug, record)  # unknown or vanished: a clear error
    fixes = [c for c in state.commits if not c.pushed]
    if not fixes:
        raise UsageError(f"run {slug} has no fixes to fetch (it is {state.state})")
    tip = fixes[-1].sha
    t = state.target
    if t.url:
        pr = parse_pr_url(t.url, settings.forge_hosts)
        source, ref = remote_url(pr), pr_ref(pr)
        own = mirror_path(settings.dir, pr)
        if (own / "HEAD").is_file():  # this host's mirror (an embedded run built the branch there)
            fetch_mirror(path, [tip], check=False, source=str(own))
    elif t.path:
        source, ref = t.path, None  # a local target: its repository, on the host that reviewed it
    else:
        raise UsageError(f"run {slug} names no repository to fetch its head from")
    try:
        ensure(
            path, source, ref, [tip], lambda: store.read(slug), lambda name: store.get_artifact(slug, name)
        )
    except MirrorError as exc:
        raise JuryError(f"run {slug}: {exc}") from None
    branch = jury_branch(slug)
    try:
        existing: str | None = rev_parse(path, f"refs/heads/{branch}")
    except GitError:
        existing = None
    if existing not in (None, tip):
        raise UsageError(
            f"{path} already has {branch} at {str(existing)[:12]}, not the run's {tip[:12]}: "
            "delete that branch or fetch --into another clone"
        )
    git(["update-ref", f"refs/heads/{branch}", tip], path)
    out.print(
        f"{branch} at {tip[:12]}: {len(fixes)} fix(es) on {str(t.head)[:12]}, as the run recorded, in {path}",
        markup=False,
    )
