"""A host's own mirror of a remote target, so a fleet needs no shared disk.

A run of a PR URL names its repository by URL, never by a path another host could read: each host keeps
a bare mirror of it under its own ``JURY_DIR`` (``orchestrator.target.mirror_path``: keyed by the remote's
host and project) and fetches into it on demand, under the mirror's lock (``repo_lock``), whatever its
threads and processes ask at once. A commit a task needs is either the forge's (the PR head, its
merge-base: fetched by the PR's ref, else by id) or one of the run's fixes: those travel as patches in the
store (``patches/...`` artifacts), and since commits are deterministic (``commit_deterministic``: fixed
identity and dates) the ``commit.pushed`` event's parent, patch and message rebuild the very same sha on
any host, checked against the one recorded. ``jury fetch`` does the same in a user's clone.

A local target (a path) is left as it is: its path is the repository, and only the host holding it can
work on it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import structlog

from orchestrator.domain import CommitPushed, Event
from orchestrator.errors import GitError, JuryError
from orchestrator.git import git, repo_lock
from orchestrator.spec import Target
from orchestrator.target import (
    fetch_mirror,
    mirror_locks,
    mirror_path,
    open_mirror,
    parse_pr_url,
    pr_ref,
    remote_url,
)
from workers.isolation.worktree import commit_deterministic

log = structlog.get_logger()

Patches = Callable[[str], bytes | None]  # an artifact name -> its bytes (the store's get_artifact)


class MirrorError(JuryError):
    """A commit a task needs can be neither fetched nor rebuilt: it names the commit and why."""


def has_commit(repo: Path, sha: str) -> bool:
    """Whether ``repo`` holds the commit ``sha``."""
    try:
        git(["cat-file", "-e", f"{sha}^{{commit}}"], repo)
    except GitError:
        return False
    return True


def fixes_of(events: Iterable[Event]) -> dict[str, CommitPushed]:
    """The run's fix commits that say what they were made of, by sha."""
    return {
        e.sha: e
        for e in events
        if isinstance(e, CommitPushed) and not e.pushed and e.parent and e.patch and e.message is not None
    }


def chain(
    fixes: dict[str, CommitPushed], sha: str, have: Callable[[str], bool]
) -> tuple[str, list[CommitPushed]]:
    """From ``sha`` back through the run's fixes to the first commit ``have`` holds or the forge must
    give (the root), and the fixes to commit on it, oldest first."""
    todo: list[CommitPushed] = []
    cur = sha
    while cur in fixes and not have(cur):
        todo.append(fixes[cur])
        cur = fixes[cur].parent or ""
        if len(todo) > 10_000:
            raise MirrorError(f"the run's fixes before {sha[:12]} form no chain")
    return cur, list(reversed(todo))


def rebuild(repo: Path, todo: list[CommitPushed], patches: Patches) -> None:
    """Commit each recorded fix on its parent in ``repo`` and check it gives the recorded sha."""
    with tempfile.TemporaryDirectory(prefix="jury-rebuild-") as work:
        for c in todo:
            patch = patches(c.patch or "")
            if patch is None:
                raise MirrorError(f"the patch {c.patch} of commit {c.sha[:12]} is no longer in the store")
            try:
                got = commit_deterministic(repo, c.parent or "", patch, c.message or "", Path(work))
            except GitError as exc:
                raise MirrorError(
                    f"the patch {c.patch} does not apply on {str(c.parent)[:12]}: {exc.stderr.strip()[-200:]}"
                ) from None
            if got != c.sha:
                raise MirrorError(f"rebuilding commit {c.sha[:12]} from {c.patch} gave {got[:12]}")
            log.info("mirror.rebuilt", repo=str(repo), sha=c.sha, patch=c.patch)


def fetch_commits(repo: Path, source: str, ref: str | None, shas: list[str]) -> None:
    """Bring the commits ``shas`` from ``source`` (a remote's URL or name, or a repository's path) into
    ``repo``: by ``ref`` (the PR's head ref, with its history), then by id for what that did not bring
    (a head the PR has moved away from)."""
    if ref:
        fetch_mirror(repo, [ref], check=False, source=source)
    missing = [s for s in shas if not has_commit(repo, s)]
    if missing:
        fetch_mirror(repo, missing, check=False, source=source)
    for sha in shas:
        if not has_commit(repo, sha):
            raise MirrorError(f"commit {sha[:12]} cannot be fetched from {source} (by {ref or 'id'})")


def ensure(
    repo: Path,
    source: str,
    ref: str | None,
    shas: Iterable[str | None],
    events: Callable[[], Iterable[Event]],
    patches: Patches,
) -> None:
    """Make every commit of ``shas`` present in ``repo``: the forge's fetched, the run's fixes rebuilt
    from ``events`` (read only when something is missing) and ``patches``. The caller holds the lock."""
    missing = [s for s in dict.fromkeys(shas) if s and not has_commit(repo, s)]
    if not missing:
        return
    fixes = fixes_of(events())
    plans = [chain(fixes, sha, lambda s: has_commit(repo, s)) for sha in missing]
    roots = [root for root, _ in plans if root and not has_commit(repo, root)]
    if roots:
        fetch_commits(repo, source, ref, roots)
    for _, todo in plans:
        rebuild(repo, [c for c in todo if not has_commit(repo, c.sha)], patches)


def run_repo(
    state_dir: Path,
    target: Target,
    shas: Iterable[str | None],
    events: Callable[[], Iterable[Event]],
    patches: Patches,
    forge_hosts: Iterable[str] = (),
) -> Path:
    """The repository a task of the run works in on this host, holding every commit of ``shas``.

    A PR URL's: this host's mirror (``state_dir/mirrors/...``), cloned, fetched and completed with the
    run's fixes as needed. A local target's: its path, as it always was.
    """
    if not target.url:
        return Path(target.path or ".")
    try:
        pr = parse_pr_url(target.url, forge_hosts)
    except JuryError as exc:
        raise MirrorError(f"the run's target cannot be fetched on this host: {exc}") from None
    repo = mirror_path(state_dir, pr)
    with repo_lock(repo, mirror_locks(state_dir)):
        try:
            open_mirror(repo, remote_url(pr))
        except GitError as exc:
            raise MirrorError(f"cannot clone {remote_url(pr)}: {exc.stderr.strip()[-300:]}") from None
        ensure(repo, "origin", pr_ref(pr), shas, events, patches)
    return repo
