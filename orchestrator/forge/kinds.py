"""Forge kinds, declared once: what Jury knows of each forge it reviews pull requests on.

A forge kind's descriptor (``ForgeDescriptor``) says how its pull-request URLs look (the path word
before the number, an optional prefix, how many owner/group names, the schemes it is fetched over, the
hosts that serve it alone), where a clone keeps a request's head, which commit-status states its checks
take, which settings hold its API and token, and how to build its API client. The one URL parser
(``orchestrator.forge.urls``), the forge names of ``jury sweep`` (``orchestrator.forge.select``) and
every worker that asks a forge read these entries, so a new forge is one entry here (or a test's
``FORGES.registered``) and its client; nothing else names github or gitlab.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from functools import cached_property
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from orchestrator.forge import github, gitlab
from orchestrator.forge.base import Forge
from orchestrator.forge.settings import ForgeSettings
from orchestrator.forge.transport import Clock, ETagCache, Sleep
from orchestrator.registry import Registry
from orchestrator.trust import MAX_FORGE_DEPTH

SEGMENT = r"[A-Za-z0-9_.][A-Za-z0-9_.-]*"  # one owner, group or repository name as a path takes it


def api_host(url: str) -> str:
    """The host (lower case, without a port) of an API URL."""
    return (urlsplit(url).hostname or "").lower()


class ForgeDescriptor:
    """What Jury knows of one forge kind; subclasses fill in the class attributes and ``client``."""

    title = "a forge"  # how a message names it ("GitHub")
    request = "pull request"  # what it calls a request to merge
    pr_word = "pull"  # the path word before a request's number
    dash = False  # whether GitLab's "/-/" may stand before ``pr_word``
    path_prefix = ""  # what the web path starts with before the owner ("/fakehub")
    min_names, max_names = 2, 2  # owner (or groups) and repository
    names_shape = "OWNER/REPO"  # how a message spells the names
    schemes: tuple[str, ...] = ("https",)  # what a request's URL may be fetched over
    hosts: tuple[str, ...] = ()  # web hosts that serve this kind alone (allowed without JURY_FORGE_HOSTS)
    bare_names = False  # whether a bare OWNER/REPO (no prefix, no URL) may mean this forge
    head_ref_format = "refs/pull/{number}/head"  # where a clone keeps a request's head
    check_states: Mapping[str, str] = {}  # a check's conclusion -> the forge's commit-status state
    token_variable = ""  # the environment variable of its token
    api_variable = ""  # the environment variable of its API URL

    @cached_property
    def pr_path(self) -> re.Pattern[str]:
        """A request's web path: the names (``project``), an optional "/-/" and the number (``n``, any
        text: the parser says what is wrong with it)."""
        return re.compile(
            rf"{re.escape(self.path_prefix)}/(?P<project>.+?)(?P<dash>/-)?/{re.escape(self.pr_word)}"
            r"/(?P<n>[^/]*)/?"
        )

    @cached_property
    def repo_path(self) -> re.Pattern[str]:
        """A repository's web path (``.git`` allowed), or a request's."""
        return re.compile(
            rf"{re.escape(self.path_prefix)}/(?P<project>{SEGMENT}(?:/{SEGMENT})*?)"
            rf"(?:(?:/-)?/{re.escape(self.pr_word)}/(?P<n>\d+))?/?"
        )

    def names_fit(self, count: int) -> bool:
        return self.min_names <= count <= self.max_names

    def names_problem(self) -> str:
        """What a request URL with the wrong number of names is told."""
        if self.min_names == self.max_names:
            return f"a {self.request} URL names exactly {self.names_shape}"
        return f"expected {self.names_shape} before {self.pr_word}"

    def head_ref(self, number: int | str) -> str:
        return self.head_ref_format.format(number=number)

    def clone_url(self, scheme: str, host: str, project: str) -> str:
        """The repository's clone URL on its forge (git's ``url.<base>.insteadOf`` rewrites apply)."""
        return f"{scheme}://{host}{self.path_prefix}/{project}.git"

    def web_hosts(self, settings: ForgeSettings) -> set[str]:
        """The web hosts whose API Jury is configured for: a URL on another host is refused rather than
        guessed, because the guess would send the token to that host's API."""
        return set(self.hosts)

    def token(self, settings: ForgeSettings) -> SecretStr | None:
        return None

    def client(
        self,
        settings: ForgeSettings,
        http: httpx.Client,
        *,
        sleep: Sleep = time.sleep,
        clock: Clock = time.time,
        cache: ETagCache | None = None,
    ) -> Forge:
        raise NotImplementedError


class GitHubForge(ForgeDescriptor):
    title = "GitHub"
    hosts = ("github.com",)
    bare_names = True
    head_ref_format = github.HEAD_REF
    check_states = github.STATUS_STATE
    token_variable = "GITHUB_TOKEN"
    api_variable = "JURY_GITHUB_API"

    def web_hosts(self, settings: ForgeSettings) -> set[str]:
        api = api_host(settings.github_api)
        return {*self.hosts, api, api.removeprefix("api.")}

    def token(self, settings: ForgeSettings) -> SecretStr | None:
        return settings.github_token

    def client(
        self,
        settings: ForgeSettings,
        http: httpx.Client,
        *,
        sleep: Sleep = time.sleep,
        clock: Clock = time.time,
        cache: ETagCache | None = None,
    ) -> Forge:
        token = self.token(settings)
        return github.GitHub(
            http,
            token=token.get_secret_value() if token else None,
            api=settings.github_api,
            login=settings.github_login,
            checks=settings.github_checks,
            sleep=sleep,
            clock=clock,
            cache=cache,
            max_retries=settings.retries,
            max_wait=settings.max_wait,
        )


class GitLabForge(ForgeDescriptor):
    title = "GitLab"
    request = "merge request"
    pr_word = "merge_requests"
    dash = True
    max_names = MAX_FORGE_DEPTH  # GitLab nests subgroups 20 deep, plus the project
    names_shape = "GROUP[/SUB...]/PROJECT"
    hosts = ("gitlab.com",)
    bare_names = True
    head_ref_format = gitlab.HEAD_REF
    check_states = gitlab.STATUS_STATE
    token_variable = "GITLAB_TOKEN"
    api_variable = "JURY_GITLAB_API"

    def web_hosts(self, settings: ForgeSettings) -> set[str]:
        return {*self.hosts, api_host(settings.gitlab_api)}

    def token(self, settings: ForgeSettings) -> SecretStr | None:
        return settings.gitlab_token

    def client(
        self,
        settings: ForgeSettings,
        http: httpx.Client,
        *,
        sleep: Sleep = time.sleep,
        clock: Clock = time.time,
        cache: ETagCache | None = None,
    ) -> Forge:
        token = self.token(settings)
        return gitlab.GitLab(
            http,
            token=token.get_secret_value() if token else None,
            api=settings.gitlab_api,
            auth_scheme=settings.gitlab_auth,
            sleep=sleep,
            clock=clock,
            cache=cache,
            max_retries=settings.retries,
            max_wait=settings.max_wait,
        )


FORGES: Registry[ForgeDescriptor] = Registry("forge kind")

FORGES.register("github", GitHubForge())
FORGES.register("gitlab", GitLabForge())
