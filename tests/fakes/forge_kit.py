"""Shared set-up for the forge tests: a fake clock, a client per forge against ``ForgeServer``, seed PRs.

The fixtures are named with ``name=`` so a test module imports them (``*_fixture``) without its
parameters shadowing the imports.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest

from orchestrator.forge import GitHub, GitLab, InlineComment, ReviewDraft
from orchestrator.forge.base import Forge
from tests.fakes.forge_server import FakePR, ForgeServer, Repo

GH_TOKEN = "ghp_S3CRETgithubTOKEN0123456789"
GL_TOKEN = "glpat-S3CRETgitlabTOKEN987654"
GH_REPO = "octo/widgets"
GL_REPO = "acme/platform/widgets"  # a subgroup: the path must travel URL-encoded
HEAD = "a" * 40
START = 1_700_000_000.0


class FakeTime:
    """An injected clock and sleep: sleeping moves the clock, and every wait is recorded."""

    def __init__(self) -> None:
        self.now = START
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@dataclass
class Kit:
    kind: str
    server: ForgeServer
    forge: Forge
    repo: str
    state: Repo
    time: FakeTime
    token: str

    @property
    def list_call(self) -> str:
        if self.kind == "github":
            return f"GET /repos/{self.repo}/pulls"
        return "GET /projects/acme%2Fplatform%2Fwidgets/merge_requests"

    @property
    def list_path(self) -> str:
        prefix = "/github" if self.kind == "github" else "/gitlab/api/v4"
        return prefix + self.list_call.removeprefix("GET ")

    def rate_limited(self) -> int:
        return 403 if self.kind == "github" else 429

    def exhausted(self, seconds: float) -> dict[str, str]:
        names = ("x-ratelimit-remaining", "x-ratelimit-reset")
        if self.kind == "gitlab":
            names = ("RateLimit-Remaining", "RateLimit-Reset")
        return {names[0]: "0", names[1]: str(int(START + seconds))}


@pytest.fixture(autouse=True, name="clean_env")
def clean_env_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's own forge settings and tokens stay out of these tests."""
    for name in (
        "GITHUB_TOKEN",
        "GITLAB_TOKEN",
        "JURY_GITHUB_API",
        "JURY_GITLAB_API",
        "JURY_GITHUB_LOGIN",
        "JURY_GITHUB_CHECKS",
        "JURY_GITLAB_AUTH",
        "JURY_FORGE_MAX_WAIT",
        "JURY_FORGE_RETRIES",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(name="server")
def server_fixture() -> Iterator[ForgeServer]:
    with ForgeServer() as s:
        yield s


@pytest.fixture(name="http")
def http_fixture() -> Iterator[httpx.Client]:
    with httpx.Client() as client:
        yield client


def make_kit(kind: str, server: ForgeServer, http: httpx.Client, *, app: bool = False, **kw: object) -> Kit:
    time = FakeTime()
    if kind == "github":
        server.user(GH_TOKEN, "jury-bot", app=app)
        state = server.github_repo(GH_REPO)
        forge: Forge = GitHub(
            http,
            token=GH_TOKEN,
            api=server.github_api,
            sleep=time.sleep,
            clock=time.clock,
            **kw,  # type: ignore[arg-type]
        )
        return Kit(kind, server, forge, GH_REPO, state, time, GH_TOKEN)
    server.user(GL_TOKEN, "jury-bot")
    state = server.gitlab_project(GL_REPO)
    forge = GitLab(http, token=GL_TOKEN, api=server.gitlab_api, sleep=time.sleep, clock=time.clock, **kw)  # type: ignore[arg-type]
    return Kit(kind, server, forge, GL_REPO, state, time, GL_TOKEN)


@pytest.fixture(params=["github", "gitlab"], name="kit")
def kit_fixture(request: pytest.FixtureRequest, server: ForgeServer, http: httpx.Client) -> Kit:
    return make_kit(request.param, server, http)


def day(n: int) -> datetime:
    return datetime(2024, 5, n, 12, tzinfo=UTC)


def seed_five(state: Repo) -> None:
    """Five open PRs: a plain one, a draft, one on another base, a labelled fork, an old one."""
    state.add(FakePR(1, "plain", "1" * 40, updated_at=day(5), diff={"src/app.py": {10, 11, 12}}))
    state.add(FakePR(2, "draft", "2" * 40, draft=True, updated_at=day(6)))
    state.add(FakePR(3, "release fix", "3" * 40, base="release", updated_at=day(7)))
    state.add(FakePR(4, "labelled", "4" * 40, labels=["bug", "security"], fork=True, updated_at=day(8)))
    state.add(FakePR(5, "old", "5" * 40, updated_at=day(1)))


def writes(kit: Kit) -> int:
    return sum(len(kit.server.calls(m)) for m in ("POST", "PUT", "PATCH"))


def draft(run: str, body: str, *comments: tuple[str, int, str, str]) -> ReviewDraft:
    return ReviewDraft(
        run=run,
        body=body,
        comments=tuple(InlineComment(path=p, line=n, body=b, key=k) for p, n, b, k in comments),
    )
