"""Which forge a name or URL means, and a client for it built from the environment.

Names accepted wherever Jury takes a repository or PR on a forge (``jury sweep OWNER/REPO...``):

==========================================  =========================================================
``github:OWNER/REPO``                       GitHub, explicitly
``gitlab:GROUP/SUB/PROJECT``                GitLab, explicitly (any depth of subgroups)
``OWNER/REPO``                              GitHub: two segments is the common case
``GROUP/SUB/PROJECT``                       GitLab: only GitLab nests, so three or more segments
``https://github.com/OWNER/REPO[/pull/N]``  GitHub (also the host of ``JURY_GITHUB_API``)
``https://HOST/GROUP/.../PROJECT[/-/merge_requests/N]``  GitLab on gitlab.com, the host of
                                            ``JURY_GITLAB_API``, or any host when the URL has ``/-/``
==========================================  =========================================================

A two-segment GitLab project needs the ``gitlab:`` prefix (or its URL). A URL on a host Jury does not
know is refused rather than guessed, because the guess would send the token to that host's API. What
each forge kind's names and URLs look like is its descriptor's (``orchestrator.forge.kinds``); a request
URL is read by the one parser (``orchestrator.forge.urls``); another registered forge kind is named
``KIND:NAMES`` or by its URLs.

Settings: ``JURY_GITHUB_API`` (default ``https://api.github.com``), ``JURY_GITLAB_API`` (default
``https://gitlab.com/api/v4``), the tokens from ``GITHUB_TOKEN`` and ``GITLAB_TOKEN``, and
``JURY_GITHUB_LOGIN`` (a GitHub App's bot account), ``JURY_GITHUB_CHECKS`` (auto | checks | statuses),
``JURY_GITLAB_AUTH`` (private-token | bearer), ``JURY_FORGE_MAX_WAIT`` (the longest rate-limit wait, in
seconds) and ``JURY_FORGE_RETRIES``.
"""

from __future__ import annotations

import re
import time
from typing import NamedTuple
from urllib.parse import urlsplit

import httpx

from orchestrator.errors import TargetError, UsageError
from orchestrator.forge.base import Forge, ForgeKind
from orchestrator.forge.kinds import FORGES, SEGMENT, ForgeDescriptor
from orchestrator.forge.settings import ForgeSettings, load_forge_settings
from orchestrator.forge.transport import Clock, ETagCache, Sleep
from orchestrator.forge.urls import split_pr_url

__all__ = [
    "ForgeRef",
    "ForgeSettings",
    "ForgeTarget",
    "forge_for",
    "load_forge_settings",
    "make_forge",
    "parse_ref",
]

_PATH_RE = re.compile(rf"{SEGMENT}(?:/{SEGMENT})+")
_PREFIXED_RE = re.compile(r"^([a-z][a-z0-9_-]{0,39}):(.+)$")


class ForgeRef(NamedTuple):
    """A repository on a forge, and a PR number when the text named one."""

    kind: ForgeKind
    repo: str
    number: int | None = None

    def __str__(self) -> str:
        return f"{self.kind}:{self.repo}" + (f"#{self.number}" if self.number is not None else "")


class ForgeTarget(NamedTuple):
    forge: Forge
    repo: str
    number: int | None


def _bare(repo: str) -> str:
    return repo.removesuffix(".git")


def _expected() -> str:
    kinds = ", ".join(f"{name}:{d.names_shape}" for name, d in FORGES.items())
    return f"expected OWNER/REPO, {kinds}, or a PR/MR URL"


def parse_ref(text: str, settings: ForgeSettings | None = None) -> ForgeRef:
    """The forge, repository and PR number ``text`` names (see the module's table)."""
    settings = settings or ForgeSettings.model_construct()
    text = text.strip()
    prefixed = _PREFIXED_RE.match(text)
    if prefixed and prefixed[1] in FORGES:
        kind, repo = prefixed[1], prefixed[2].strip("/")
        descriptor = FORGES[kind]
        if not _PATH_RE.fullmatch(repo) or not descriptor.names_fit(repo.count("/") + 1):
            raise UsageError(f"not a repository: {text!r} (expected {kind}:{descriptor.names_shape})")
        return ForgeRef(kind, repo)
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):
        return _parse_url(text, settings)
    if _PATH_RE.fullmatch(text) and ".." not in text.split("/"):
        for kind, descriptor in FORGES.items():  # the first that takes so many names: OWNER/REPO is GitHub
            if descriptor.bare_names and descriptor.names_fit(text.count("/") + 1):
                return ForgeRef(kind, text)
    raise UsageError(f"not a repository or PR: {text!r} ({_expected()})")


def _served_by(host: str, settings: ForgeSettings) -> list[str]:
    """The forge kinds whose API Jury is configured for on web host ``host``."""
    return [kind for kind, d in FORGES.items() if host in d.web_hosts(settings)]


def _parse_url(text: str, settings: ForgeSettings) -> ForgeRef:
    split = urlsplit(text)
    host = (split.hostname or "").lower()
    try:
        pr = split_pr_url(text)
    except TargetError as exc:
        if any(d.pr_path.fullmatch(split.path) for d in FORGES.values()):
            raise UsageError(str(exc)) from None  # a request URL, and a bad one
        return _parse_repo_url(text, host, split.path, settings)
    hosts = pr.descriptor.web_hosts(settings)
    if host not in hosts and pr.host not in hosts:
        raise UsageError(
            f"{host} is not the {pr.descriptor.title} Jury talks to: set {pr.descriptor.api_variable} "
            "to its API URL"
        )
    return ForgeRef(pr.forge, pr.project, int(pr.number))


def _parse_repo_url(text: str, host: str, path: str, settings: ForgeSettings) -> ForgeRef:
    """A repository's web URL: the forge kind whose API is configured for its host."""
    kinds = _served_by(host, settings)
    if not kinds:
        variables = " or ".join(d.api_variable for d in FORGES.values() if d.api_variable)
        raise UsageError(
            f"unknown forge host {host!r}: set {variables} to its API URL, or name the repository as "
            + ", ".join(f"{name}:{d.names_shape}" for name, d in FORGES.items())
        )
    if len(kinds) > 1:
        raise UsageError(f"{host} serves {' and '.join(kinds)}: name the repository as KIND:NAMES")
    descriptor: ForgeDescriptor = FORGES[kinds[0]]
    found = descriptor.repo_path.fullmatch(path)
    if not found or not descriptor.names_fit(found["project"].count("/") + 1):
        raise UsageError(f"not a {descriptor.title} repository or {descriptor.request} URL: {text}")
    return ForgeRef(kinds[0], _bare(found["project"]), int(found["n"]) if found["n"] else None)


def make_forge(
    kind: ForgeKind,
    settings: ForgeSettings,
    client: httpx.Client,
    *,
    sleep: Sleep = time.sleep,
    clock: Clock = time.time,
    cache: ETagCache | None = None,
) -> Forge:
    """The API client of forge kind ``kind``, as its descriptor builds it from ``settings``."""
    return FORGES[kind].client(settings, client, sleep=sleep, clock=clock, cache=cache)


def forge_for(
    url_or_slug: str,
    settings: ForgeSettings | None = None,
    *,
    client: httpx.Client | None = None,
    sleep: Sleep = time.sleep,
    clock: Clock = time.time,
    cache: ETagCache | None = None,
) -> ForgeTarget:
    """The forge client for ``url_or_slug``, with the repository and PR number it names.

    Without ``client`` a new ``httpx.Client`` is made for it; pass one to share it and control its life.
    """
    settings = settings or load_forge_settings()
    ref = parse_ref(url_or_slug, settings)
    forge = make_forge(ref.kind, settings, client or httpx.Client(), sleep=sleep, clock=clock, cache=cache)
    return ForgeTarget(forge, ref.repo, ref.number)
