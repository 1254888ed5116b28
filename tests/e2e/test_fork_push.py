"""The "pwn request", replayed: a fork's PR adds ``.github/workflows/evil.yml`` (``on: push``) and asks
for a review with ``--push``. Pushed as ``jury/<slug>`` into the base repository, that workflow would run
there with the base's secrets. Jury asks the forge where the head comes from (the fake GitHub and GitLab
of tests/fakes/forge_server.py), pushes only a head of the base repository, and otherwise keeps the fixes
as the run's ``fixes.patch`` artifact and says why in the run and on the PR's check.

Real ``jury review`` processes (embedded Redis, local workers: the push is the worker's push job), real
git with local bare repositories behind github.com / gitlab.com URLs (git's insteadOf).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import fake_agent
from tests.fakes.forge_server import FakePR, ForgeServer

GH_TOKEN = "ghp_FORKPUSHsecretTOKEN0123456789"
GL_TOKEN = "glpat-FORKPUSHsecretTOKEN9876"
IDENT = ["-c", "user.name=mallory", "-c", "user.email=m@fork.invalid", "-c", "commit.gpgsign=false"]
EVIL = "on: push\njobs:\n  steal:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo $SECRET\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@dataclass
class Base:
    server: ForgeServer
    remote: Path  # the base repository
    env: dict[str, str]
    head: str  # the PR's head: the buggy feature plus the attacker's workflow


@pytest.fixture
def base(tmp_path: Path, sample_repo: Path) -> Iterator[Base]:
    """The base repository acme/sample (a local bare repository behind github.com and gitlab.com URLs)
    holding PR 1 / MR 1: ``feature`` (the median bug, which the fake judge fixes) plus a commit by
    somebody else adding ``.github/workflows/evil.yml``."""
    git(sample_repo, "checkout", "--quiet", "feature")
    (sample_repo / ".github" / "workflows").mkdir(parents=True)
    (sample_repo / ".github" / "workflows" / "evil.yml").write_text(EVIL)
    git(sample_repo, "add", ".github")
    git(sample_repo, *IDENT, "commit", "--quiet", "-m", "ci: add a workflow")
    head = git(sample_repo, "rev-parse", "HEAD").strip()
    git(sample_repo, "checkout", "--quiet", "main")
    remote = tmp_path / "remotes" / "acme" / "sample.git"
    remote.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "--bare", "--quiet", str(sample_repo), str(remote)], check=True)
    git(remote, "update-ref", "refs/pull/1/head", head)
    git(remote, "update-ref", "refs/merge-requests/1/head", head)
    git(remote, "symbolic-ref", "HEAD", "refs/heads/main")
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(
        f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://github.com/\n'
        f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://gitlab.com/\n'
    )
    with ForgeServer() as server:
        server.user(GH_TOKEN, "jury-bot", app=True)
        server.user(GL_TOKEN, "jury-bot")
        env = {
            "GITHUB_TOKEN": GH_TOKEN,
            "GITLAB_TOKEN": GL_TOKEN,
            "JURY_GITHUB_API": server.github_api,
            "JURY_GITHUB_LOGIN": "jury-bot",
            "JURY_GITLAB_API": server.gitlab_api,
            "GIT_CONFIG_GLOBAL": str(gitconfig),
        }
        yield Base(server, remote, env, head)


URLS = {
    "github": "https://github.com/acme/sample/pull/1",
    "gitlab": "https://gitlab.com/acme/sample/-/merge_requests/1",
}


def seed(base: Base, kind: str, *, fork: bool) -> str:
    main = git(base.remote, "rev-parse", "main").strip()
    repo = (
        base.server.github_repo("acme/sample")
        if kind == "github"
        else base.server.gitlab_project("acme/sample")
    )
    repo.add(FakePR(1, "median", base.head, fork=fork, base_sha=main, diff={"stats.py": set(range(1, 20))}))
    return URLS[kind]


def review(jury, write_config, url: str, env: dict[str, str], *extra: str):
    config = write_config(fake_agent("finder", "find"), fake_agent("judge", "clean", "fix"))
    args = ["review", url, "--reviewer", "finder", "--judge", "judge", "--config", str(config)]
    return jury(*args, "--rounds", "3", "--no-refute", "--push", *extra, env=env, timeout=240)


def refs(remote: Path) -> str:
    return git(remote, "for-each-ref", "--format=%(refname) %(objectname)")


def the_run(jury, state_dir: Path) -> tuple[str, dict]:
    (run,) = list((state_dir / "runs").iterdir())
    return run.name, json.loads(jury("show", run.name, "--json").out)["target"]


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_a_fork_head_is_never_pushed_into_the_base_repository(
    kind: str, base: Base, jury, write_config, state_dir: Path
) -> None:
    url = seed(base, kind, fork=True)
    before = refs(base.remote)
    r = review(jury, write_config, url, base.env, "--publish")
    assert r.code == 0, r.out + r.err
    slug, target = the_run(jury, state_dir)
    assert target["state"] == "converged", target

    # nothing reached the base repository: no jury/<slug>, no ref moved, the workflow's commit only where
    # the PR's own ref already had it
    assert refs(base.remote) == before

    # the fixes are the run's patch artifact: the judge's fix, never the attacker's workflow
    patch = (state_dir / "runs" / slug / "fixes.patch").read_text()
    assert "ordered[middle - 1]" in patch and "evil.yml" not in patch
    assert "Subject: [PATCH" in patch

    # the run says why, in its end note, its summary and the check on the PR
    note = target["stateNote"]
    assert f"{kind} says acme/sample#1 comes from a fork" in note, note
    assert "changes CI configuration (.github/workflows/evil.yml)" in note, note
    assert "fixes.patch" in note and f"jury fetch {slug}" in note
    assert "not pushed" in r.out
    if kind == "github":
        # the head has the bug still: the check says so and where the fixes are (held, on no branch)
        (check,) = base.server.github["acme/sample"].check_runs
        assert check["conclusion"] == "action_required"
        assert f"`jury fetch {slug}` makes them branch jury/{slug}" in check["output"]["title"]
        assert "comes from a fork" in check["output"]["summary"]
    else:
        notes = [n["body"] for d in base.server.gitlab["acme/sample"].discussions[1] for n in d["notes"]]
        (summary,) = [b for b in notes if b.startswith(f"<!-- jury:run={slug} -->")]
        assert "comes from a fork" in summary and "fixes.patch" in summary


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_a_head_of_the_base_repository_is_pushed_even_when_it_adds_ci(
    kind: str, base: Base, jury, write_config, state_dir: Path
) -> None:
    """The CI rule is for foreign heads: a branch of the base repository ran its workflows already.
    Published, each commit's check tells that commit: the PR's head lacks the fix (not success, naming
    the branch that has it); the pushed ``jury/<slug>`` holds it (success)."""
    url = seed(base, kind, fork=False)
    r = review(jury, write_config, url, base.env, "--publish")
    assert r.code == 0, r.out + r.err
    slug, target = the_run(jury, state_dir)
    assert target["state"] == "converged" and "not pushed" not in target["stateNote"], target
    pushed = git(base.remote, "rev-parse", f"refs/heads/jury/{slug}").strip()
    assert git(base.remote, "rev-parse", f"{pushed}~1").strip() == base.head
    head_ref = "refs/pull/1/head" if kind == "github" else "refs/merge-requests/1/head"
    assert git(base.remote, "rev-parse", head_ref).strip() == base.head  # never the PR's branch
    assert not (state_dir / "runs" / slug / "fixes.patch").exists()
    if kind == "github":
        by_sha = {c["head_sha"]: c for c in base.server.github["acme/sample"].check_runs}
        assert by_sha[base.head]["conclusion"] == "action_required"
        assert by_sha[base.head]["output"]["title"].endswith(f"they are on branch jury/{slug}")
        assert by_sha[pushed]["conclusion"] == "success"
    else:  # statuses: no "action required" there, so failed; the fixes' status filed under their branch
        by_sha = {s["sha"]: s for s in base.server.gitlab["acme/sample"].statuses}
        assert by_sha[base.head]["status"] == "failed"
        assert f"they are on branch jury/{slug}" in by_sha[base.head]["description"]
        assert (by_sha[pushed]["status"], by_sha[pushed]["ref"]) == ("success", f"jury/{slug}")


@pytest.mark.parametrize("why", ["no token", "forge error"])
def test_a_head_the_forge_cannot_vouch_for_is_foreign(
    why: str, base: Base, jury, write_config, state_dir: Path
) -> None:
    url = seed(base, "github", fork=False)  # the forge would say "same repository", if asked
    env = dict(base.env)
    if why == "no token":
        del env["GITHUB_TOKEN"]
    else:
        base.server.fail_next(50, 500, message="upstream down", match="/pulls/1")
        env["JURY_FORGE_RETRIES"] = "0"
    before = refs(base.remote)
    r = review(jury, write_config, url, env)
    assert r.code == 0, r.out + r.err
    slug, target = the_run(jury, state_dir)
    assert refs(base.remote) == before
    assert (state_dir / "runs" / slug / "fixes.patch").exists()
    said = "no GITHUB_TOKEN to ask github" if why == "no token" else "the forge could not be asked"
    assert said in target["stateNote"], target
