"""Malformed forge answers reach the CLI as one-line errors, never a traceback: ``jury publish SLUG``
against the fake GitHub and GitLab answering one call of each family publishing makes with a list where
an object belongs, or a string where one belongs, exits 1 with one line naming the call and appends a
``run.published`` failure event; ``jury review --publish`` of a run that converges but cannot be
published exits non-zero.

Real ``jury`` processes (embedded Redis, local workers), real git behind github.com / gitlab.com URLs,
the fake forges of tests/fakes/forge_server.py."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import fake_agent
from tests.fakes.forge_server import FakePR, ForgeServer

GH_TOKEN = "ghp_MALFORMEDsecretTOKEN0123456789"
GL_TOKEN = "glpat-MALFORMEDsecretTOKEN98765"
URLS = {
    "github": "https://github.com/acme/sample/pull/7",
    "gitlab": "https://gitlab.com/acme/sample/-/merge_requests/7",
}
DIFF = {"stats.py": set(range(1, 20))}
SHAPES = {  # (an object's answer, a list's answer)
    "list": (["x", {"id": 1}], [["x", {"id": 1}]]),
    "string": ("not an object", ["not an object"]),
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@dataclass
class Forges:
    server: ForgeServer
    env: dict[str, str]


@pytest.fixture
def forges(tmp_path: Path, sample_repo: Path) -> Iterator[Forges]:
    remote = tmp_path / "remotes" / "acme" / "sample.git"
    remote.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "--bare", "--quiet", str(sample_repo), str(remote)], check=True)
    head = git(remote, "rev-parse", "feature").strip()
    git(remote, "update-ref", "refs/pull/7/head", head)
    git(remote, "update-ref", "refs/merge-requests/7/head", head)
    git(remote, "symbolic-ref", "HEAD", "refs/heads/main")
    main = git(remote, "rev-parse", "main").strip()
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(
        f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://github.com/\n'
        f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://gitlab.com/\n'
    )
    with ForgeServer() as server:
        server.user(GH_TOKEN, "jury-bot", app=True)
        server.user(GL_TOKEN, "jury-bot")
        server.github_repo("acme/sample").add(FakePR(7, "pr", head, base_sha=main, diff=dict(DIFF)))
        server.gitlab_project("acme/sample").add(FakePR(7, "mr", head, base_sha=main, diff=dict(DIFF)))
        env = {
            "GITHUB_TOKEN": GH_TOKEN,
            "GITLAB_TOKEN": GL_TOKEN,
            "JURY_GITHUB_API": server.github_api,
            "JURY_GITHUB_LOGIN": "jury-bot",
            "JURY_GITLAB_API": server.gitlab_api,
            "GIT_CONFIG_GLOBAL": str(gitconfig),
            "JURY_FORGE_RETRIES": "0",
        }
        yield Forges(server, env)


def review(jury, write_config, url: str, env: dict[str, str]):
    config = write_config(fake_agent("finder", "find"), fake_agent("judge", "clean", "fix"))
    args = ["review", url, "--reviewer", "finder", "--judge", "judge", "--config", str(config)]
    return jury(*args, "--rounds", "3", "--no-refute", "--publish", env=env, timeout=240)


def events(state_dir: Path, slug: str) -> list[dict]:
    lines = (state_dir / "runs" / slug / "events.ndjson").read_text().splitlines()
    return [json.loads(line) for line in lines]


def forget(server: ForgeServer) -> None:
    """The forges forget what was published: the next publish is a first one again."""
    for repo in (server.github["acme/sample"], server.gitlab["acme/sample"]):
        repo.reviews.clear()
        repo.comments.clear()
        repo.check_runs.clear()
        repo.statuses.clear()
        repo.discussions.clear()


CLI_CASES = [
    ("github", "GET", r"/pulls/7/reviews$", True),
    ("github", "GET", r"/pulls/7/comments$", True),
    ("github", "POST", r"/pulls/7/reviews$", False),
    ("github", "GET", r"/reviews/\d+/comments$", True),
    ("github", "GET", r"/check-runs$", False),
    ("github", "POST", r"/check-runs$", False),
    ("gitlab", "GET", r"/user$", False),
    ("gitlab", "GET", r"/merge_requests/7$", False),
    ("gitlab", "GET", r"/discussions$", True),
    ("gitlab", "POST", r"/discussions$", False),
    ("gitlab", "POST", r"/merge_requests/7/notes$", False),
    ("gitlab", "GET", r"/statuses$", True),
    ("gitlab", "POST", r"/statuses/[0-9a-f]+$", False),
]


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_jury_publish_says_a_malformed_answer_in_one_line_and_records_it(
    kind: str, forges: Forges, jury, write_config, state_dir: Path
) -> None:
    server = forges.server
    # the run converges, but one of its publish calls is answered with a list where an object belongs:
    # `jury review --publish` exits non-zero, and says why
    first = next((m, p) for k, m, p, listed in CLI_CASES if k == kind and not listed)
    server.garble_next(*first, SHAPES["list"][0])
    r = review(jury, write_config, URLS[kind], forges.env)
    assert (state_dir / "runs").is_dir(), r.out + r.err
    (slug,) = [d.name for d in (state_dir / "runs").iterdir()]
    shown = json.loads(jury("show", slug, "--json").out)["target"]
    assert shown["state"] == "converged", shown
    assert r.code == 1, r.out + r.err
    assert "publish FAILED" in r.out and "unexpected answer" in r.out
    assert "Traceback" not in r.out + r.err
    (failed,) = [e for e in events(state_dir, slug) if e["t"] == "run.published"]
    assert failed["ok"] is False and "unexpected answer" in failed["error"]

    for k, method, pattern, listed in CLI_CASES:
        if k != kind:
            continue
        for shape, answers in SHAPES.items():
            forget(server)
            server.garble_next(method, pattern, answers[listed])
            before = len([e for e in events(state_dir, slug) if e["t"] == "run.published"])
            r = jury("publish", slug, env=forges.env)
            what = f"{method} {pattern} {shape}: {r.out}{r.err}"
            assert r.code == 1, what
            assert not server.garbles, what  # the malformed answer was asked for, and is what failed
            lines = [line for line in r.err.splitlines() if line.strip()]
            said = [line for line in lines if line.startswith("jury:")]
            assert len(said) == 1 and said[0].startswith(f"jury: publishing {slug} failed:"), what
            assert "unexpected answer: expected " in said[0] and f"{method} /" in said[0], what
            assert all(json.loads(line)["event"] for line in lines if line not in said), what  # logs
            assert "Traceback" not in r.out + r.err and GH_TOKEN not in r.err and GL_TOKEN not in r.err
            published = [e for e in events(state_dir, slug) if e["t"] == "run.published"]
            assert len(published) == before + 1 and published[-1]["ok"] is False, what
            assert "unexpected answer" in published[-1]["error"], what

    # with the forge answering as it should, publishing succeeds and says so
    forget(server)
    r = jury("publish", slug, env=forges.env)
    assert r.code == 0 and "published to" in r.out, r.out + r.err
