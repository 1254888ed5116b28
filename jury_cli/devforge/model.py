"""What the fake forge holds (users, repositories, PRs, recorded requests) and its small types, apart from
the server so that the route tables and the server import them without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

GITHUB_PREFIX = "/github"
GITLAB_PREFIX = "/gitlab/api/v4"


@dataclass
class User:
    login: str
    id: int
    app: bool = False  # a GitHub App may write check runs; a personal token may not


@dataclass
class FakePR:
    """A PR (GitHub) or MR (GitLab). ``diff`` maps a path to the new-side lines the diff shows."""

    number: int
    title: str
    head_sha: str
    base: str = "main"
    head_branch: str = "feature"
    body: str = ""
    draft: bool = False
    labels: list[str] = field(default_factory=list)
    updated_at: datetime = field(default_factory=lambda: datetime(2024, 5, 1, tzinfo=UTC))
    author: str = "contributor"
    fork: bool = False
    base_sha: str = "b" * 40
    start_sha: str = "s" * 40
    diff: dict[str, set[int]] = field(default_factory=dict)
    # the diff's unchanged (context) lines among ``diff``'s, new -> old number: GitLab places a comment
    # there only given both numbers
    context: dict[str, dict[int, int]] = field(default_factory=dict)
    heads: list[str] = field(default_factory=list)  # every head it had, oldest first

    def __post_init__(self) -> None:
        if not self.heads:
            self.heads = [self.head_sha]

    def push(self, sha: str, when: datetime | None = None) -> None:
        self.head_sha = sha
        self.heads.append(sha)
        if when is not None:
            self.updated_at = when


@dataclass
class Repo:
    """One repository's or project's state (the same shape on both forges)."""

    path: str
    id: int
    prs: dict[int, FakePR] = field(default_factory=dict)
    reviews: list[dict[str, Any]] = field(default_factory=list)  # GitHub
    comments: list[dict[str, Any]] = field(default_factory=list)  # GitHub review comments
    check_runs: list[dict[str, Any]] = field(default_factory=list)  # GitHub
    statuses: list[dict[str, Any]] = field(default_factory=list)  # both; newest last
    discussions: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # GitLab, per MR iid

    def add(self, pr: FakePR) -> FakePR:
        self.prs[pr.number] = pr
        return pr


@dataclass
class Fault:
    status: int
    headers: dict[str, str]
    message: str
    match: str
    left: int


@dataclass
class Garble:
    method: str
    pattern: str  # searched in the request's path
    data: Any


@dataclass
class Recorded:
    method: str
    path: str  # without the query
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased
    body: Any
    status: int = 0


@dataclass
class Reply:
    status: int
    data: Any = None
    headers: dict[str, str] = field(default_factory=dict)


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
