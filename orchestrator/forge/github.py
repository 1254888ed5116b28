"""GitHub over REST v3: pull requests, one review per run, and the ``jury`` check.

Publishing: the first publish of a run is one review (``event: COMMENT``) holding the summary and every
inline comment on the new side (``side: RIGHT``) of the diff at ``head_sha``. If GitHub refuses a line
(422: not part of the diff), the review is posted without inline comments and each comment is tried on
its own; the ones GitHub still refuses are listed in the summary. A later publish of the same run edits
that review's body and Jury's comments in place, adds single comments for new findings, and retires
comments whose finding is gone (see ``base.sync_comments``). Jury's own reviews and comments are those
written by the token's account (``GET /user``; a GitHub App installation token cannot read it, so name the
app's bot account with ``login=``) that start with the run's marker.

The check: a check run (``POST /repos/{repo}/check-runs``) shows a title and a whole summary on the PR and
has a true ``neutral`` conclusion, but only a GitHub App may write one. ``checks="auto"`` (the default)
tries a check run and, when GitHub refuses it (403/404, as it does for personal access tokens), falls back
for the rest of the client's life to a commit status, whose ``context`` is the check's name. A status has
no neutral: a run that could not review is ``error`` ("the check could not run", never ``success``) with
the reason in its description. Setting the check again edits the check run found by name and head sha;
for statuses, GitHub shows the latest per context, and Jury posts nothing when it would say the same.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any, Literal

import httpx
import structlog
from pydantic import ValidationError

from orchestrator.errors import UsageError
from orchestrator.forge.answers import (
    GhCheckRun,
    GhCheckRuns,
    GhComment,
    GhMe,
    GhPull,
    GhReview,
    GhStatus,
)
from orchestrator.forge.base import (
    CheckConclusion,
    CheckResult,
    ForgeError,
    ForgeKind,
    InlineComment,
    OwnComment,
    PublishedComment,
    PublishedReview,
    PullRequest,
    ReviewDraft,
    aware,
    is_sha,
    read_marker,
    summary_text,
    sync_comments,
    truncate,
    with_marker,
)
from orchestrator.forge.transport import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_WAIT,
    Api,
    Clock,
    ETagCache,
    Sleep,
)

log = structlog.get_logger()

DEFAULT_API = "https://api.github.com"
HEAD_REF = "refs/pull/{number}/head"  # where GitHub keeps a pull request's head, in every clone
CheckMode = Literal["auto", "checks", "statuses"]
# A commit status has no neutral and no "action required": what each conclusion is there
# (docs/publishing.md's table). A check run takes the conclusion itself.
STATUS_STATE: dict[str, str] = {
    "success": "success",
    "failure": "failure",
    "neutral": "error",
    "action_required": "failure",
}
REPO_RE = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
STATUS_DESCRIPTION_MAX = 140
CHECK_TITLE_MAX = 255
CHECK_SUMMARY_MAX = 65535


def _neutral_text(conclusion: CheckConclusion, title: str) -> str:
    return f"not reviewed: {title}" if conclusion == "neutral" else title


class GitHub:
    """A GitHub (or GitHub Enterprise) REST v3 API."""

    kind: ForgeKind = "github"

    def __init__(
        self,
        client: httpx.Client,
        *,
        token: str | None = None,
        api: str = DEFAULT_API,
        login: str | None = None,
        checks: CheckMode = "auto",
        sleep: Sleep = time.sleep,
        clock: Clock = time.time,
        cache: ETagCache | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_wait: float = DEFAULT_MAX_WAIT,
    ) -> None:
        self.api = Api(
            forge=self.kind,
            base_url=api,
            client=client,
            auth={"Authorization": f"Bearer {token}"} if token else {},
            headers={"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"},
            sleep=sleep,
            clock=clock,
            cache=cache,
            max_retries=max_retries,
            max_wait=max_wait,
        )
        self.checks = checks
        self._checks_ok: bool | None = None if checks == "auto" else checks == "checks"
        self._login = login

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
        """Open PRs, latest update first; paging stops at the first one older than ``updated_since``."""
        self._check_repo(repo)
        params: dict[str, Any] = {"state": "open", "sort": "updated", "direction": "desc", "per_page": 100}
        if base:
            params["base"] = base
        since = aware(updated_since) if updated_since else None
        wanted = set(labels)
        found: list[PullRequest] = []
        for item in self.api.pages(f"/repos/{repo}/pulls", repo=repo, params=params, item=GhPull):
            pr = self._pr(repo, item, f"GET /repos/{repo}/pulls")
            if since is not None and pr.updated_at < since:
                break
            if (pr.draft and not include_drafts) or not wanted <= set(pr.labels):
                continue
            if base and pr.base != base:
                continue
            found.append(pr)
        return found

    def get(self, repo: str, number: int) -> PullRequest:
        self._check_repo(repo)
        path = f"/repos/{repo}/pulls/{int(number)}"
        return self._pr(repo, self.api.call("GET", path, repo=repo, expect=GhPull).data, f"GET {path}")

    def _pr(self, repo: str, item: Any, call: str) -> PullRequest:
        try:
            head, base = item["head"], item["base"]
            head_repo = head.get("repo")
            base_repo = base["repo"]
            pr = PullRequest(
                forge=self.kind,
                repo=repo,
                number=item["number"],
                title=item.get("title") or "",
                body=item.get("body") or "",
                base=base["ref"],
                base_sha=base.get("sha"),
                head_sha=head["sha"],
                head_branch=head["ref"],
                clone_url=base_repo["clone_url"],
                head_clone_url=head_repo.get("clone_url") if head_repo else None,
                is_fork=head_repo is None
                or str(head_repo.get("full_name", "")).lower() != str(base_repo.get("full_name", "")).lower(),
                draft=bool(item.get("draft", False)),
                labels=tuple(lab["name"] for lab in item.get("labels") or ()),
                author=(item.get("user") or {}).get("login"),
                web_url=item["html_url"],
                updated_at=item["updated_at"],
                ref=HEAD_REF.format(number=item["number"]),
            )
        except (KeyError, TypeError, AttributeError, ValidationError) as exc:
            raise ForgeError(
                self.kind, repo, call, f"unexpected pull request in the answer: {exc!r}"[:300]
            ) from None
        if not is_sha(pr.head_sha):
            raise ForgeError(self.kind, repo, call, f"PR #{pr.number} has no valid head sha")
        return pr

    # --- publishing --------------------------------------------------------------------------------

    def publish_review(self, repo: str, number: int, head_sha: str, review: ReviewDraft) -> PublishedReview:
        self._check_repo(repo)
        self._check_sha(repo, head_sha)
        n = int(number)
        me = self._me(repo).lower()
        mine = lambda item: str((item.get("user") or {}).get("login", "")).lower() == me  # noqa: E731
        own_review: dict[str, Any] | None = None
        reviews = self.api.pages(
            f"/repos/{repo}/pulls/{n}/reviews", repo=repo, params={"per_page": 100}, item=GhReview
        )
        for item in reviews:
            if mine(item) and read_marker(item.get("body")) == (review.run, None):
                own_review = item
                break
        own: dict[str, OwnComment] = {}
        comments = self.api.pages(
            f"/repos/{repo}/pulls/{n}/comments", repo=repo, params={"per_page": 100}, item=GhComment
        )
        for item in comments:
            found = read_marker(item.get("body"))
            if mine(item) and found and found[0] == review.run and found[1]:
                own[found[1]] = OwnComment(
                    ident=found[1],
                    id=str(item["id"]),
                    body=item["body"],
                    path=item.get("path", ""),
                    line=int(item.get("line") or item.get("original_line") or 0),
                )
        first = own_review is None and not own
        if first and review.comments:
            whole = self._review_at_once(repo, n, head_sha, review)
            if whole is not None:
                return whole
        results, unplaced = sync_comments(
            review,
            own,
            edit=lambda old, body: self._edit_comment(repo, old, body),
            create=lambda comment, body: self._single_comment(repo, n, head_sha, comment, body),
        )
        body = summary_text(review, unplaced)
        if own_review is None:
            own_review = self._post_review(repo, n, head_sha, body, [])
        elif own_review.get("body") != body:
            path = f"/repos/{repo}/pulls/{n}/reviews/{own_review['id']}"
            own_review = self.api.call("PUT", path, repo=repo, json={"body": body}, expect=GhReview).data
        return self._published(own_review, created=first, comments=results)

    def _review_at_once(
        self, repo: str, n: int, head_sha: str, review: ReviewDraft
    ) -> PublishedReview | None:
        """The first publish: one review with every comment; None when GitHub refuses a line (422)."""
        comments = [
            {
                "path": c.path,
                "line": c.line,
                "side": "RIGHT",
                "body": with_marker(review.run, c.body, c.ident),
            }
            for c in review.comments
        ]
        try:
            posted = self._post_review(repo, n, head_sha, summary_text(review, []), comments)
        except ForgeError as exc:
            if exc.status != 422:
                raise
            log.info("forge.github.review_lines_refused", repo=repo, pr=n, run=review.run)
            return None
        path = f"/repos/{repo}/pulls/{n}/reviews/{posted['id']}/comments"
        ids = {}
        for item in self.api.pages(path, repo=repo, params={"per_page": 100}, item=GhComment):
            found = read_marker(item.get("body"))
            if found and found[1]:
                ids[found[1]] = str(item["id"])
        results = [
            PublishedComment(ident=c.ident, path=c.path, line=c.line, action="created", id=ids.get(c.ident))
            for c in review.comments
        ]
        return self._published(posted, created=True, comments=results)

    def _post_review(
        self, repo: str, n: int, head_sha: str, body: str, comments: list[dict[str, Any]]
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"commit_id": head_sha, "body": body, "event": "COMMENT"}
        if comments:
            payload["comments"] = comments
        path = f"/repos/{repo}/pulls/{n}/reviews"
        data: dict[str, Any] = self.api.call("POST", path, repo=repo, json=payload, expect=GhReview).data
        return data

    def _single_comment(
        self, repo: str, n: int, head_sha: str, comment: InlineComment, body: str
    ) -> str | None:
        payload = {
            "body": body,
            "commit_id": head_sha,
            "path": comment.path,
            "line": comment.line,
            "side": "RIGHT",
        }
        try:
            path = f"/repos/{repo}/pulls/{n}/comments"
            data = self.api.call("POST", path, repo=repo, json=payload, expect=GhComment).data
        except ForgeError as exc:
            if exc.status == 422:
                return None
            raise
        return str(data["id"])

    def _edit_comment(self, repo: str, old: OwnComment, body: str) -> None:
        self.api.call("PATCH", f"/repos/{repo}/pulls/comments/{old.id}", repo=repo, json={"body": body})

    @staticmethod
    def _published(
        review: dict[str, Any], *, created: bool, comments: list[PublishedComment]
    ) -> PublishedReview:
        return PublishedReview(
            id=str(review["id"]), url=str(review.get("html_url", "")), created=created, comments=comments
        )

    def _me(self, repo: str) -> str:
        if self._login is None:
            try:
                data = self.api.call("GET", "/user", repo=repo, expect=GhMe).data
            except ForgeError as exc:
                if exc.status not in (401, 403):
                    raise
                raise ForgeError(
                    self.kind,
                    repo,
                    "GET /user",
                    "cannot tell which account this token is, so Jury's own reviews cannot be told from "
                    "others'; a GitHub App: set JURY_GITHUB_LOGIN to its bot account (name[bot])",
                    status=exc.status,
                ) from None
            self._login = str(data["login"])
        return self._login

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
        """``ref`` is not needed: GitHub files a check or status under the commit alone."""
        self._check_repo(repo)
        self._check_sha(repo, head_sha)
        if conclusion not in STATUS_STATE:
            raise ValueError(f"conclusion must be one of {', '.join(STATUS_STATE)}, not {conclusion!r}")
        if self._checks_ok is not False:
            try:
                result = self._check_run(repo, head_sha, name, conclusion, title, summary, details_url)
            except ForgeError as exc:
                if self.checks == "checks" or exc.status not in (403, 404):
                    raise
                log.info("forge.github.statuses_instead", repo=repo, status=exc.status)
                self._checks_ok = False
            else:
                self._checks_ok = True
                return result
        return self._status(repo, head_sha, name, conclusion, title, details_url)

    def _check_run(
        self,
        repo: str,
        sha: str,
        name: str,
        conclusion: CheckConclusion,
        title: str,
        summary: str,
        details_url: str | None,
    ) -> CheckResult:
        listed = self.api.call(
            "GET",
            f"/repos/{repo}/commits/{sha}/check-runs",
            repo=repo,
            params={"check_name": name, "filter": "latest", "per_page": 100},
            expect=GhCheckRuns,
        ).data
        runs = [r for r in (listed or {}).get("check_runs", []) if r.get("name") == name]
        output = {
            "title": truncate(_neutral_text(conclusion, title), CHECK_TITLE_MAX),
            "summary": truncate(summary, CHECK_SUMMARY_MAX),
        }
        payload: dict[str, Any] = {
            "name": name,
            "status": "completed",
            "conclusion": conclusion,
            "output": output,
        }
        if details_url:
            payload["details_url"] = details_url
        if runs:
            old = runs[0]
            same = (
                old.get("status") == "completed"
                and old.get("conclusion") == conclusion
                and {k: (old.get("output") or {}).get(k) for k in output} == output
                and (details_url is None or old.get("details_url") == details_url)  # PATCH keeps an old one
            )
            if same:
                return self._check_result(old, conclusion, "unchanged")
            data = self.api.call(
                "PATCH", f"/repos/{repo}/check-runs/{old['id']}", repo=repo, json=payload, expect=GhCheckRun
            ).data
            return self._check_result(data, conclusion, "updated")
        data = self.api.call(
            "POST",
            f"/repos/{repo}/check-runs",
            repo=repo,
            json={**payload, "head_sha": sha},
            expect=GhCheckRun,
        ).data
        return self._check_result(data, conclusion, "created")

    @staticmethod
    def _check_result(data: dict[str, Any], conclusion: CheckConclusion, action: Any) -> CheckResult:
        return CheckResult(
            kind="check-run",
            id=str(data["id"]),
            name=str(data.get("name", "")),
            conclusion=conclusion,
            state=str(data.get("conclusion") or conclusion),
            action=action,
            url=data.get("html_url"),
        )

    def _status(
        self,
        repo: str,
        sha: str,
        name: str,
        conclusion: CheckConclusion,
        title: str,
        details_url: str | None,
    ) -> CheckResult:
        state = STATUS_STATE[conclusion]
        description = truncate(_neutral_text(conclusion, title), STATUS_DESCRIPTION_MAX)
        listed = self.api.call(
            "GET",
            f"/repos/{repo}/commits/{sha}/statuses",
            repo=repo,
            params={"per_page": 100},
            expect=list[GhStatus],
        ).data
        latest = next((s for s in listed or [] if s.get("context") == name), None)  # newest first
        if latest is not None and (
            latest.get("state"),
            latest.get("description"),
            latest.get("target_url") or None,
        ) == (state, description, details_url):
            return self._status_result(latest, name, conclusion, "unchanged")
        payload: dict[str, Any] = {"state": state, "context": name, "description": description}
        if details_url:
            payload["target_url"] = details_url
        path = f"/repos/{repo}/statuses/{sha}"
        data = self.api.call("POST", path, repo=repo, json=payload, expect=GhStatus).data
        return self._status_result(data, name, conclusion, "updated" if latest else "created")

    @staticmethod
    def _status_result(
        data: dict[str, Any], name: str, conclusion: CheckConclusion, action: Any
    ) -> CheckResult:
        return CheckResult(
            kind="status",
            id=str(data["id"]),
            name=name,
            conclusion=conclusion,
            state=str(data.get("state", "")),
            action=action,
            url=data.get("target_url"),
        )

    # --- checks on the arguments ---------------------------------------------------------------------

    @staticmethod
    def _check_repo(repo: str) -> None:
        if not REPO_RE.fullmatch(repo) or repo.split("/")[1] in (".", ".."):
            raise UsageError(f"not a GitHub repository: {repo!r} (expected OWNER/REPO)")

    @staticmethod
    def _check_sha(repo: str, sha: str) -> None:
        if not is_sha(sha):
            raise UsageError(f"{repo}: not a full commit sha: {sha!r}")
