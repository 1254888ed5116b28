"""The shapes of the forge answers Jury reads, checked at the transport (``Api.call(expect=...)``,
``Api.pages(item=...)``) before a client looks inside.

A forge answer is data from outside: a proxy, a misconfigured enterprise host or a hostile server may
send a list where an object belongs, or a string where a nested object belongs. Unchecked, that is a
``TypeError`` deep in a client and a traceback; checked here, it is a ``ForgeError`` that names the call
and says what was wrong in one line, and the run records it. The models name only what the clients read
(everything else is allowed and ignored) and validate the answer without replacing it.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError


class Loose(BaseModel):
    """An answer object: the fields Jury reads, typed; any others allowed."""

    model_config = ConfigDict(extra="allow")


# --- GitHub -------------------------------------------------------------------------------------------


class GhUser(Loose):
    login: str | None = None


class GhMe(Loose):
    login: str


class GhRepo(Loose):
    clone_url: str | None = None
    full_name: str | None = None


class GhHead(Loose):
    sha: str
    ref: str
    repo: GhRepo | None = None


class GhBaseRepo(GhRepo):
    clone_url: str


class GhBase(Loose):
    ref: str
    sha: str | None = None
    repo: GhBaseRepo


class GhLabel(Loose):
    name: str


class GhPull(Loose):
    number: int
    title: str | None = None
    body: str | None = None
    head: GhHead
    base: GhBase
    draft: bool | None = None
    labels: list[GhLabel] | None = None
    user: GhUser | None = None
    html_url: str
    updated_at: datetime


class GhReview(Loose):
    id: int
    body: str | None = None
    user: GhUser | None = None
    html_url: str | None = None


class GhComment(Loose):
    id: int
    body: str | None = None
    user: GhUser | None = None
    path: str | None = None
    line: int | None = None
    original_line: int | None = None


class GhOutput(Loose):
    title: str | None = None
    summary: str | None = None


class GhCheckRun(Loose):
    id: int
    name: str | None = None
    status: str | None = None
    conclusion: str | None = None
    output: GhOutput | None = None
    details_url: str | None = None
    html_url: str | None = None


class GhCheckRuns(Loose):
    check_runs: list[GhCheckRun] = Field(default_factory=list)


class GhStatus(Loose):
    id: int
    state: str | None = None
    context: str | None = None
    description: str | None = None
    target_url: str | None = None


# --- GitLab -------------------------------------------------------------------------------------------


class GlProject(Loose):
    id: int
    http_url_to_repo: str


class GlAuthor(Loose):
    id: int | None = None
    username: str | None = None


class GlMe(Loose):
    id: int


class GlDiffRefs(Loose):
    base_sha: str | None = None
    start_sha: str | None = None
    head_sha: str | None = None


class GlMergeRequest(Loose):
    iid: int
    source_project_id: int | None = None
    target_project_id: int | None = None
    title: str | None = None
    description: str | None = None
    target_branch: str
    source_branch: str
    sha: str
    diff_refs: GlDiffRefs | None = None
    draft: bool | None = None
    work_in_progress: bool | None = None
    labels: list[str | GhLabel] | None = None
    author: GlAuthor | None = None
    web_url: str
    updated_at: datetime


class GlMergeRequestRefs(Loose):
    """What publishing reads of a merge request: its URL and the shas of its latest diff."""

    web_url: str | None = None
    diff_refs: GlDiffRefs | None = None


class GlPosition(Loose):
    new_path: str | None = None
    new_line: int | None = None


class GlNote(Loose):
    id: int
    body: str | None = None
    author: GlAuthor | None = None
    position: GlPosition | None = None


class GlDiscussion(Loose):
    id: int | str  # GitLab's discussion ids are hex strings
    notes: list[GlNote] | None = None


class GlNewDiscussion(Loose):
    notes: list[GlNote] = Field(min_length=1)


class GlVersion(Loose):
    head_commit_sha: str | None = None
    base_commit_sha: str
    start_commit_sha: str


class GlStatus(Loose):
    id: int
    status: str | None = None
    name: str | None = None
    description: str | None = None
    target_url: str | None = None


# --- checking -----------------------------------------------------------------------------------------


@cache
def _adapter(shape: Any) -> TypeAdapter[Any]:
    return TypeAdapter(shape)


def what_kind(value: object) -> str:
    """What a JSON value is, in words (never the value: it is the forge's text, maybe a secret's echo)."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


_EXPECTED = {
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dict_type": "an object",
    "list_type": "a list",
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "missing": "a value",
}


def shape_problem(shape: Any, data: Any) -> str | None:
    """None when ``data`` has ``shape``; else what is wrong, in one line: where, what was expected, what
    came (its kind, never its text)."""
    try:
        _adapter(shape).validate_python(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        where = ".".join(str(part) for part in first["loc"] if not _is_union_tag(part))
        expected = _EXPECTED.get(first["type"], first["msg"].lower())
        got = "no such field" if first["type"] == "missing" else what_kind(first.get("input"))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return f"unexpected answer: expected {expected} at {where or 'the top'}, got {got}{more}"
    return None


def _is_union_tag(part: object) -> bool:
    """A union's branch name in an error location (``str``, ``GhLabel``): not a place in the answer."""
    return isinstance(part, str) and (part[:1].isupper() or part in ("str", "int", "bool"))
