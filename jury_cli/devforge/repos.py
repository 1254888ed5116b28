"""The git side of ``jury dev forge``: bare repositories under a root, and PRs kept as their refs.

A repository ``OWNER/NAME`` is the bare repository ``ROOT/OWNER/NAME.git``; a PR is its
``refs/pull/N/head`` ref, as on GitHub, so a forge restarted on the same root finds its PRs again
(``DevRepos.scan``). What the forge shows of a PR (its head, its base's commit, the lines its diff
shows, which are the only lines an inline comment may land on) is read from git, never made up: Jury
fetches exactly these commits when it reviews the PR.

The forge serves the repositories as ``https://github.com/OWNER/NAME``: Jury reviews PRs by their
GitHub URLs, and git's ``url.<base>.insteadOf`` (``git_env``) turns those into ``file://`` paths under
the root, for the processes given that environment only.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from jury_cli.devforge.server import FakePR, ForgeServer, HttpError, Repo
from orchestrator.errors import GitError
from orchestrator.git import git

NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*/[A-Za-z0-9_][A-Za-z0-9_.-]*")
PULL_REF = re.compile(r"refs/pull/(?P<n>[1-9][0-9]*)/head")
HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,(?P<count>\d+))? @@")
GITHUB_WEB = "https://github.com/"


def check_name(name: str) -> str:
    """``OWNER/NAME`` as a path under the root: two plain segments, nothing that climbs or hides."""
    if not NAME.fullmatch(name) or name.endswith(".git") or ".." in name:
        raise HttpError(422, f"not a repository name (OWNER/NAME): {name!r}")
    return name


def git_env(root: Path) -> dict[str, str]:
    """The environment that sends git's fetches of ``https://github.com/...`` to the root's bare
    repositories (added to git's configuration, not replacing the user's own)."""
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{root.resolve().as_uri()}/.insteadOf",
        "GIT_CONFIG_VALUE_0": GITHUB_WEB,
    }


def diff_lines(bare: Path, base: str, head: str) -> dict[str, set[int]]:
    """The new-side lines of each file that the diff ``base...head`` shows (added and context lines):
    the lines GitHub lets a review comment on."""
    text = git(["diff", "--no-color", "--no-ext-diff", "--no-renames", f"{base}...{head}"], bare)
    shown: dict[str, set[int]] = {}
    path: str | None = None
    line = 0
    for row in text.splitlines():
        if row.startswith("+++ "):
            path = row[6:] if row.startswith("+++ b/") else None
        elif (hunk := HUNK.match(row)) is not None:
            line = int(hunk["start"])
        elif path is not None and row[:1] in (" ", "+") and not row.startswith("+++"):
            shown.setdefault(path, set()).add(line)
            line += 1
    return shown


class DevRepos:
    """The forge's repositories on disk, and the PRs the server shows for them."""

    def __init__(self, root: Path, server: ForgeServer) -> None:
        self.root = root.resolve()
        self.server = server

    def bare(self, name: str) -> Path:
        return self.root / f"{check_name(name)}.git"

    def create(self, name: str, trunk: str = "main") -> Path:
        """The bare repository ``name`` (made empty, its default branch ``trunk``, when missing)."""
        path = self.bare(name)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            git(["init", "--quiet", "--bare", f"--initial-branch={trunk}", str(path)], self.root)
        self.server.github_repo(name)
        return path

    def scan(self) -> list[str]:
        """Serve every bare repository already under the root, with its PRs (``refs/pull/N/head``)."""
        found = []
        for path in sorted(self.root.glob("*/*.git")):
            name = str(path.relative_to(self.root))[: -len(".git")]
            if not NAME.fullmatch(name):
                continue
            self.server.github_repo(name)
            refs = git(["for-each-ref", "--format=%(refname)", "refs/pull/"], path).split()
            for ref in refs:
                if (pull := PULL_REF.fullmatch(ref)) is not None:
                    self._show(name, int(pull["n"]), None, None, "", "")
            found.append(name)
        return found

    def trunk(self, name: str) -> str:
        return git(["symbolic-ref", "--short", "HEAD"], self.bare(name)).strip()

    def open(self, name: str, head: str, base: str | None, title: str, body: str) -> FakePR:
        """A PR of ``name`` from its branch ``head`` into ``base`` (default: the trunk). A branch that has
        an open PR already moves that PR to the branch's commit instead (a push to the PR)."""
        repo = self.server.github_repo(check_name(name))
        bare = self.bare(name)
        sha = self._commit(bare, f"refs/heads/{head}", f"no branch {head!r} in {name}")
        existing = next((pr for pr in repo.prs.values() if pr.head_branch == head), None)
        number = existing.number if existing else max(repo.prs, default=0) + 1
        git(["update-ref", f"refs/pull/{number}/head", sha], bare)
        return self._show(name, number, head, base or (existing.base if existing else None), title, body)

    def _commit(self, bare: Path, ref: str, missing: str) -> str:
        try:
            return git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], bare).strip()
        except GitError:
            raise HttpError(422, missing) from None

    def _branch_at(self, bare: Path, sha: str) -> str | None:
        """A branch whose tip is ``sha`` (a PR found again on a restart: its branch, when it has one)."""
        names = git(["for-each-ref", "--format=%(refname:short)", f"--points-at={sha}", "refs/heads/"], bare)
        return next(iter(names.split()), None)

    def _show(
        self, name: str, number: int, head: str | None, base: str | None, title: str, body: str
    ) -> FakePR:
        """Register (or move) PR ``number`` of ``name`` from what git holds for it."""
        repo: Repo = self.server.github_repo(name)
        bare = self.bare(name)
        sha = self._commit(bare, f"refs/pull/{number}/head", f"no PR {number} in {name}")
        base = base or self.trunk(name)
        base_sha = self._commit(bare, f"refs/heads/{base}", f"no base branch {base!r} in {name}")
        subject, stamp = git(["log", "-1", "--format=%s%n%ct", sha], bare).strip().split("\n")
        when = datetime.fromtimestamp(int(stamp), UTC)
        pr = repo.prs.get(number)
        if pr is not None:
            if pr.head_sha != sha:
                pr.push(sha, when)
        else:
            head = head or self._branch_at(bare, sha) or f"pr-{number}"
            pr = repo.add(FakePR(number, title or subject, sha, base=base, head_branch=head))
            pr.body, pr.updated_at = body, when
        pr.base, pr.base_sha = base, base_sha
        pr.diff = diff_lines(bare, base_sha, sha)
        return pr
