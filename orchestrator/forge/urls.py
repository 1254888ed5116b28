"""The one parser of pull/merge request URLs, for every forge kind (``orchestrator.forge.kinds``).

A request URL is validated in full before anything is fetched or asked: a scheme its forge is fetched
over (https for GitHub and GitLab), no credentials, query or fragment, a path its forge kind recognises
(``ForgeDescriptor.pr_path``), owner, group and repository names that cannot climb, escape or read as
options, the number of names its kind takes, and a number of ASCII digits. ``parse_pr_url`` also checks
the host against the allow-list (the hosts each kind is served on alone, and the operator's
``JURY_FORGE_HOSTS``); ``split_pr_url`` leaves that to its caller (``orchestrator.forge.select`` checks
the host against the API it would send the token to).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from orchestrator.errors import TargetError
from orchestrator.forge.kinds import FORGES, ForgeDescriptor
from orchestrator.trust import forge_identity, forge_name_problem

URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
PR_NUMBER = re.compile(r"[1-9][0-9]{0,9}")  # ASCII digits only: \d would take any script's digits


@dataclass(frozen=True)
class PullRequest:
    """A validated PR/MR URL, in parts."""

    host: str  # lower case, with a port when the URL has one
    names: tuple[str, ...]  # owner (or groups) and repository
    kind: str  # the path word before the number: pull | merge_requests | ...
    number: str
    forge: str  # its forge kind, a name in FORGES
    scheme: str = "https"

    @property
    def project(self) -> str:
        return "/".join(self.names)

    @property
    def identity(self) -> str:
        return forge_identity(self.host, list(self.names))

    @property
    def descriptor(self) -> ForgeDescriptor:
        return FORGES[self.forge]

    @property
    def remote_url(self) -> str:
        """The repository's clone URL on its forge (git's ``url.<base>.insteadOf`` rewrites apply)."""
        return self.descriptor.clone_url(self.scheme, self.host, self.project)

    @property
    def head_ref(self) -> str:
        """The ref the forge keeps the request's head under."""
        return self.descriptor.head_ref(self.number)


def expected() -> str:
    """The request URLs Jury takes, one example per registered forge kind."""
    shapes = [
        f"{d.schemes[0]}://HOST{d.path_prefix}/{d.names_shape}/{'-/' if d.dash else ''}{d.pr_word}/N"
        for d in FORGES.values()
    ]
    return "expected " + " or ".join(shapes)


def _split(url: str) -> tuple[str, SplitResult, int | None]:
    """The URL stripped and split, and its port; the syntax every request URL shares."""
    text = url.strip()
    if not URL_SCHEME.match(text):
        raise TargetError(f"not a pull/merge request URL: {url} ({expected()})")
    try:
        parts = urlsplit(text)
        port = parts.port  # raises on a port that is not a number
    except ValueError as exc:
        raise TargetError(f"PR URL {url}: cannot be parsed: {exc}") from None
    return text, parts, port


def _recognise(url: str, path: str) -> tuple[str, re.Match[str]]:
    """The forge kind whose request path ``path`` is, and the match."""
    for name, descriptor in FORGES.items():
        found = descriptor.pr_path.fullmatch(path)
        if found:
            return name, found
    raise TargetError(f"not a pull/merge request URL: {url} ({expected()})")


def _check_scheme(url: str, scheme: str, descriptor: ForgeDescriptor) -> None:
    if scheme.lower() not in descriptor.schemes:
        allowed = " or ".join(f"{s}://" for s in descriptor.schemes)
        raise TargetError(f"PR URL {url}: only {allowed} URLs are fetched, not {scheme}://")


def _check_names(url: str, found: re.Match[str], descriptor: ForgeDescriptor) -> tuple[str, ...]:
    if found["dash"] and not descriptor.dash:
        dashed = ", ".join(d.pr_word for d in FORGES.values() if d.dash) or "nothing"
        raise TargetError(f"PR URL {url}: '/-/' goes only before {dashed} ({expected()})")
    names = found["project"].split("/")
    for name in names:
        if (problem := forge_name_problem(name)) is not None:
            raise TargetError(f"PR URL {url}: bad owner or repository name: {problem}")
    if not descriptor.names_fit(len(names)):
        raise TargetError(f"PR URL {url}: {descriptor.names_problem()} ({expected()})")
    return tuple(names)


def split_pr_url(url: str) -> PullRequest:
    """The parts of a PR URL, every one checked except whether its host is allowed."""
    text, parts, port = _split(url)
    forge, found = _recognise(url, parts.path)
    descriptor = FORGES[forge]
    _check_scheme(url, parts.scheme, descriptor)
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise TargetError(f"PR URL {url}: must not hold credentials")
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise TargetError(f"PR URL {url}: must not carry a query or a fragment ({expected()})")
    host = (parts.hostname or "") + (f":{port}" if port is not None else "")
    names = _check_names(url, found, descriptor)
    number = found["n"]
    if not PR_NUMBER.fullmatch(number):
        raise TargetError(f"PR URL {url}: the request number {number!r} must be digits (1 or more)")
    return PullRequest(
        host=host,
        names=names,
        kind=descriptor.pr_word,
        number=number,
        forge=forge,
        scheme=parts.scheme.lower(),
    )


def parse_pr_url(url: str, forge_hosts: Iterable[str] = ()) -> PullRequest:
    """A PR/MR URL validated in full (see the module docstring); a ``TargetError`` says what is wrong."""
    pr = split_pr_url(url)
    extra = [h.lower() for h in forge_hosts]
    served = {host: d for d in FORGES.values() for host in d.hosts}
    if pr.host not in served and pr.host not in extra:
        allowed = ", ".join([*served, *extra])
        raise TargetError(
            f"PR URL {url}: host {pr.host!r} is not an allowed forge (allowed: {allowed}; "
            "add an enterprise host to JURY_FORGE_HOSTS)"
        )
    owner = served.get(pr.host)
    if owner is not None and owner is not pr.descriptor:
        raise TargetError(f"PR URL {url}: {pr.host} serves {owner.pr_word}/N, not {pr.kind}/N")
    return pr
