"""The GitHub REST v3 routes of ``ForgeServer`` (called under the server's lock)."""

from __future__ import annotations

from typing import Any

from jury_cli.devforge.model import FakePR, HttpError, Recorded, Reply, Repo, User, iso

# The server these routes answer for (jury_cli.devforge.server.ForgeServer, which imports this module).
ForgeServer = Any

REPO = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"
STATUS_STATES = {"error", "failure", "pending", "success"}
CONCLUSIONS = {"success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required"}


class _Routes:
    """The GitHub handlers, a method each, over the server's state; ``table`` routes them."""

    def __init__(self, server: ForgeServer) -> None:
        self.server = server

    def repo_of(self, owner: str, name: str) -> Repo:
        found = self.server.github.get(f"{owner}/{name}")
        if found is None:
            raise HttpError(404, "Not Found")
        return found

    def pr_of(self, repo: Repo, num: str) -> FakePR:
        found = repo.prs.get(int(num))
        if found is None:
            raise HttpError(404, "Not Found")
        return found

    def who(self, request: Recorded, *, required: bool = True) -> User | None:
        auth = request.headers.get("authorization", "")
        user = self.server.user_of(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
        if user is None and required:
            raise HttpError(401, "Requires authentication")
        return user

    def author(self, user: User) -> dict[str, Any]:
        return {"login": user.login, "id": user.id, "type": "Bot" if user.app else "User"}

    def pr_json(self, repo: Repo, pr: FakePR) -> dict[str, Any]:
        clone = f"https://github.com/{repo.path}.git"
        head_repo = f"someone/{repo.path.split('/')[1]}" if pr.fork else repo.path
        return {
            "number": pr.number,
            "state": "open",
            "title": pr.title,
            "body": pr.body,
            "draft": pr.draft,
            "labels": [{"name": label} for label in pr.labels],
            "user": {"login": pr.author},
            "html_url": f"https://github.com/{repo.path}/pull/{pr.number}",
            "updated_at": iso(pr.updated_at),
            "head": {
                "ref": pr.head_branch,
                "sha": pr.head_sha,
                "repo": {"full_name": head_repo, "clone_url": f"https://github.com/{head_repo}.git"},
            },
            "base": {
                "ref": pr.base,
                "sha": pr.base_sha,
                "repo": {"full_name": repo.path, "clone_url": clone},
            },
        }

    def check_line(self, pr: FakePR, path: Any, line: Any, side: Any) -> None:
        if side != "RIGHT" or not isinstance(line, int) or line not in pr.diff.get(path, set()):
            raise HttpError(
                422, "Unprocessable Entity: pull_request_review_thread.line must be part of the diff"
            )

    def list_pulls(self, request: Recorded, owner: str, name: str) -> Reply:
        repo = self.repo_of(owner, name)
        base = request.query.get("base", [None])[0]
        items = [pr for pr in repo.prs.values() if base is None or pr.base == base]
        if request.query.get("sort", [""])[0] == "updated":
            items.sort(key=lambda pr: pr.updated_at, reverse=True)
        else:
            items.sort(key=lambda pr: pr.number, reverse=True)
        return self.server.paginate(request, [self.pr_json(repo, pr) for pr in items], default=30)

    def get_pull(self, request: Recorded, owner: str, name: str, num: str) -> Reply:
        repo = self.repo_of(owner, name)
        return Reply(200, self.pr_json(repo, self.pr_of(repo, num)))

    def get_user(self, request: Recorded) -> Reply:
        user = self.who(request)
        assert user is not None
        if user.app:
            raise HttpError(403, "Resource not accessible by integration")
        return Reply(200, self.author(user))

    def list_reviews(self, request: Recorded, owner: str, name: str, num: str) -> Reply:
        repo = self.repo_of(owner, name)
        self.pr_of(repo, num)
        return self.server.paginate(request, [r for r in repo.reviews if r["pr"] == int(num)], default=30)

    def new_comment(
        self, repo: Repo, pr: FakePR, user: User, body: str, path: str, line: int, review: int
    ) -> None:
        cid = self.server.next_id()
        repo.comments.append(
            {
                "id": cid,
                "pr": pr.number,
                "pull_request_review_id": review,
                "user": self.author(user),
                "body": body,
                "path": path,
                "line": line,
                "side": "RIGHT",
                "commit_id": pr.head_sha,
                "html_url": f"https://github.com/{repo.path}/pull/{pr.number}#discussion_r{cid}",
            }
        )

    def new_review(self, repo: Repo, pr: FakePR, user: User, body: str, commit: str) -> dict[str, Any]:
        rid = self.server.next_id()
        review = {
            "id": rid,
            "pr": pr.number,
            "user": self.author(user),
            "body": body,
            "commit_id": commit,
            "state": "COMMENTED",
            "html_url": f"https://github.com/{repo.path}/pull/{pr.number}#pullrequestreview-{rid}",
        }
        repo.reviews.append(review)
        return review

    def post_review(self, request: Recorded, owner: str, name: str, num: str) -> Reply:
        user = self.who(request)
        assert user is not None
        repo = self.repo_of(owner, name)
        pr = self.pr_of(repo, num)
        data = request.body or {}
        if data.get("commit_id") not in pr.heads:
            raise HttpError(422, "commit_id is not part of the pull request")
        if data.get("event") != "COMMENT" or not data.get("body"):
            raise HttpError(422, "a COMMENT review needs a body")
        comments = data.get("comments") or []
        for c in comments:
            self.check_line(pr, c.get("path"), c.get("line"), c.get("side", "RIGHT"))
        review = self.new_review(repo, pr, user, data["body"], data["commit_id"])
        for c in comments:
            self.new_comment(repo, pr, user, c["body"], c["path"], c["line"], review["id"])
        return Reply(200, review)

    def put_review(self, request: Recorded, owner: str, name: str, num: str, rid: str) -> Reply:
        user = self.who(request)
        repo = self.repo_of(owner, name)
        review = next((r for r in repo.reviews if r["id"] == int(rid) and r["pr"] == int(num)), None)
        if review is None:
            raise HttpError(404, "Not Found")
        if user is None or review["user"]["login"] != user.login:
            raise HttpError(403, "not yours")
        review["body"] = (request.body or {})["body"]
        return Reply(200, review)

    def review_comments(self, request: Recorded, owner: str, name: str, num: str, rid: str) -> Reply:
        repo = self.repo_of(owner, name)
        items = [c for c in repo.comments if c["pull_request_review_id"] == int(rid)]
        return self.server.paginate(request, items, default=30)

    def list_comments(self, request: Recorded, owner: str, name: str, num: str) -> Reply:
        repo = self.repo_of(owner, name)
        self.pr_of(repo, num)
        return self.server.paginate(request, [c for c in repo.comments if c["pr"] == int(num)], default=30)

    def post_comment(self, request: Recorded, owner: str, name: str, num: str) -> Reply:
        user = self.who(request)
        assert user is not None
        repo = self.repo_of(owner, name)
        pr = self.pr_of(repo, num)
        data = request.body or {}
        if data.get("commit_id") not in pr.heads:
            raise HttpError(422, "commit_id is not part of the pull request")
        self.check_line(pr, data.get("path"), data.get("line"), data.get("side", "RIGHT"))
        holder = self.new_review(
            repo, pr, user, "", data["commit_id"]
        )  # GitHub wraps a lone comment in a review
        self.new_comment(repo, pr, user, data["body"], data["path"], data["line"], holder["id"])
        return Reply(201, repo.comments[-1])

    def patch_comment(self, request: Recorded, owner: str, name: str, cid: str) -> Reply:
        user = self.who(request)
        repo = self.repo_of(owner, name)
        comment = next((c for c in repo.comments if c["id"] == int(cid)), None)
        if comment is None:
            raise HttpError(404, "Not Found")
        if user is None or comment["user"]["login"] != user.login:
            raise HttpError(403, "not yours")
        comment["body"] = (request.body or {})["body"]
        return Reply(200, comment)

    def list_check_runs(self, request: Recorded, owner: str, name: str, sha: str) -> Reply:
        repo = self.repo_of(owner, name)
        wanted = request.query.get("check_name", [None])[0]
        runs = [r for r in repo.check_runs if r["head_sha"] == sha and wanted in (None, r["name"])]
        runs.reverse()
        return Reply(200, {"total_count": len(runs), "check_runs": runs})

    def writer_app(self, request: Recorded) -> User:
        user = self.who(request)
        assert user is not None
        if not user.app:
            raise HttpError(403, "Resource not accessible by personal access token")
        return user

    def check_payload(self, data: dict[str, Any]) -> None:
        if data.get("conclusion") not in CONCLUSIONS or data.get("status") != "completed":
            raise HttpError(422, "Invalid conclusion or status")

    def post_check_run(self, request: Recorded, owner: str, name: str) -> Reply:
        self.writer_app(request)
        repo = self.repo_of(owner, name)
        data = dict(request.body or {})
        self.check_payload(data)
        run = {"id": self.server.next_id(), **data}
        run["html_url"] = f"https://github.com/{repo.path}/runs/{run['id']}"
        repo.check_runs.append(run)
        return Reply(201, run)

    def patch_check_run(self, request: Recorded, owner: str, name: str, rid: str) -> Reply:
        self.writer_app(request)
        repo = self.repo_of(owner, name)
        run = next((r for r in repo.check_runs if r["id"] == int(rid)), None)
        if run is None:
            raise HttpError(404, "Not Found")
        data = dict(request.body or {})
        self.check_payload(data)
        run.update(data)
        return Reply(200, run)

    def list_statuses(self, request: Recorded, owner: str, name: str, sha: str) -> Reply:
        repo = self.repo_of(owner, name)
        items = [s for s in reversed(repo.statuses) if s["sha"] == sha]
        return self.server.paginate(request, items, default=30)

    def post_status(self, request: Recorded, owner: str, name: str, sha: str) -> Reply:
        self.who(request)
        repo = self.repo_of(owner, name)
        data = request.body or {}
        if data.get("state") not in STATUS_STATES or len(data.get("description") or "") > 140:
            raise HttpError(422, "Validation Failed")
        status = {
            "id": self.server.next_id(),
            "sha": sha,
            "state": data["state"],
            "context": data.get("context", "default"),
            "description": data.get("description"),
            "target_url": data.get("target_url"),
        }
        repo.statuses.append(status)
        return Reply(201, status)

    def table(self) -> list[tuple[str, str, Any]]:
        pulls = REPO + r"/pulls/(?P<num>\d+)"
        return [
            ("GET", r"/user", self.get_user),
            ("GET", REPO + r"/pulls", self.list_pulls),
            ("GET", pulls, self.get_pull),
            ("GET", pulls + r"/reviews", self.list_reviews),
            ("POST", pulls + r"/reviews", self.post_review),
            ("PUT", pulls + r"/reviews/(?P<rid>\d+)", self.put_review),
            ("GET", pulls + r"/reviews/(?P<rid>\d+)/comments", self.review_comments),
            ("GET", pulls + r"/comments", self.list_comments),
            ("POST", pulls + r"/comments", self.post_comment),
            ("PATCH", REPO + r"/pulls/comments/(?P<cid>\d+)", self.patch_comment),
            ("GET", REPO + r"/commits/(?P<sha>[0-9a-f]+)/check-runs", self.list_check_runs),
            ("POST", REPO + r"/check-runs", self.post_check_run),
            ("PATCH", REPO + r"/check-runs/(?P<rid>\d+)", self.patch_check_run),
            ("GET", REPO + r"/commits/(?P<sha>[0-9a-f]+)/statuses", self.list_statuses),
            ("POST", REPO + r"/statuses/(?P<sha>[0-9a-f]+)", self.post_status),
        ]


def routes(server: ForgeServer) -> list[tuple[str, str, Any]]:
    return _Routes(server).table()
