"""Adding a forge is one registry entry and its client: ``fakehub``, declared by this file alone, is
reviewed and published to end to end.

Its pull requests live at ``http://127.0.0.1:PORT/fakehub/OWNER/REPO/pr/N`` (plain http on loopback,
its own path word and prefix, none of which Jury's own forges use); its API client is the GitHub client
pointed at the fake GitHub of tests/fakes/forge_server.py. Real ``jury review`` and ``jury worker``
processes on the shared Redis run with the entry registered: this module is their entry point
(``python -m tests.e2e.test_forge_kind ...`` registers fakehub, then runs ``jury``), so nothing in the
package names it. The review's target is fetched from a local bare repository behind the fakehub clone
URL (git's ``insteadOf``), and the run is published to the fake forge: a review and a check run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.fold import RunState, fold
from orchestrator.forge import FORGES, Forge, GitHub
from orchestrator.forge.kinds import GitHubForge
from orchestrator.forge.settings import ForgeSettings
from orchestrator.forge.transport import Clock, ETagCache, Sleep
from orchestrator.store.redis import from_url

TOKEN = "ghp_FAKEHUBsecretTOKEN0123456789"
ROOT = Path(__file__).resolve().parents[2]


class FakeHubClient(GitHub):
    """The GitHub client, speaking for fakehub: its requests report their forge as ``fakehub``."""

    kind = "fakehub"


class FakeHub(GitHubForge):
    """fakehub's descriptor: GitHub's API, its own web URLs. The API and token come from the
    environment this test gives the ``jury`` processes."""

    title = "FakeHub"
    pr_word = "pr"
    path_prefix = "/fakehub"
    schemes = ("http",)
    hosts = ()  # served on no fixed host: the run's JURY_FORGE_HOSTS allows the fake server's
    bare_names = False
    token_variable = "FAKEHUB_TOKEN"
    api_variable = "FAKEHUB_API"

    def web_hosts(self, settings: ForgeSettings) -> set[str]:
        return {(urlsplit(os.environ["FAKEHUB_API"]).hostname or "").lower()}

    def token(self, settings: ForgeSettings) -> SecretStr | None:
        return SecretStr(os.environ["FAKEHUB_TOKEN"])

    def client(
        self,
        settings: ForgeSettings,
        http: httpx.Client,
        *,
        sleep: Sleep = time.sleep,
        clock: Clock = time.time,
        cache: ETagCache | None = None,
    ) -> Forge:
        return FakeHubClient(
            http,
            token=os.environ["FAKEHUB_TOKEN"],
            api=os.environ["FAKEHUB_API"],
            login="jury-bot",
            sleep=sleep,
            clock=clock,
            cache=cache,
        )


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def fakehub(tmp_path: Path, sample_repo: Path) -> Iterator[dict[str, str]]:
    """The fake forge seeded with PR 7 of acme/sample, its git remote behind the fakehub clone URL, and
    the environment of the ``jury`` processes."""
    from tests.fakes.forge_server import FakePR, ForgeServer

    remote = tmp_path / "remotes" / "acme" / "sample.git"
    remote.parent.mkdir(parents=True)
    head = git(sample_repo, "rev-parse", "feature").strip()
    subprocess.run(["git", "clone", "--bare", "--quiet", str(sample_repo), str(remote)], check=True)
    git(remote, "update-ref", "refs/pull/7/head", head)
    git(remote, "symbolic-ref", "HEAD", "refs/heads/main")
    with ForgeServer() as server:
        web = f"{server.url}/fakehub/"
        gitconfig = tmp_path / "gitconfig"
        gitconfig.write_text(f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = {web}\n')
        server.user(TOKEN, "jury-bot", app=True)
        main_sha = git(sample_repo, "rev-parse", "main").strip()
        diff = {"stats.py": set(range(4, 14))}
        server.github_repo("acme/sample").add(
            FakePR(number=7, title="pr 7", head_sha=head, base_sha=main_sha, diff=diff)
        )
        yield (
            {
                "url": f"{web}acme/sample/pr/7",
                "FAKEHUB_API": server.github_api,
                "FAKEHUB_TOKEN": TOKEN,
                "JURY_FORGE_HOSTS": urlsplit(server.url).netloc,
                "GIT_CONFIG_GLOBAL": str(gitconfig),
                "PYTHONPATH": str(ROOT),
            },
            server,
        )


def launcher(*args: str) -> list[str]:
    """``jury ARGS`` run through this module, so the process has fakehub registered."""
    return [sys.executable, "-m", "tests.e2e.test_forge_kind", *args]


def published(url: str, slug: str, timeout: float = 150) -> RunState:
    store = from_url(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = fold(store.read(slug), slug)
        if state.published:
            return state
        time.sleep(0.3)
    pytest.fail(f"{slug} was not published: {state.state} {state.target.state_note}")


def test_a_forge_kind_declared_here_is_reviewed_and_published_to(
    fakehub, shared_redis: str, state_dir: Path, fake_state: Path, write_config, tmp_path: Path
) -> None:
    from tests.conftest import fake_agent, outside_env
    from tests.e2e.worker_process import jury_worker

    values, server = fakehub
    env = outside_env()
    env.update({k: v for k, v in values.items() if k != "url"})
    env.update({"JURY_REDIS_URL": shared_redis, "JURY_DIR": str(state_dir), "FAKE_STATE": str(fake_state)})
    config = write_config(fake_agent("finder", "find"), fake_agent("judge", "clean", "fix"))
    args = ["--config", str(config), "--rounds", "3", "--publish", "--no-refute"]
    args += ["--reviewer", "finder", "--judge", "judge", "--detach"]
    with jury_worker(env, tmp_path / "worker.log", concurrency=2, module="tests.e2e.test_forge_kind"):
        r = subprocess.run(
            launcher("review", values["url"], *args),
            env={**env, "NO_COLOR": "1"},
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        slug = r.stdout.strip().splitlines()[-1]
        state = published(shared_redis, slug)
    assert state.target.url == values["url"] and state.state == "converged", state.target.state_note
    (event,) = state.published
    assert event["ok"] and event["forge"] == "fakehub" and event["number"] == 7, event
    gh = server.github["acme/sample"]
    (check,) = gh.check_runs
    # converged, its fix on jury/<slug> only: the head still has the bug (docs/publishing.md)
    assert (check["name"], check["conclusion"], check["head_sha"]) == (
        "jury",
        "action_required",
        gh.prs[7].head_sha,
    )
    (review,) = gh.reviews
    assert review["pr"] == 7 and "**Accepted** (1)" in review["body"]
    (comment,) = gh.comments
    assert comment["path"] == "stats.py" and "Accepted and fixed" in comment["body"]
    for path in [*state_dir.rglob("*.ndjson"), *state_dir.rglob("*.json"), tmp_path / "worker.log"]:
        assert TOKEN not in path.read_text(errors="replace"), path


def test_the_entry_lives_only_where_it_is_registered() -> None:
    from orchestrator.errors import TargetError
    from orchestrator.forge.urls import parse_pr_url

    url = "http://127.0.0.1:8080/fakehub/acme/sample/pr/7"
    with pytest.raises(TargetError, match="not a pull/merge request URL"):
        parse_pr_url(url, ["127.0.0.1:8080"])
    with FORGES.registered("fakehub", FakeHub()):
        pr = parse_pr_url(url, ["127.0.0.1:8080"])
        assert (pr.forge, pr.project, pr.number, pr.head_ref) == (
            "fakehub",
            "acme/sample",
            "7",
            "refs/pull/7/head",
        )
        assert pr.remote_url == "http://127.0.0.1:8080/fakehub/acme/sample.git"
        with pytest.raises(TargetError, match="only http:// URLs"):
            parse_pr_url(url.replace("http:", "https:"), ["127.0.0.1:8080"])
        with pytest.raises(TargetError, match="not an allowed forge"):
            parse_pr_url(url)
    assert "fakehub" not in FORGES


if __name__ == "__main__":  # the entry point of this test's ``jury`` processes
    FORGES.register("fakehub", FakeHub())
    from jury_cli.app import main

    main()
