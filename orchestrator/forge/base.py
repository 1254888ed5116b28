"""What a forge is to Jury: the models that come back, the one interface, and the run markers.

A forge is where pull requests live (GitHub, GitLab). Jury asks it four things: which PRs are open, what
one PR is, to publish a run's review on a PR, and to set the ``jury`` check on a commit. Everything a forge
answers is data from outside: PR titles, bodies and branch names are written by whoever opened the PR and
are carried as inert strings, never interpreted.

Re-publishing must update Jury's own review rather than pile up new ones, so everything Jury posts starts
with a hidden marker naming the run (``<!-- jury:run=<slug> -->``; an inline comment adds ``;c=<key
hash>``). A marker is only recognised at the very start of a body written by the token's own account, so
neither text quoted inside Jury's comments nor a comment by someone else can pass for Jury's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.errors import JuryError

ForgeKind = str  # a name registered in ``orchestrator.forge.kinds.FORGES``
# ``action_required``: the run converged but the commit checked lacks its accepted fixes (they are on
# ``jury/<slug>``); a person has to take them. The table of what each forge shows is docs/publishing.md's.
CheckConclusion = Literal["success", "failure", "neutral", "action_required"]
CommentAction = Literal["created", "updated", "unchanged", "retired", "unplaced"]

SLUG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_MARKER_RE = re.compile(r"\A<!-- jury:run=([A-Za-z0-9][A-Za-z0-9._-]{0,199})(?:;c=([0-9a-f]{12}))? -->")
BODY_MAX = 60_000  # GitHub refuses a review or comment body over 65,536 characters
RETIRED_TEXT = "_Jury no longer reports anything here (run `{run}`)._"
UNPLACED_HEADING = "**Not on the diff** (the forge refused these lines, so they are listed here):"


class ForgeError(JuryError):
    """A forge call failed; the message names the forge, the repository, the call and the status."""

    def __init__(
        self,
        forge: str,
        repo: str,
        call: str,
        detail: str,
        *,
        status: int | None = None,
    ) -> None:
        self.forge = forge
        self.repo = repo
        self.call = call
        self.status = status
        self.detail = detail
        where = f"{forge} {repo}: {call}"
        super().__init__(f"{where} failed ({status}): {detail}" if status else f"{where} failed: {detail}")


class PullRequest(BaseModel):
    """One open pull (GitHub) or merge (GitLab) request, as the forge reports it."""

    model_config = ConfigDict(frozen=True)

    forge: ForgeKind
    repo: str  # "owner/repo" or "group/sub/repo"
    number: int  # the PR number (GitHub) or the MR iid (GitLab)
    title: str
    body: str = ""
    base: str  # the branch it merges into
    base_sha: str | None = None
    head_sha: str
    head_branch: str
    clone_url: str  # the target repository's clone URL; the head is fetchable there from the PR ref
    head_clone_url: str | None = None  # the source repository's (a fork's) clone URL, when known
    is_fork: bool
    draft: bool = False
    labels: tuple[str, ...] = ()
    author: str | None = None
    web_url: str
    updated_at: datetime
    ref: str  # the git ref on ``clone_url`` that holds the PR head (its forge kind's ``head_ref``)


class InlineComment(BaseModel):
    """A comment on line ``line`` of ``path`` on the new side of the diff.

    ``key`` identifies the comment across re-publishes (a finding id, say); without one the place
    (``path:line``) does, so a finding that moves lines becomes a new comment and the old one is retired.
    """

    model_config = ConfigDict(frozen=True)

    path: str = Field(min_length=1)
    line: int = Field(ge=1)
    body: str
    key: str | None = None
    # The same line on the old side when it is an unchanged (context) line of the diff, None for an
    # added line or when unknown: GitLab places a comment on a context line only given both.
    old_line: int | None = Field(default=None, ge=1)

    @property
    def ident(self) -> str:
        """A short hash of the key, safe to put in a marker whatever the key holds."""
        key = self.key if self.key is not None else f"{self.path}:{self.line}"
        return hashlib.sha256(key.encode()).hexdigest()[:12]


class ReviewDraft(BaseModel):
    """What one run publishes on a PR: a summary and inline comments; ``run`` is the run's slug."""

    model_config = ConfigDict(frozen=True)

    run: str
    body: str
    comments: tuple[InlineComment, ...] = ()

    @field_validator("run")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG_RE.fullmatch(value):
            raise ValueError("a run slug is letters, digits, '.', '_' and '-' (at most 200)")
        return value

    @field_validator("comments")
    @classmethod
    def _distinct(cls, value: tuple[InlineComment, ...]) -> tuple[InlineComment, ...]:
        seen: set[str] = set()
        for comment in value:
            if comment.ident in seen:
                raise ValueError(f"two comments share the key of {comment.path}:{comment.line}")
            seen.add(comment.ident)
        return value


class PublishedComment(BaseModel):
    """What became of one inline comment: posted, edited, left alone, retired, or not placeable."""

    ident: str
    path: str
    line: int
    action: CommentAction
    id: str | None = None  # None for an unplaced comment (it went into the summary instead)


class PublishedReview(BaseModel):
    """The run's review on the PR after a publish."""

    id: str
    url: str
    created: bool  # False: an earlier review of the same run was updated
    comments: list[PublishedComment] = Field(default_factory=list)


class CheckResult(BaseModel):
    """The ``jury`` check on a commit after ``set_check``."""

    kind: Literal["check-run", "status"]
    id: str
    name: str
    conclusion: CheckConclusion
    state: str  # the forge's own word for it ("neutral", "error", "canceled", ...)
    action: Literal["created", "updated", "unchanged"]
    url: str | None = None


@runtime_checkable
class Forge(Protocol):
    """A pull-request host. ``repo`` is the forge's own path: ``owner/repo`` or ``group/sub/repo``."""

    kind: ForgeKind

    def list_open(
        self,
        repo: str,
        *,
        base: str | None = None,
        labels: tuple[str, ...] = (),
        include_drafts: bool = False,
        updated_since: datetime | None = None,
    ) -> list[PullRequest]:
        """Open PRs targeting ``base`` (any base when None) that carry every label in ``labels``,
        drafts only when asked, updated at or after ``updated_since``; most recently updated first."""
        ...

    def get(self, repo: str, number: int) -> PullRequest: ...

    def publish_review(self, repo: str, number: int, head_sha: str, review: ReviewDraft) -> PublishedReview:
        """Post the run's review, or update the one an earlier publish of the same run left."""
        ...

    def set_check(
        self,
        repo: str,
        head_sha: str,
        *,
        name: str = "jury",
        conclusion: CheckConclusion,
        title: str,
        summary: str,
        details_url: str | None = None,
        ref: str | None = None,
    ) -> CheckResult:
        """Set the commit's check called ``name``; setting it again updates it, never adds another.
        ``ref``: a ref that holds the commit (a forge that files statuses under a ref, GitLab, cannot
        find one for a commit no branch holds, such as a fork's head or a fix on ``jury/<slug>``)."""
        ...


# --- markers -----------------------------------------------------------------------------------------


def marker(run: str, ident: str | None = None) -> str:
    return f"<!-- jury:run={run};c={ident} -->" if ident else f"<!-- jury:run={run} -->"


def read_marker(body: str | None) -> tuple[str, str | None] | None:
    """``(run, ident)`` when ``body`` starts with a Jury marker (``ident`` None for a summary)."""
    if not body:
        return None
    found = _MARKER_RE.match(body)
    return (found[1], found[2]) if found else None


def with_marker(run: str, text: str, ident: str | None = None) -> str:
    """``text`` under the run's marker, cut to what every forge accepts in one comment."""
    return f"{marker(run, ident)}\n{truncate(text, BODY_MAX)}"


def summary_text(draft: ReviewDraft, unplaced: list[InlineComment]) -> str:
    """The review's body: the draft's summary, plus the comments the forge would not put on the diff."""
    text = draft.body
    if unplaced:
        lines = [f"- `{c.path}:{c.line}`: {c.body}" for c in unplaced]
        text = f"{text}\n\n{UNPLACED_HEADING}\n" + "\n".join(lines)
    return with_marker(draft.run, text)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters: at the last line break that fits when it has one, since a
    cut inside a line of Markdown could leave a code span open and what it quoted read as HTML."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit - 1)
    return text[:cut] + "\n…" if cut > 0 else text[: limit - 1] + "…"


_SHA_RE = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def is_sha(value: object) -> bool:
    """A full commit id (SHA-1 or SHA-256), the only head a forge answer may name."""
    return isinstance(value, str) and _SHA_RE.fullmatch(value) is not None


def aware(when: datetime) -> datetime:
    """``when`` with a time zone; a naive time is taken as UTC."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


# --- publishing, the same on every forge ------------------------------------------------------------


@dataclass
class OwnComment:
    """An inline comment an earlier publish of this run left (found by its marker and its author)."""

    ident: str
    id: str
    body: str
    path: str
    line: int
    thread: str | None = None  # GitLab: the discussion holding the note


def sync_comments(
    draft: ReviewDraft,
    existing: dict[str, OwnComment],
    *,
    edit: Callable[[OwnComment, str], None],
    create: Callable[[InlineComment, str], str | None],
) -> tuple[list[PublishedComment], list[InlineComment]]:
    """Bring the run's inline comments on the PR in line with ``draft``.

    A comment the run already posted is edited when its text changed; a new one is created (``create``
    returns None when the forge refuses the line, and the comment goes into the summary instead); one the
    draft no longer holds is retired, edited to say so, rather than deleted, so replies under it keep
    their context. Returns what happened to each comment and the comments that could not be placed.
    """
    left = dict(existing)
    results: list[PublishedComment] = []
    unplaced: list[InlineComment] = []
    for comment in draft.comments:
        body = with_marker(draft.run, comment.body, comment.ident)
        old = left.pop(comment.ident, None)
        if old is not None:
            action: CommentAction = "unchanged" if old.body == body else "updated"
            if action == "updated":
                edit(old, body)
            results.append(
                PublishedComment(ident=comment.ident, path=old.path, line=old.line, action=action, id=old.id)
            )
            continue
        new_id = create(comment, body)
        if new_id is None:
            unplaced.append(comment)
        results.append(
            PublishedComment(
                ident=comment.ident,
                path=comment.path,
                line=comment.line,
                action="created" if new_id else "unplaced",
                id=new_id,
            )
        )
    for old in left.values():
        body = with_marker(draft.run, RETIRED_TEXT.format(run=draft.run), old.ident)
        if old.body != body:
            edit(old, body)
        results.append(
            PublishedComment(ident=old.ident, path=old.path, line=old.line, action="retired", id=old.id)
        )
    return results, unplaced
