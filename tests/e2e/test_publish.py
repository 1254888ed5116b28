"""Publishing runs to their PRs, end to end: real runs of PR URLs (local bare repositories behind
github.com / gitlab.com URLs), a real ``jury worker`` on the shared Redis, the fake GitHub and GitLab of
tests/fakes/forge_server.py. One review per run with inline comments on the diff's lines, the ``jury``
check telling the run's true state, and publishing again updating rather than piling up."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.fold import RunState, fold
from orchestrator.store.redis import from_url
from tests.conftest import FAKE_SANDBOX_KEYS, fake_agent, outside_env
from tests.e2e.worker_process import jury_worker
from tests.fakes.forge_server import FakePR, ForgeServer

GH_TOKEN = "ghp_PUBLISHsecretTOKEN0123456789"
GL_TOKEN = "glpat-PUBLISHsecretTOKEN98765"
BUG_LINE = 13  # `return ordered[middle]` in the sample's stats.py on the PR branch
DIFF = {"stats.py": set(range(4, 14))}  # what the forge shows of the PR: the median, three lines of context


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def branch_with_commit(repo: Path, name: str) -> str:
    """A branch off ``feature`` with one more (empty) commit: the same code under its own head sha."""
    ident = ["-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]
    sha = subprocess.run(
        ["git", "-C", str(repo), *ident, "commit-tree", "-p", "feature", "-m", name, "feature^{tree}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    git(repo, "update-ref", f"refs/heads/{name}", sha)
    return sha


@pytest.fixture
def forge(tmp_path: Path, sample_repo: Path) -> Iterator[tuple[ForgeServer, dict[str, str]]]:
    """The fake forges seeded with PRs 7, 8, 9 on GitHub and MR 3 on GitLab, and their git remotes."""
    remote = tmp_path / "remotes" / "acme" / "sample.git"
    remote.parent.mkdir(parents=True)
    heads = {
        7: git(sample_repo, "rev-parse", "feature").strip(),
        8: branch_with_commit(sample_repo, "pr8"),
        9: branch_with_commit(sample_repo, "pr9"),
    }
    subprocess.run(["git", "clone", "--bare", "--quiet", str(sample_repo), str(remote)], check=True)
    for n, sha in heads.items():
        git(remote, "update-ref", f"refs/pull/{n}/head", sha)
    git(remote, "update-ref", "refs/merge-requests/3/head", heads[7])
    git(remote, "symbolic-ref", "HEAD", "refs/heads/main")
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(
        f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://github.com/\n'
        f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://gitlab.com/\n'
    )
    main_sha = git(sample_repo, "rev-parse", "main").strip()
    with ForgeServer() as server:
        server.user(GH_TOKEN, "jury-bot", app=True)
        server.user(GL_TOKEN, "jury-bot")
        gh = server.github_repo("acme/sample")
        for n, sha in heads.items():
            gh.add(FakePR(number=n, title=f"pr {n}", head_sha=sha, base_sha=main_sha, diff=dict(DIFF)))
        # GitLab shows only the first lines of stats.py: the finding's line is not on its diff
        gl = server.gitlab_project("acme/sample")
        gl.add(
            FakePR(number=3, title="mr 3", head_sha=heads[7], base_sha=main_sha, diff={"stats.py": {1, 2}})
        )
        env = {
            "GITHUB_TOKEN": GH_TOKEN,
            "GITLAB_TOKEN": GL_TOKEN,
            "JURY_GITHUB_API": server.github_api,
            "JURY_GITHUB_LOGIN": "jury-bot",  # an app token cannot ask GET /user who it is
            "JURY_GITLAB_API": server.gitlab_api,
            "GIT_CONFIG_GLOBAL": str(gitconfig),
        }
        yield server, env


@pytest.fixture
def worker(shared_redis: str, state_dir: Path, fake_state: Path, tmp_path: Path, forge) -> Iterator[dict]:
    env = outside_env()
    env.update(forge[1])
    env.update({"JURY_REDIS_URL": shared_redis, "JURY_DIR": str(state_dir), "FAKE_STATE": str(fake_state)})
    with jury_worker(env, tmp_path / "worker.log", concurrency=3):
        yield {**forge[1], "JURY_REDIS_URL": shared_redis}


def published(url: str, slug: str, count: int = 1, timeout: float = 150) -> RunState:
    store = from_url(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = fold(store.read(slug), slug)
        if len(state.published) >= count:
            return state
        time.sleep(0.3)
    pytest.fail(f"{slug} was not published: {state.state} {state.target.state_note} {state.published}")


def test_publish_reviews_and_checks_on_github_and_gitlab(
    jury, worker, forge, write_config, tmp_path: Path, state_dir: Path
) -> None:
    server, _ = forge
    missing = (
        '[agents.ghost]\nargv = ["/nonexistent/jury-agent", "{prompt_file}"]\nexpect_seconds = 5\n'
        + FAKE_SANDBOX_KEYS
    )
    config = write_config(
        fake_agent("finder", "find"),
        fake_agent("quiet", "clean"),
        fake_agent("judge", "clean", "fix"),
        fake_agent("sloppy", "clean", "noproof"),
        missing,
    )
    common = ["--config", str(config), "--rounds", "3", "--publish", "--no-refute"]
    # a local branch has no PR to publish to: refused before anything runs
    local = jury("review", str(tmp_path / "src" / "sample"), "--branch", "feature", *common, env=worker)
    assert local.code != 0 and "--publish needs a PR/MR URL" in local.err

    slugs = {}
    for n, reviewers, judge in ((7, "finder,quiet", "judge"), (8, "finder", "sloppy"), (9, "ghost", "judge")):
        r = jury(
            "review",
            f"https://github.com/acme/sample/pull/{n}",
            "--reviewer",
            reviewers,
            "--judge",
            judge,
            *common,
            "--detach",
            env=worker,
        )
        assert r.code == 0, r.out + r.err
        slugs[n] = r.out.strip().splitlines()[-1]

    # GitLab, in the foreground: the command waits for the publish and says what it did
    r = jury(
        "review",
        "https://gitlab.com/acme/sample/-/merge_requests/3",
        "--reviewer",
        "finder,quiet",
        "--judge",
        "judge",
        *common,
        env=worker,
        timeout=240,
    )
    assert r.code == 0, r.out + r.err
    # converged with a fix accepted, but the MR's head lacks it: GitLab's statuses have no "action
    # required", so failed, saying where the fix is (no --push: the run's own branch, `jury fetch`)
    assert "published to gitlab acme/sample#3" in r.out and "check jury action_required" in r.out
    gl = server.gitlab["acme/sample"]
    (status,) = gl.statuses
    assert (status["name"], status["status"]) == ("jury", "failed")
    assert (
        "not on this commit" in status["description"] and "makes them branch jury/" in status["description"]
    )
    assert status["ref"] == "refs/merge-requests/3/head"
    notes = [n for d in gl.discussions[3] for n in d["notes"]]
    assert len(notes) == 1  # the summary; the finding's line is not on GitLab's diff: it is listed there
    assert "Not on the diff" in notes[0]["body"] and f"stats.py:{BUG_LINE}" in notes[0]["body"]

    gh = server.github["acme/sample"]
    states = {n: published(worker["JURY_REDIS_URL"], slug) for n, slug in slugs.items()}
    assert [states[n].state for n in (7, 8, 9)] == ["converged", "human", "human"], [
        (s.state, s.target.state_note) for s in states.values()
    ]
    for n in (7, 8, 9):
        (event,) = states[n].published
        assert event["ok"], event
        assert event["forge"] == "github" and event["number"] == n and event["reviewUrl"]
    by_head = {run["head_sha"]: run for run in gh.check_runs}
    assert len(gh.check_runs) == 3
    expected = {7: "action_required", 8: "failure", 9: "neutral"}  # 7: its head lacks the fix
    for n, conclusion in expected.items():
        run = by_head[gh.prs[n].head_sha]
        assert (run["name"], run["conclusion"]) == ("jury", conclusion)
        assert states[n].published[0]["conclusion"] == conclusion
    assert "could not review" in by_head[gh.prs[9].head_sha]["output"]["title"]
    title7 = by_head[gh.prs[7].head_sha]["output"]["title"]
    assert f"not on this commit: `jury fetch {slugs[7]}` makes them branch jury/{slugs[7]}" in title7
    assert len(gh.reviews) == 3 and sorted(r["pr"] for r in gh.reviews) == [7, 8, 9]
    # inline: the accepted finding of 7 with its fix's commit; the open one of 8; none for 9
    by_pr: dict[int, list[dict]] = {}
    for c in gh.comments:
        by_pr.setdefault(c["pr"], []).append(c)
    (fixed,) = by_pr[7]
    fix_sha = next(c.sha for c in states[7].commits if c.finding)
    assert (fixed["path"], fixed["line"]) == ("stats.py", BUG_LINE)
    assert "Accepted and fixed" in fixed["body"] and fix_sha[:12] in fixed["body"]
    (still_open,) = by_pr[8]
    assert (still_open["path"], still_open["line"]) == ("stats.py", BUG_LINE) and "**Open**" in still_open[
        "body"
    ]
    assert 9 not in by_pr
    review7 = next(r for r in gh.reviews if r["pr"] == 7)
    assert "**Accepted** (1)" in review7["body"] and "**Cost**" in review7["body"]

    # by hand, again: the same review, comments and check are updated, nothing new is posted
    again = jury("publish", slugs[7], env=worker)
    assert again.code == 0, again.out + again.err
    assert "updated" in again.out and "check jury: action_required" in again.out
    assert (
        len(gh.reviews) == 3
        and len(gh.check_runs) == 3
        and len(by_pr[7]) == len([c for c in gh.comments if c["pr"] == 7])
    )
    shown = jury("show", slugs[7], env=worker)
    assert "published to github acme/sample#7" in shown.out and "2 publish(es)" in shown.out

    # a publish that fails is recorded and shown, never silent (and never with the token)
    server.fail_next(3, 404, message="Not Found", match="/pulls/8/reviews")
    failed = jury("publish", slugs[8], env=worker)
    assert failed.code != 0 and "publishing" in failed.err and "404" in failed.err, failed.err
    assert GH_TOKEN not in failed.out + failed.err
    assert "publish FAILED" in jury("show", slugs[8], env=worker).out
    last = fold(from_url(worker["JURY_REDIS_URL"]).read(slugs[8]), slugs[8]).published[-1]
    assert not last["ok"] and last["error"].startswith("the review:")
    assert last["checkId"] and len(gh.check_runs) == 3  # the check was still set, on the same check run

    # the tokens never reach the events, the run records or the logs
    for path in [*state_dir.rglob("*.ndjson"), *state_dir.rglob("*.json"), tmp_path / "worker.log"]:
        text = path.read_text(errors="replace")
        assert GH_TOKEN not in text and GL_TOKEN not in text, path

    # jury verify by the forge's name: the PR URL runs' mirror fetches trunk from the remote; trunk has
    # no median yet (nothing merged): the fix's test cannot run there, which is no regression
    remote = tmp_path / "remotes" / "acme" / "sample.git"
    before = jury("verify", "acme/sample", "gitlab:acme/sample", "--trunk", "main", env=worker)
    assert before.code == 0, before.out + before.err
    assert "0 of 2 regression test(s) pass" in before.out  # run 7 (GitHub) and the GitLab run
    # the fix of run 7 merged into the remote's main: its test passes on trunk
    mirror = Path(states[7].target.path or "")
    git(mirror, "push", "--quiet", str(remote), f"jury/{slugs[7]}:refs/heads/main")
    after = jury("verify", "github:acme/sample", env=worker)  # GitHub's acme/sample only
    assert after.code == 0, after.out + after.err
    assert "1 of 1 regression test(s) pass" in after.out
    assert "in 0 converged run(s)" in jury("verify", "other/repo", env=worker).out
    trunk_runs = fold(from_url(worker["JURY_REDIS_URL"]).read(slugs[7]), slugs[7])
    (f7,) = [f for f in trunk_runs.findings.values() if f.status == "accepted"]
    assert [r["passed"] for r in f7.trunk_runs] == [False, True]
