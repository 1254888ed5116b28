"""Resolve what to review (a local branch, or a GitHub/GitLab PR URL) into a ``Target``, with git alone,
and read the repository's ``jury.toml`` from the trunk side of it.

A PR URL is validated before anything is fetched, by the one parser of request URLs
(``orchestrator.forge.urls``, per forge kind: https only for GitHub and GitLab, a host from the
allow-list, names that cannot climb, escape or read as options, a number of digits). It is then fetched
into this host's bare mirror under ``<dir>/mirrors/HOST/PROJECT.git`` (the ref its forge kind keeps the
head under: ``refs/pull/N/head`` on GitHub, ``refs/merge-requests/N/head`` on GitLab), under the
mirror's lock; git's own ``url.<base>.insteadOf`` rewrites apply, which is how tests
point a github.com URL at a local bare repository. The mirror is this host's alone: a worker on another
host keeps its own (``workers/isolation/mirror.py``), so the target's ``path`` is only the submitting host's.

The reviewed repository's ``jury.toml`` is read at the merge-base of the head with the trunk
(``repo_config``), never from the working tree or the PR head: what a pull request changes in it is
reported and never applied.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.config import REPO_CONFIG_NAME, RepoFile
from orchestrator.errors import ConfigError, GitError, JuryError, TargetError
from orchestrator.forge.urls import URL_SCHEME, PullRequest, split_pr_url
from orchestrator.forge.urls import parse_pr_url as parse_pr_url  # the one PR URL parser, for callers here
from orchestrator.git import git, git_bytes, merge_base, merge_bases, repo_lock, rev_parse
from orchestrator.spec import Target

MAX_CONFIG_BYTES = 1024 * 1024
CHANGED_NOTE = f"the PR changes {REPO_CONFIG_NAME}; its changes were not applied"


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


def remote_url(pr: PullRequest) -> str:
    """The repository's clone URL on its forge (git's ``url.<base>.insteadOf`` rewrites apply)."""
    return pr.remote_url


def pr_ref(pr: PullRequest) -> str:
    """The ref the forge keeps the request's head under (its forge kind's ``head_ref``)."""
    return pr.head_ref


def mirror_path(state_dir: Path, pr: PullRequest) -> Path:
    """This host's bare mirror of the request's repository, keyed by its remote (host and project)."""
    return state_dir / "mirrors" / pr.host / f"{pr.project}.git"


def mirror_locks(state_dir: Path) -> Path:
    """Where the mirrors' locks are (``repo_lock``): one per mirror, for its clone and its fetches."""
    return state_dir / "mirrors" / ".locks"


# No automatic gc or maintenance in a mirror: it only grows by fetches and Jury's own commits, and a
# repack while another process reads it is a race nobody needs.
_FETCH = ["-c", "gc.auto=0", "-c", "maintenance.auto=false", "fetch", "--quiet", "--no-tags"]


def open_mirror(mirror: Path, remote: str) -> None:
    """Clone ``remote`` bare into ``mirror`` unless it is there. The caller holds the mirror's lock; the
    clone is made beside it and renamed into place, so a clone cut short is never taken for a mirror."""
    if (mirror / "HEAD").exists():
        return
    mirror.parent.mkdir(parents=True, exist_ok=True)
    tmp = mirror.with_name(f".{mirror.name}.{uuid.uuid4().hex[:8]}")
    try:
        git(["clone", "--bare", "--quiet", remote, str(tmp)], mirror.parent)
        tmp.rename(mirror)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def fetch_mirror(mirror: Path, refspecs: list[str], *, check: bool = True, source: str = "origin") -> bool:
    """Fetch ``refspecs`` (refs, or object ids a forge serves by id) from ``source`` (the mirror's origin)
    into ``mirror``. GitError when git fails, or with ``check`` False only whether it succeeded. The
    caller holds the mirror's lock."""
    try:
        git([*_FETCH, "--end-of-options", source, *refspecs], mirror)
    except GitError:
        if check:
            raise
        return False
    return True


@contextmanager
def _mirror(state_dir: Path, pr: PullRequest) -> Iterator[tuple[Path, str]]:
    """This host's mirror of ``pr``'s repository (cloned on first use) and its remote's URL, under the
    mirror's lock: the threads and processes of one host (workers, ``jury review``, a sweep) share it."""
    mirror, remote = mirror_path(state_dir, pr), remote_url(pr)
    with repo_lock(mirror, mirror_locks(state_dir)):
        open_mirror(mirror, remote)
        yield mirror, remote


def _pr_target(url: str, pr: PullRequest, mirror: Path, trunk: str) -> Target:
    head = _rev(mirror, f"refs/jury/pr/{pr.number}", "pull request head")
    trunk_rev = _rev(mirror, f"refs/remotes/origin/{trunk}", "trunk")
    t = Target(
        repo=pr.project.rsplit("/", 1)[-1],
        id=pr.number,
        url=url,
        trunk=trunk,
        state="queued",
        attempt=stamp(),
    )
    return _finish(t, mirror, head, trunk_rev)


def resolve_url(url: str, state_dir: Path, trunk: str | None, forge_hosts: Iterable[str] = ()) -> Target:
    pr = parse_pr_url(url, forge_hosts)
    try:
        with _mirror(state_dir, pr) as (mirror, remote):
            fetch_mirror(mirror, [f"+{pr_ref(pr)}:refs/jury/pr/{pr.number}"])
            if not trunk:
                out = git(["ls-remote", "--symref", "origin", "HEAD"], mirror)
                found = re.search(r"^ref: refs/heads/(\S+)\s+HEAD", out, re.M)
                if not found:
                    raise TargetError(f"cannot tell the default branch of {remote}: name it with --trunk")
                trunk = found[1]
            fetch_mirror(mirror, [f"+refs/heads/{trunk}:refs/remotes/origin/{trunk}"])
    except GitError as exc:
        raise TargetError(f"cannot fetch {url}: {exc.stderr.strip()[-300:]}") from None
    return _pr_target(url, pr, mirror, trunk)


def resolve_pulls(
    pulls: Sequence[tuple[str, str]], state_dir: Path, forge_hosts: Iterable[str] = ()
) -> list[tuple[Target, RepoFile] | JuryError]:
    """Many PRs at once, each given as ``(url, trunk)``: what ``resolve_url`` and ``repo_config`` make of
    each, or the error that says why it could not, in the order given.

    A sweep resolves a hundred PRs in one go, so git runs a few times per repository, not six times per
    PR: one ``git fetch`` of every PR head and trunk it needs, one listing of the fetched refs, one read
    of every head's subject, one of the top trees of every head and merge-base (``jury.toml``), and one
    ``git rev-list`` per trunk for every merge-base (``orchestrator.git.merge_bases``). Only when the
    fetch fails (a PR closed meanwhile, its ref gone) are that repository's PRs fetched one by one, so
    one bad PR fails alone.
    """
    found: list[tuple[Target, RepoFile] | JuryError | None] = [None] * len(pulls)
    repos: dict[tuple[str, str], list[tuple[int, PullRequest, str]]] = {}
    for i, (url, trunk) in enumerate(pulls):
        try:
            pr = parse_pr_url(url, forge_hosts)
            if not trunk or trunk.startswith("-") or ".." in trunk or trunk.startswith("/"):
                raise TargetError(f"PR {url}: bad base branch {trunk!r}")
        except TargetError as exc:
            found[i] = exc
            continue
        repos.setdefault((pr.host, pr.project), []).append((i, pr, trunk))
    for items in repos.values():
        try:
            _resolve_repo(state_dir, [(pulls[i][0], pr, trunk) for i, pr, trunk in items], found, items)
        except (GitError, TargetError) as exc:
            reason = exc if isinstance(exc, TargetError) else TargetError(_fetch_error(items[0][1], exc))
            for i, _, _ in items:
                found[i] = found[i] or reason
    return [f if f is not None else TargetError("not resolved") for f in found]


def _fetch_error(pr: PullRequest, exc: GitError) -> str:
    return f"cannot fetch {pr.remote_url.removesuffix('.git')}: {exc.stderr.strip()[-300:]}"


def _resolve_repo(
    state_dir: Path,
    prs: list[tuple[str, PullRequest, str]],
    found: list[tuple[Target, RepoFile] | JuryError | None],
    items: list[tuple[int, PullRequest, str]],
) -> None:
    """``resolve_pulls`` for the PRs of one repository, written into ``found`` at their indexes."""
    with _mirror(state_dir, prs[0][1]) as (mirror, _):
        _resolve_in(mirror, prs, found, items)


# A PR of a sweep once its commits are known: index, url, pr, trunk, head, merge-base.
_Known = tuple[int, str, PullRequest, str, str, str]


def _resolve_in(
    mirror: Path,
    prs: list[tuple[str, PullRequest, str]],
    found: list[tuple[Target, RepoFile] | JuryError | None],
    items: list[tuple[int, PullRequest, str]],
) -> None:
    """``_resolve_repo`` in ``mirror``, whose lock the caller holds."""
    _fetch_heads(mirror, prs, found, items)
    known = _merge_bases(mirror, prs, found, items, _commit_refs(mirror))
    if known:
        _targets(mirror, known, found)


def _fetch_heads(
    mirror: Path,
    prs: list[tuple[str, PullRequest, str]],
    found: list[tuple[Target, RepoFile] | JuryError | None],
    items: list[tuple[int, PullRequest, str]],
) -> None:
    """Every PR head and trunk in one fetch; when it fails, each PR's alone, so one bad PR fails alone
    (its error written into ``found``)."""
    heads = [f"+{pr_ref(pr)}:refs/jury/pr/{pr.number}" for _, pr, _ in prs]
    bases = [f"+refs/heads/{t}:refs/remotes/origin/{t}" for t in sorted({t for _, _, t in prs})]
    try:
        git(["fetch", "--quiet", "origin", *heads, *bases], mirror)
    except GitError:
        for (url, pr, trunk), (i, _, _) in zip(prs, items, strict=True):
            try:
                git(["fetch", "--quiet", "origin", f"+{pr_ref(pr)}:refs/jury/pr/{pr.number}"], mirror)
                git(
                    ["fetch", "--quiet", "origin", f"+refs/heads/{trunk}:refs/remotes/origin/{trunk}"], mirror
                )
            except GitError as exc:
                found[i] = TargetError(f"cannot fetch {url}: {exc.stderr.strip()[-300:]}")


def _commit_refs(mirror: Path) -> dict[str, str]:
    """The fetched PR heads and trunks of ``mirror`` that are commits: ref -> sha, in one listing."""
    listing = git(
        [
            "for-each-ref",
            "--format=%(objectname) %(objecttype) %(refname)",
            "refs/jury/pr/",
            "refs/remotes/origin/",
        ],
        mirror,
    )
    return {
        ref: sha
        for sha, object_type, ref in (line.split(" ", 2) for line in listing.splitlines())
        if object_type == "commit"
    }


def _merge_bases(
    mirror: Path,
    prs: list[tuple[str, PullRequest, str]],
    found: list[tuple[Target, RepoFile] | JuryError | None],
    items: list[tuple[int, PullRequest, str]],
    refs: dict[str, str],
) -> list[_Known]:
    """The PRs not failed yet whose head and trunk were fetched and share history with commits beyond
    the trunk; why each other one cannot be reviewed goes into ``found``. The merge-bases of every head
    on one trunk come from one ``git rev-list`` (``merge_bases``): git runs once per trunk, not per PR."""
    todo: list[tuple[int, str, PullRequest, str, str, str]] = []
    for (url, pr, trunk), (i, _, _) in zip(prs, items, strict=True):
        if found[i] is not None:
            continue
        head = refs.get(f"refs/jury/pr/{pr.number}")
        trunk_rev = refs.get(f"refs/remotes/origin/{trunk}")
        if head is None or trunk_rev is None:
            what = "pull request head" if head is None else f"trunk '{trunk}'"
            found[i] = TargetError(f"{url}: {what} not found in {mirror}")
            continue
        todo.append((i, url, pr, trunk, head, trunk_rev))
    by_trunk: dict[str, list[str]] = {}
    for *_, head, trunk_rev in todo:
        by_trunk.setdefault(trunk_rev, []).append(head)
    bases = {tip: merge_bases(mirror, tip, tip_heads) for tip, tip_heads in by_trunk.items()}
    known: list[_Known] = []
    for i, url, pr, trunk, head, trunk_rev in todo:
        base = bases[trunk_rev][head]
        if base is None:
            found[i] = TargetError(f"{pr.number} and the trunk {trunk} share no history")
        elif base == head:
            found[i] = TargetError(f"{pr.number} has no commits beyond the trunk {trunk}: nothing to review")
        else:
            known.append((i, url, pr, trunk, head, base))
    return known


def _targets(
    mirror: Path, known: list[_Known], found: list[tuple[Target, RepoFile] | JuryError | None]
) -> None:
    """Each known PR's target and trunk-side ``jury.toml`` (or why it could not be read), into
    ``found``: the heads' subjects in one ``git log``, the top trees in one ``cat-file --batch``."""
    subjects = git(["log", "--no-walk=unsorted", "--format=%H %s", *{k[4] for k in known}], mirror)
    titles = {sha: subject for sha, _, subject in (line.partition(" ") for line in subjects.splitlines())}
    entries = _top_entries(mirror, [c for k in known for c in (k[5], k[4])], REPO_CONFIG_NAME)
    for i, url, pr, trunk, head, base in known:
        target = Target(
            repo=pr.project.rsplit("/", 1)[-1],
            id=pr.number,
            url=url,
            trunk=trunk,
            state="queued",
            attempt=stamp(),
            head=head,
            base=base,
            reviewed_commit=head,
            title=titles.get(head, ""),
            path=str(mirror),
        )
        try:
            repo_file = _repo_file(
                mirror,
                base,
                entries[base],
                entries[head],
                where=pr.identity,
                identity=pr.identity,
                local=False,
            )
        except JuryError as exc:
            found[i] = exc
            continue
        found[i] = (target, repo_file)


def resolve(
    what: str,
    *,
    branch: str | None,
    trunk: str | None,
    state_dir: Path,
    forge_hosts: Iterable[str] = (),
) -> Target:
    if URL_SCHEME.match(what.strip()):
        if branch:
            raise TargetError("--branch goes with a local repository, not with a PR URL")
        return resolve_url(what, state_dir, trunk, forge_hosts)
    return resolve_local(Path(what), branch, trunk)


# --- the repository's jury.toml, from the trunk side -------------------------------------------------


def _tree_entry(repo: Path, rev: str) -> tuple[str, str] | None:
    """The (mode, object id) of ``jury.toml`` at the top of ``rev``'s tree, or None."""
    out = git(["ls-tree", "-z", "--full-tree", rev, "--", REPO_CONFIG_NAME], repo)
    for record in out.split("\0"):
        meta, _, path = record.partition("\t")
        if path == REPO_CONFIG_NAME:
            mode, _, oid = meta.split(" ")
            return mode, oid
    return None


def read_repo_file(repo: Path, base: str, head: str, *, where: str, identity: str, local: bool) -> RepoFile:
    """The repository's ``jury.toml`` as commit ``base`` (the merge-base) holds it, with a note when
    ``head`` holds another one. Only a regular file is read; never the working tree."""
    at_base, at_head = _tree_entry(repo, base), _tree_entry(repo, head)
    return _repo_file(repo, base, at_base, at_head, where=where, identity=identity, local=local)


def _repo_file(
    repo: Path,
    base: str,
    at_base: tuple[str, str] | None,
    at_head: tuple[str, str] | None,
    *,
    where: str,
    identity: str,
    local: bool,
) -> RepoFile:
    """``read_repo_file`` once the (mode, object id) of ``jury.toml`` at the base and the head are known."""
    source = f"{where}/{REPO_CONFIG_NAME} (at merge-base {base[:12]})"
    notes = [CHANGED_NOTE] if at_base != at_head else []
    if at_base is None:
        return RepoFile(source=source, identity=identity, local=local, notes=notes)
    mode, oid = at_base
    if mode not in ("100644", "100755"):
        notes.append(f"{source}: not a regular file (mode {mode}); not read")
        return RepoFile(source=source, identity=identity, local=local, notes=notes)
    size = int(git(["cat-file", "-s", oid], repo).strip())
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: {size} bytes; a {REPO_CONFIG_NAME} holds at most {MAX_CONFIG_BYTES}")
    raw = git_bytes(["show", "--no-textconv", f"{base}:{REPO_CONFIG_NAME}"], repo)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: invalid TOML: not UTF-8") from None
    return RepoFile(source=source, identity=identity, local=local, text=text, notes=notes)


def repo_identity(target: Target) -> str | None:
    """Who the reviewed repository is, the same on every host: its forge identity for a PR URL
    (``host/owner/repo``, as ``[trust] repos`` names it; each host may keep its own mirror), the
    repository's top-level path for a local one; None when the target is not resolved."""
    if target.url:
        return split_pr_url(target.url).identity
    return target.path


def _top_entries(repo: Path, commits: Iterable[str], name: str) -> dict[str, tuple[str, str] | None]:
    """The (mode, object id) of ``name`` at the top of each commit's tree (None: not there), every tree
    read by one ``git cat-file --batch``: what ``_tree_entry`` tells of one commit, for a sweep's many."""
    wanted = list(dict.fromkeys(commits))
    if not wanted:
        return {}
    out = git_bytes(["cat-file", "--batch"], repo, input="".join(f"{c}^{{tree}}\n" for c in wanted).encode())
    found: dict[str, tuple[str, str] | None] = {}
    pos = 0
    for commit in wanted:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if len(header) != 3 or header[1] != b"tree":
            raise TargetError(f"cannot read the tree of {commit} in {repo}")
        size, width = int(header[2]), len(header[0]) // 2  # a binary object id: 20 bytes, 32 for sha256
        tree, pos = out[end + 1 : end + 1 + size], end + 1 + size + 1
        found[commit] = None
        i = 0
        while i < len(tree):  # entries: "<mode> <name>\0<binary id>"
            space = tree.index(b" ", i)
            nul = tree.index(b"\0", space)
            if tree[space + 1 : nul] == name.encode():
                found[commit] = (tree[i:space].decode().zfill(6), tree[nul + 1 : nul + 1 + width].hex())
                break
            i = nul + 1 + width
    return found


def repo_config(target: Target) -> RepoFile:
    """The trunk-side ``jury.toml`` of a resolved target; a PR URL's repository is never local."""
    if not target.path or not target.base or not target.head:
        raise TargetError("the target is not resolved: no repository, head or merge-base")
    repo = Path(target.path)
    if target.url:
        identity = split_pr_url(target.url).identity
        return read_repo_file(repo, target.base, target.head, where=identity, identity=identity, local=False)
    return read_repo_file(repo, target.base, target.head, where=str(repo), identity=str(repo), local=True)


def checkout_config(path: Path) -> RepoFile:
    """The trunk-side ``jury.toml`` of a checkout (commands without a branch: ``agents``, ``refute``):
    read at the merge-base of HEAD with the default trunk, never from the working tree."""
    try:
        repo = Path(git(["rev-parse", "--show-toplevel"], path).strip())
        head = rev_parse(repo, "HEAD")
    except GitError:
        raise TargetError(f"not a git repository with a commit: {path}") from None
    where = str(repo)
    try:
        trunk = default_trunk(repo)
        base = merge_base(repo, head, _rev(repo, trunk, "trunk"))
    except (TargetError, GitError):
        note = f"{where}: cannot tell the trunk, so its {REPO_CONFIG_NAME} was not read"
        return RepoFile(source=f"{where}/{REPO_CONFIG_NAME}", identity=where, local=True, notes=[note])
    return read_repo_file(repo, base, head, where=where, identity=where, local=True)
