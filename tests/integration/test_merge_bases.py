"""Many merge-bases at once (``orchestrator.git.merge_bases``), as a sweep finds them: the same answers as
``git merge-base`` one PR at a time, and git run once per trunk whatever the number of PRs
(``orchestrator.target.resolve_pulls``). Real git, real repositories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.git import merge_bases
from orchestrator.target import resolve_pulls
from tests.conftest import logging_git

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git mktree of nothing
ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}


def sh(repo: Path, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, **ENV}
    out = subprocess.run(["git", *args], cwd=repo, input=stdin, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise AssertionError(f"git {args}: {out.stderr}")
    return out.stdout.strip()


def init(repo: Path, branch: str) -> None:
    sh(repo, "init", "--quiet", "--bare", "-b", branch)
    assert sh(repo, "mktree", stdin="") == EMPTY_TREE


def commit(repo: Path, message: str, *parents: str) -> str:
    return sh(repo, "commit-tree", *[a for p in parents for a in ("-p", p)], "-m", message, EMPTY_TREE)


def expected(repo: Path, head: str, trunk: str) -> str | None:
    out = subprocess.run(["git", "merge-base", head, trunk], cwd=repo, capture_output=True, text=True)
    return out.stdout.strip() or None


@pytest.fixture
def shapes(tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    """A trunk t1..t5 and heads of every shape a PR can have against it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    init(repo, "main")
    t = [commit(repo, "t1")]
    for n in range(2, 6):
        t.append(commit(repo, f"t{n}", t[-1]))
    one = commit(repo, "a1", t[2])
    heads = {
        "two commits on t3": commit(repo, "a2", one),
        "one commit on the tip": commit(repo, "b1", t[4]),
        "shares a commit with another head": one,
        "merged the trunk in": commit(repo, "c3", commit(repo, "c2", commit(repo, "c1", t[1]), t[3])),
        "merges two branches off the trunk": commit(repo, "d", one, commit(repo, "b2", t[4])),
        "a trunk commit": t[2],
        "the trunk's tip": t[4],
        "no shared history": commit(repo, "x2", commit(repo, "x1")),
        "a root commit": commit(repo, "x0"),
    }
    return repo, t[4], heads


def test_merge_bases_agree_with_git_merge_base(shapes: tuple[Path, str, dict[str, str]]) -> None:
    repo, trunk, heads = shapes
    found = merge_bases(repo, trunk, heads.values())
    for shape, head in heads.items():
        assert found[head] == expected(repo, head, trunk), shape
    # what each shape is, so the fixture tests what it says
    assert found[heads["a trunk commit"]] == heads["a trunk commit"]
    assert found[heads["no shared history"]] is None and found[heads["a root commit"]] is None
    assert len({found[h] for h in heads.values()}) == 4  # t3, t4, the tip, None


def pr_repo(root: Path, prs: int, trunks: tuple[str, ...]) -> Path:
    """A GitLab project's bare repository under ``root/remotes``: each trunk three commits on a shared
    root, and ``prs`` MR heads, one commit each on a commit of trunk ``k % len(trunks)``."""
    bare = root / "remotes" / "acme" / "app.git"
    bare.mkdir(parents=True)
    init(bare, trunks[0])
    base = commit(bare, "root")
    tips = []
    for name in trunks:
        tip = base
        for n in range(3):
            tip = commit(bare, f"{name} {n}", tip)
            tips.append(tip)
        sh(bare, "update-ref", f"refs/heads/{name}", tip)
    for k in range(1, prs + 1):
        sh(bare, "update-ref", f"refs/merge-requests/{k}/head", commit(bare, f"pr {k}", tips[k % len(tips)]))
    return bare


@pytest.mark.parametrize("prs", [4, 40])
def test_a_sweep_runs_git_per_trunk_not_per_pr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prs: int
) -> None:
    """Two trunks and ``prs`` PRs: git runs the same few times for 4 PRs as for 40 (before: a ``git
    merge-base`` a PR), and every merge-base is git's own."""
    trunks = ("main", "dev")
    bare = pr_repo(tmp_path, prs, trunks)
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://gitlab.com/\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    bin_dir, calls = logging_git(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    pulls = [(f"https://gitlab.com/acme/app/-/merge_requests/{k}", trunks[k % 2]) for k in range(1, prs + 1)]
    resolved = resolve_pulls(pulls, tmp_path / "state")
    ran = calls.read_text().splitlines()
    monkeypatch.undo()
    for (_, trunk), done in zip(pulls, resolved, strict=True):
        assert not isinstance(done, Exception), done
        target, repo_file = done
        assert target.base == expected(bare, target.head, trunk)
        assert "at merge-base " + target.base[:12] in repo_file.source  # read from the trunk side
    verbs = [line.split()[4] for line in ran if "-c" in line]  # after the runner's three -c settings
    assert verbs.count("rev-list") == len(trunks) and "merge-base" not in verbs
    assert len(ran) <= 8, ran  # clone, fetch, for-each-ref, a rev-list per trunk, log, cat-file
