"""GitLab over REST v4: merge requests, one review per run, and the ``jury`` commit status.

A project is named by its full path (``group/sub/repo``, subgroups allowed), sent URL-encoded as the
``:id`` of every call (``/projects/group%2Fsub%2Frepo/...``).

Publishing: GitLab has no review object, so a run's review is one MR note (the summary) plus one diff
discussion per inline comment, positioned on the new side (``new_line``) with the base/start/head shas of
the MR version whose head is ``head_sha`` (``diff_refs``, else ``/versions``). A line GitLab refuses
(400/422) is listed in the summary instead. A later publish of the same run edits the note and Jury's
discussion notes in place, opens discussions for new findings and retires those whose finding is gone.
Jury's own notes are those written by the token's account (``GET /user``) that start with the run's marker.

The check is a commit status named ``jury``. GitLab has no neutral state; a run that could not review is
``canceled`` with "not reviewed: <reason>" as its description. Not ``skipped``: a project that treats
skipped pipelines as successful would then let the MR merge as if Jury had passed it, and a run that could
not review must never pass for success. GitLab keeps the latest status per name on a commit; setting it
again posts the new state (GitLab replaces the old one), and Jury posts nothing when it would say the same.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any, Literal
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from orchestrator.errors import UsageError
from orchestrator.forge.answers import (
    GlDiscussion,
    GlMe,
    GlMergeRequest,
    GlMergeRequestRefs,
    GlNewDiscussion,
    GlNote,
    GlProject,
    GlStatus,
    GlVersion,
)
from orchestrator.forge.base import (
    CheckConclusion,
    CheckResult,
    ForgeError,
    ForgeKind,
    InlineComment,
    OwnComment,
    PublishedReview,
    PullRequest,
    ReviewDraft,
    aware,
    is_sha,
    read_marker,
    summary_text,
    sync_comments,
    truncate,
)
from orchestrator.forge.transport import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_WAIT,
    Api,
    Clock,
    ETagCache,
    Sleep,
)

DEFAULT_API = "https://gitlab.com/api/v4"
HEAD_REF = "refs/merge-requests/{number}/head"  # where GitLab keeps a merge request's head
AuthScheme = Literal["private-token", "bearer"]
# A GitLab status has no neutral and no "action required": what each conclusion is there
# (docs/publishing.md's table).
STATUS_STATE: dict[str, str] = {
    "success": "success",
    "failure": "failed",
    "neutral": "canceled",
    "action_required": "failed",
}
PROJECT_RE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_.][A-Za-z0-9_.-]*)+")
STATUS_DESCRIPTION_MAX = 255
POSITION_REFUSED = (400, 422)


class GitLab:
    """A GitLab REST v4 API (gitlab.com or self-managed)."""

    kind: ForgeKind = "gitlab"

    def __init__(
        self,
        client: httpx.Client,
        *,
        token: str | None = None,
        api: str = DEFAULT_API,
        auth_scheme: AuthScheme = "private-token",
        sleep: Sleep = time.sleep,
        clock: Clock = time.time,
        cache: ETagCache | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_wait: float = DEFAULT_MAX_WAIT,
    ) -> None:
        auth: dict[str, str] = {}
        if token:
            auth = (
                {"PRIVATE-TOKEN": token}
                if auth_scheme == "private-token"
                else {"Authorization": f"Bearer {token}"}
            )
        self.api = Api(
            forge=self.kind,
            base_url=api,
            client=client,
            auth=auth,
            headers={"Accept": "application/json"},
            sleep=sleep,
            clock=clock,
            cache=cache,
            max_retries=max_retries,
            max_wait=max_wait,
        )
        self._user_id: int | None = None
        self._projects: dict[str, dict[str, Any]] = {}

    # --- reading -----------------------------------------------------------------------------------

    def list_open(
        self,
        repo: str,
        *,
        base: str | None = None,
        labels: tuple[str, ...] = (),
        include_drafts: bool = False,
        updated_since: datetime | None = None,
    ) -> list[PullRequest]:
        """Open MRs, latest update first. GitLab filters on its side; Jury checks again on its own."""
        pid = self._pid(repo)
        project = self._project(repo)
        params: dict[str, Any] = {
            "state": "opened",
            "order_by": "updated_at",
            "sort": "desc",
            "per_page": 100,
        }
        if base:
            params["target_branch"] = base
        if labels:
            params["labels"] = ",".join(labels)
        if not include_drafts:
            params["wip"] = "no"
        since = aware(updated_since) if updated_since else None
        if since is not None:
            params["updated_after"] = since.isoformat()
        wanted = set(labels)
        found: list[PullRequest] = []
        call = f"GET /projects/{pid}/merge_requests"
        listing = self.api.pages(
            f"/projects/{pid}/merge_requests", repo=repo, params=params, item=GlMergeRequest
        )
        for item in listing:
            mr = self._mr(repo, item, project, call)
            if since is not None and mr.updated_at < since:
                break
            if (mr.draft and not include_drafts) or not wanted <= set(mr.labels):
                continue
            if base and mr.base != base:
                continue
            found.append(mr)
        return found

    def get(self, repo: str, number: int) -> PullRequest:
        path = f"/projects/{self._pid(repo)}/merge_requests/{int(number)}"
        data = self.api.call("GET", path, repo=repo, expect=GlMergeRequest).data
        return self._mr(repo, data, self._project(repo), f"GET {path}")

    def _project(self, repo: str) -> dict[str, Any]:
        if repo not in self._projects:
            path = f"/projects/{self._pid(repo)}"
            self._projects[repo] = self.api.call("GET", path, repo=repo, expect=GlProject).data
        return self._projects[repo]

    def _mr(self, repo: str, item: Any, project: dict[str, Any], call: str) -> PullRequest:
        try:
            source, target = item.get("source_project_id"), item.get("target_project_id", project["id"])
            labels = tuple(
                lab["name"] if isinstance(lab, dict) else str(lab) for lab in item.get("labels") or ()
            )
            mr = PullRequest(
                forge=self.kind,
                repo=repo,
                number=item["iid"],
                title=item.get("title") or "",
                body=item.get("description") or "",
                base=item["target_branch"],
                base_sha=(item.get("diff_refs") or {}).get("base_sha"),
                head_sha=item["sha"],
                head_branch=item["source_branch"],
                clone_url=project["http_url_to_repo"],
                head_clone_url=project["http_url_to_repo"] if source == target else None,
                is_fork=source != target,
                draft=bool(item.get("draft", item.get("work_in_progress", False))),
                labels=labels,
                author=(item.get("author") or {}).get("username"),
                web_url=item["web_url"],
                updated_at=item["updated_at"],
                ref=HEAD_REF.format(number=item["iid"]),
            )
        except (KeyError, TypeError, AttributeError, ValidationError) as exc:
            detail = f"unexpected merge request in the answer: {exc!r}"[:300]
            raise ForgeError(self.kind, repo, call, detail) from None
        if not is_sha(mr.head_sha):
            raise ForgeError(self.kind, repo, call, f"MR !{mr.number} has no valid head sha")
        return mr

    # --- publishing --------------------------------------------------------------------------------

    def publish_review(self, repo: str, number: int, head_sha: str, review: ReviewDraft) -> PublishedReview:
        pid = self._pid(repo)
        self._check_sha(repo, head_sha)
        n = int(number)
        me = self._me(repo)
        mr_path = f"/projects/{pid}/merge_requests/{n}"
        mr = self.api.call("GET", mr_path, repo=repo, expect=GlMergeRequestRefs).data
        summary: dict[str, Any] | None = None
        own: dict[str, OwnComment] = {}
        threads = self.api.pages(
            f"{mr_path}/discussions", repo=repo, params={"per_page": 100}, item=GlDiscussion
        )
        for thread in threads:
            for note in thread.get("notes") or ():
                found = read_marker(note.get("body"))
                if not found or found[0] != review.run or (note.get("author") or {}).get("id") != me:
                    continue
                if found[1] is None:
                    summary = summary or note
                    continue
                position = note.get("position") or {}
                own[found[1]] = OwnComment(
                    ident=found[1],
                    id=str(note["id"]),
                    body=note["body"],
                    path=position.get("new_path", ""),
                    line=int(position.get("new_line") or 0),
                    thread=str(thread["id"]),
                )
        first = summary is None and not own
        refs = self._refs(repo, mr_path, mr, head_sha)

        def create(comment: InlineComment, body: str) -> str | None:
            if refs is None:
                return None
            position = {
                "position_type": "text",
                **refs,
                "old_path": comment.path,
                "new_path": comment.path,
                "new_line": comment.line,
                # an unchanged line is on both sides: GitLab wants both numbers there (and refuses it
                # with the new one alone); an added line has the new one only
                **({"old_line": comment.old_line} if comment.old_line is not None else {}),
            }
            try:
                data = self.api.call(
                    "POST",
                    f"{mr_path}/discussions",
                    repo=repo,
                    json={"body": body, "position": position},
                    expect=GlNewDiscussion,
                ).data
            except ForgeError as exc:
                if exc.status in POSITION_REFUSED:
                    return None
                raise
            return str(data["notes"][0]["id"])

        def edit(old: OwnComment, body: str) -> None:
            path = f"{mr_path}/discussions/{old.thread}/notes/{old.id}"
            self.api.call("PUT", path, repo=repo, json={"body": body})

        results, unplaced = sync_comments(review, own, edit=edit, create=create)
        body = summary_text(review, unplaced)
        if summary is None:
            summary = self.api.call(
                "POST", f"{mr_path}/notes", repo=repo, json={"body": body}, expect=GlNote
            ).data
        elif summary.get("body") != body:
            path = f"{mr_path}/notes/{summary['id']}"
            summary = self.api.call("PUT", path, repo=repo, json={"body": body}, expect=GlNote).data
        note_id = str(summary["id"])
        return PublishedReview(
            id=note_id, url=f"{mr.get('web_url', '')}#note_{note_id}", created=first, comments=results
        )

    def _refs(self, repo: str, mr_path: str, mr: dict[str, Any], head_sha: str) -> dict[str, str] | None:
        """The diff position shas of the MR version whose head is ``head_sha``; None when none is."""
        refs = mr.get("diff_refs") or {}
        if refs.get("head_sha") == head_sha and refs.get("base_sha") and refs.get("start_sha"):
            return {"base_sha": refs["base_sha"], "start_sha": refs["start_sha"], "head_sha": head_sha}
        versions = self.api.pages(f"{mr_path}/versions", repo=repo, params={"per_page": 100}, item=GlVersion)
        for version in versions:
            if version.get("head_commit_sha") == head_sha:
                return {
                    "base_sha": version["base_commit_sha"],
                    "start_sha": version["start_commit_sha"],
                    "head_sha": head_sha,
                }
        return None

    def _me(self, repo: str) -> int:
        if self._user_id is None:
            data = self.api.call("GET", "/user", repo=repo, expect=GlMe).data
            self._user_id = int(data["id"])
        return self._user_id

    # --- the check -----------------------------------------------------------------------------------

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
        """The summary is not sent: a status holds a description only; the review note holds the rest.
        ``ref`` is sent when given: without it GitLab looks for a branch holding the commit and answers
        404 when none does (a fork MR's head, which only ``refs/merge-requests/N/head`` holds)."""
        pid = self._pid(repo)
        self._check_sha(repo, head_sha)
        if conclusion not in STATUS_STATE:
            raise ValueError(f"conclusion must be one of {', '.join(STATUS_STATE)}, not {conclusion!r}")
        state = STATUS_STATE[conclusion]
        text = f"not reviewed: {title}" if conclusion == "neutral" else title
        description = truncate(text, STATUS_DESCRIPTION_MAX)
        listed = self.api.call(
            "GET",
            f"/projects/{pid}/repository/commits/{head_sha}/statuses",
            repo=repo,
            params={"name": name, "per_page": 100},
            expect=list[GlStatus],
        ).data
        mine = [s for s in listed or [] if s.get("name") == name]
        latest = max(mine, key=lambda s: int(s.get("id", 0)), default=None)
        if latest is not None and (
            latest.get("status"),
            latest.get("description"),
            latest.get("target_url") or None,
        ) == (state, description, details_url):
            return self._result(latest, name, conclusion, "unchanged")
        payload: dict[str, Any] = {"state": state, "name": name, "description": description}
        if details_url:
            payload["target_url"] = details_url
        if ref:
            payload["ref"] = ref
        path = f"/projects/{pid}/statuses/{head_sha}"
        data = self.api.call("POST", path, repo=repo, json=payload, expect=GlStatus).data
        return self._result(data, name, conclusion, "updated" if latest else "created")

    @staticmethod
    def _result(data: dict[str, Any], name: str, conclusion: CheckConclusion, action: Any) -> CheckResult:
        return CheckResult(
            kind="status",
            id=str(data["id"]),
            name=name,
            conclusion=conclusion,
            state=str(data.get("status", "")),
            action=action,
            url=data.get("target_url"),
        )

    # --- checks on the arguments ---------------------------------------------------------------------

    @staticmethod
    def _pid(repo: str) -> str:
        if not PROJECT_RE.fullmatch(repo) or any(part in (".", "..") for part in repo.split("/")):
            raise UsageError(f"not a GitLab project path: {repo!r} (expected GROUP[/SUBGROUP...]/PROJECT)")
        return quote(repo, safe="")

    @staticmethod
    def _check_sha(repo: str, sha: str) -> None:
        if not is_sha(sha):
            raise UsageError(f"{repo}: not a full commit sha: {sha!r}")
