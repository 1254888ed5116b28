"""``jury dev forge``: the shipped fake GitHub over bare repositories on disk. Its server runs here
(``DevForge``); ``jury dev forge seed``, ``env`` and ``published`` run as the user would run them, and
Jury's own GitHub client and real git fetches talk to it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from jury_cli.devforge.dev import DevForge
from orchestrator.forge import GitHub, InlineComment, ReviewDraft
from tests.conftest import outside_env

IDENTITY = ["-c", "user.name=T", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *IDENTITY, *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def jury(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in outside_env().items() if not k.startswith("GIT_CONFIG")}
    return subprocess.run(
        [sys.executable, "-m", "jury_cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A local repository: ``main`` with app.py, ``fix`` changing its line 3, ``docs`` adding a file."""
    repo = tmp_path / "src"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "app.py").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    git(repo, "add", "app.py")
    git(repo, "commit", "--quiet", "-m", "app")
    git(repo, "checkout", "--quiet", "-b", "fix")
    (repo / "app.py").write_text("".join(f"line {n}\n" if n != 3 else "line three\n" for n in range(1, 21)))
    git(repo, "commit", "--quiet", "-am", "app: spell three")
    git(repo, "checkout", "--quiet", "-b", "docs", "main")
    (repo / "README.md").write_text("# app\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "--quiet", "-m", "docs: a README")
    git(repo, "checkout", "--quiet", "main")
    return repo


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[DevForge]:
    with DevForge(tmp_path / "forge") as dev:
        yield dev


def seed(forge: DevForge, source: Path, *branches: str) -> subprocess.CompletedProcess[str]:
    prs = [arg for branch in branches for arg in ("--pr", branch)]
    return jury("dev", "forge", "seed", "acme/app", "--from", str(source), *prs, "--forge", forge.server.url)


def test_seeded_prs_are_listed_with_their_real_heads_and_fetch_through_the_printed_env(
    forge: DevForge, source: Path, tmp_path: Path
) -> None:
    done = seed(forge, source, "fix", "docs")
    assert done.returncode == 0, done.stderr
    heads = {"fix": git(source, "rev-parse", "fix"), "docs": git(source, "rev-parse", "docs")}
    assert done.stdout.splitlines() == [
        f"#1  fix -> main  {heads['fix'][:12]}  https://github.com/acme/app/pull/1",
        f"#2  docs -> main  {heads['docs'][:12]}  https://github.com/acme/app/pull/2",
    ]
    with httpx.Client() as http:
        listed = GitHub(http, token="anything", api=forge.server.github_api).list_open("acme/app")
    assert {(pr.number, pr.head_sha, pr.base) for pr in listed} == {
        (1, heads["fix"], "main"),
        (2, heads["docs"], "main"),
    }
    assert {pr.web_url for pr in listed} == {
        "https://github.com/acme/app/pull/1",
        "https://github.com/acme/app/pull/2",
    }

    # the printed exports make git fetch the PR's head from the forge's bare repository
    env = jury("dev", "forge", "env", "--forge", forge.server.url)
    assert env.returncode == 0, env.stderr
    exports = dict(line.removeprefix("export ").split("=", 1) for line in env.stdout.splitlines())
    assert exports["JURY_GITHUB_API"] == forge.server.github_api and exports["GITHUB_TOKEN"]
    git_env = {k: v for k, v in exports.items() if k.startswith("GIT_CONFIG")}
    clone = tmp_path / "clone"
    subprocess.run(["git", "init", "--quiet", str(clone)], check=True)
    fetch = [
        "git",
        "-C",
        str(clone),
        "fetch",
        "--quiet",
        "https://github.com/acme/app.git",
        "refs/pull/1/head",
    ]
    subprocess.run(fetch, check=True, env={**outside_env(), **git_env}, timeout=60)
    assert git(clone, "rev-parse", "FETCH_HEAD") == heads["fix"]


def test_a_review_lands_on_diff_lines_only_and_is_listed_as_published(forge: DevForge, source: Path) -> None:
    assert seed(forge, source, "fix").returncode == 0
    head = git(source, "rev-parse", "fix")
    review = ReviewDraft(
        run="run-1",
        body="one finding",
        comments=(
            InlineComment(path="app.py", line=3, body="three, spelled out"),  # the changed line
            InlineComment(path="app.py", line=15, body="far from the change"),  # not in the diff
        ),
    )
    with httpx.Client() as http:
        published = GitHub(http, token="any-token", api=forge.server.github_api).publish_review(
            "acme/app", 1, head, review
        )
    assert [(c.line, c.action) for c in published.comments] == [(3, "created"), (15, "unplaced")]
    listing = jury("dev", "forge", "published", "--forge", forge.server.url)
    assert listing.returncode == 0, listing.stderr
    assert "acme/app#1  app: spell three" in listing.stdout
    assert "  review by jury-dev: one finding" in listing.stdout
    assert "    comment on app.py:3: three, spelled out" in listing.stdout
    assert "app.py:15" not in listing.stdout
    seen = json.loads(jury("dev", "forge", "published", "--json", "--forge", forge.server.url).stdout)
    assert [c["line"] for c in seen["acme/app"]["comments"]] == [3]


def test_a_restarted_forge_serves_its_prs_again_and_a_reseeded_branch_moves_its_pr(
    tmp_path: Path, source: Path
) -> None:
    root = tmp_path / "forge"
    with DevForge(root) as first:
        assert seed(first, source, "fix", "docs").returncode == 0
    git(source, "checkout", "--quiet", "fix")
    (source / "app.py").write_text((source / "app.py").read_text() + "line 21\n")
    git(source, "commit", "--quiet", "-am", "app: one line more")
    moved = git(source, "rev-parse", "fix")
    with DevForge(root) as again:
        assert again.found == ["acme/app"]
        prs = again.server.github["acme/app"].prs
        assert {n: (pr.head_branch, pr.title) for n, pr in prs.items()} == {
            1: ("fix", "app: spell three"),
            2: ("docs", "docs: a README"),
        }
        done = seed(again, source, "fix")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"#1  fix -> main  {moved[:12]}")
        assert prs[1].head_sha == moved and len(prs[1].heads) == 2 and sorted(prs) == [1, 2]
        assert 21 in prs[1].diff["app.py"] and 15 not in prs[1].diff["app.py"]


@pytest.mark.parametrize(
    "name", ["../escape", "acme/../x", "acme", "acme/app/more", "acme/.hidden", "acme/app.git"]
)
def test_a_repository_name_that_is_not_owner_slash_name_is_refused(
    forge: DevForge, source: Path, name: str
) -> None:
    done = jury(
        "dev", "forge", "seed", name, "--from", str(source), "--pr", "fix", "--forge", forge.server.url
    )
    assert done.returncode != 0 and "not a repository name" in done.stderr, done.stderr
    assert not any(forge.repos.root.iterdir())
