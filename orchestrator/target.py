"""Resolve what to review (a local branch, or a GitHub/GitLab PR URL) into a ``Target``, with git alone.

A PR URL is fetched into a bare mirror under ``<dir>/mirrors`` (``refs/pull/N/head`` on GitHub,
``refs/merge-requests/N/head`` on GitLab); git's own ``url.<base>.insteadOf`` rewrites apply, which is
how tests point a github.com URL at a local bare repository.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.domain import Target
from orchestrator.errors import GitError, TargetError
from workers.worktree import git, merge_base, rev_parse

PR_URL = re.compile(
    r"^https?://(?P<host>[^/]+)/(?P<project>.+?)(?:/-)?/(?P<kind>pull|merge_requests)/(?P<n>\d+)/?$"
)


def stamp(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M")


def make_slug(repo: str, ident: str, attempt: str) -> str:
    clean = lambda s: re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-.") or "x"  # noqa: E731
    return f"{clean(repo)}-{clean(ident)}-{attempt}"


def _rev(repo: Path, rev: str, what: str) -> str:
    try:
        return rev_parse(repo, f"{rev}^{{commit}}")
    except GitError:
        raise TargetError(f"{what} '{rev}' not found in {repo}") from None


def default_trunk(repo: Path, remote: str | None = "origin") -> str:
    """The remote's default branch if it has one, else main or master."""
    if remote:
        out = git(["symbolic-ref", "--quiet", f"refs/remotes/{remote}/HEAD"], repo, check=False).strip()
        if out:
            return out.removeprefix(f"refs/remotes/{remote}/")
    for name in ("main", "master", "trunk"):
        if git(["rev-parse", "--verify", "--quiet", f"refs/heads/{name}"], repo, check=False).strip():
            return name
    raise TargetError(f"cannot tell the trunk of {repo}: name it with --trunk")


def _finish(target: Target, repo: Path, head: str, trunk_rev: str) -> Target:
    try:
        base = merge_base(repo, head, trunk_rev)
    except GitError:
        raise TargetError(
            f"{target.branch or target.id} and the trunk {target.trunk} share no history"
        ) from None
    if base == head:
        raise TargetError(
            f"{target.branch or target.id} has no commits beyond the trunk {target.trunk}: nothing to review"
        )
    title = git(["log", "-1", "--format=%s", head], repo).strip()
    return target.model_copy(
        update={
            "head": head,
            "base": base,
            "reviewed_commit": head,
            "title": target.title or title,
            "path": str(repo),
        }
    )


def resolve_local(path: Path, branch: str | None, trunk: str | None) -> Target:
    if not path.exists():
        raise TargetError(f"no such directory: {path}")
    try:
        repo = Path(git(["rev-parse", "--show-toplevel"], path).strip())
    except GitError:
        raise TargetError(f"not a git repository: {path}") from None
    if not branch:
        branch = git(["symbolic-ref", "--quiet", "--short", "HEAD"], repo, check=False).strip()
        if not branch:
            raise TargetError(f"{repo} is on a detached HEAD: name the branch to review with --branch")
    head = _rev(repo, branch, "branch")
    trunk = trunk or default_trunk(repo)
    trunk_rev = _rev(repo, trunk, "trunk")
    t = Target(repo=repo.name, id=branch, branch=branch, trunk=trunk, state="queued", attempt=stamp())
    return _finish(t, repo, head, trunk_rev)


def resolve_url(url: str, state_dir: Path, trunk: str | None) -> Target:
    m = PR_URL.match(url.strip())
    if not m:
        raise TargetError(
            f"not a pull/merge request URL: {url} "
            "(expected https://HOST/OWNER/REPO/pull/N or .../-/merge_requests/N)"
        )
    host, project, kind, n = m["host"], m["project"], m["kind"], m["n"]
    remote = f"https://{host}/{project}.git"
    mirror = state_dir / "mirrors" / host / f"{project}.git"
    try:
        if not (mirror / "HEAD").exists():
            mirror.parent.mkdir(parents=True, exist_ok=True)
            git(["clone", "--bare", "--quiet", remote, str(mirror)], state_dir)
        ref = f"refs/pull/{n}/head" if kind == "pull" else f"refs/merge-requests/{n}/head"
        git(["fetch", "--quiet", "origin", f"+{ref}:refs/jury/pr/{n}"], mirror)
        if not trunk:
            out = git(["ls-remote", "--symref", "origin", "HEAD"], mirror)
            found = re.search(r"^ref: refs/heads/(\S+)\s+HEAD", out, re.M)
            if not found:
                raise TargetError(f"cannot tell the default branch of {remote}: name it with --trunk")
            trunk = found[1]
        git(["fetch", "--quiet", "origin", f"+refs/heads/{trunk}:refs/remotes/origin/{trunk}"], mirror)
    except GitError as exc:
        raise TargetError(f"cannot fetch {url}: {exc.stderr.strip()[-300:]}") from None
    head = _rev(mirror, f"refs/jury/pr/{n}", "pull request head")
    trunk_rev = _rev(mirror, f"refs/remotes/origin/{trunk}", "trunk")
    t = Target(repo=project.rsplit("/", 1)[-1], id=n, url=url, trunk=trunk, state="queued", attempt=stamp())
    return _finish(t, mirror, head, trunk_rev)


def resolve(what: str, *, branch: str | None, trunk: str | None, state_dir: Path) -> Target:
    if re.match(r"^https?://", what):
        if branch:
            raise TargetError("--branch goes with a local repository, not with a PR URL")
        return resolve_url(what, state_dir, trunk)
    return resolve_local(Path(what), branch, trunk)
