"""The GitLab REST v4 routes of ``ForgeServer`` (called under the server's lock).

A project is found only by its URL-encoded full path (``group%2Fsub%2Frepo``) or its numeric id, as on
GitLab: a client that sends the path unencoded gets a 404.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import unquote

from jury_cli.devforge.model import FakePR, HttpError, Recorded, Reply, Repo, User, iso

# The server these routes answer for (jury_cli.devforge.server.ForgeServer, which imports this module).
ForgeServer = Any

PROJECT = r"/projects/(?P<pid>[^/]+)"
MR = PROJECT + r"/merge_requests/(?P<iid>\d+)"
STATUS_STATES = {"pending", "running", "success", "failed", "canceled", "skipped"}


class _Routes:
    """The GitLab handlers, a method each, over the server's state; ``table`` routes them."""

    def __init__(self, server: ForgeServer) -> None:
        self.server = server

    def project_of(self, pid: str) -> Repo:
        if pid.isdigit():
            found = next((p for p in self.server.gitlab.values() if p.id == int(pid)), None)
        else:
            found = self.server.gitlab.get(unquote(pid))
        if found is None:
            raise HttpError(404, "404 Project Not Found")
        return found

    def mr_of(self, project: Repo, iid: str) -> FakePR:
        found = project.prs.get(int(iid))
        if found is None:
            raise HttpError(404, "404 Not found")
        return found

    def who(self, request: Recorded, *, required: bool = True) -> User | None:
        token = request.headers.get("private-token")
        auth = request.headers.get("authorization", "")
        if token is None and auth.startswith("Bearer "):
            token = auth.removeprefix("Bearer ")
        user = self.server.user_of(token or "")
        if user is None and required:
            raise HttpError(401, "401 Unauthorized")
        return user

    def author(self, user: User) -> dict[str, Any]:
        return {"id": user.id, "username": user.login}

    def mr_json(self, project: Repo, mr: FakePR) -> dict[str, Any]:
        return {
            "id": 90000 + mr.number,
            "iid": mr.number,
            "project_id": project.id,
            "state": "opened",
            "title": mr.title,
            "description": mr.body,
            "draft": mr.draft,
            "work_in_progress": mr.draft,
            "labels": list(mr.labels),
            "author": {"username": mr.author, "id": 7},
            "web_url": f"https://gitlab.com/{project.path}/-/merge_requests/{mr.number}",
            "updated_at": iso(mr.updated_at),
            "sha": mr.head_sha,
            "source_branch": mr.head_branch,
            "target_branch": mr.base,
            "source_project_id": project.id + 1 if mr.fork else project.id,
            "target_project_id": project.id,
            "diff_refs": {"base_sha": mr.base_sha, "start_sha": mr.start_sha, "head_sha": mr.head_sha},
        }

    def get_user(self, request: Recorded) -> Reply:
        user = self.who(request)
        assert user is not None
        return Reply(200, self.author(user))

    def get_project(self, request: Recorded, pid: str) -> Reply:
        project = self.project_of(pid)
        return Reply(
            200,
            {
                "id": project.id,
                "path_with_namespace": project.path,
                "http_url_to_repo": f"https://gitlab.com/{project.path}.git",
                "web_url": f"https://gitlab.com/{project.path}",
            },
        )

    def list_mrs(self, request: Recorded, pid: str) -> Reply:
        project = self.project_of(pid)
        q = {k: v[0] for k, v in request.query.items()}
        if q.get("state", "opened") != "opened":
            return self.server.paginate(request, [], default=20)
        items = list(project.prs.values())
        if not self.server.gitlab_filters:
            q = {k: v for k, v in q.items() if k in ("order_by", "sort")}
        if "target_branch" in q:
            items = [m for m in items if m.base == q["target_branch"]]
        if q.get("labels"):
            wanted = set(q["labels"].split(","))
            items = [m for m in items if wanted <= set(m.labels)]
        if q.get("wip") == "no":
            items = [m for m in items if not m.draft]
        if "updated_after" in q:
            since = datetime.fromisoformat(q["updated_after"])
            items = [m for m in items if m.updated_at >= since]
        if q.get("order_by") == "updated_at":
            items.sort(key=lambda m: m.updated_at, reverse=q.get("sort", "desc") == "desc")
        else:
            items.sort(key=lambda m: m.number, reverse=True)
        return self.server.paginate(request, [self.mr_json(project, m) for m in items], default=20)

    def get_mr(self, request: Recorded, pid: str, iid: str) -> Reply:
        project = self.project_of(pid)
        return Reply(200, self.mr_json(project, self.mr_of(project, iid)))

    def versions(self, request: Recorded, pid: str, iid: str) -> Reply:
        mr = self.mr_of(self.project_of(pid), iid)
        items = [
            {
                "id": n,
                "head_commit_sha": sha,
                "base_commit_sha": mr.base_sha,
                "start_commit_sha": mr.start_sha,
            }
            for n, sha in enumerate(mr.heads, 1)
        ]
        items.reverse()
        return self.server.paginate(request, items, default=20)

    def threads(self, project: Repo, mr: FakePR) -> list[dict[str, Any]]:
        return project.discussions.setdefault(mr.number, [])

    def list_discussions(self, request: Recorded, pid: str, iid: str) -> Reply:
        project = self.project_of(pid)
        return self.server.paginate(request, self.threads(project, self.mr_of(project, iid)), default=20)

    def note(self, user: User, body: str, position: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "id": self.server.next_id(),
            "body": body,
            "author": self.author(user),
            "type": "DiffNote" if position else None,
            "position": position,
            "system": False,
        }

    def post_discussion(self, request: Recorded, pid: str, iid: str) -> Reply:
        user = self.who(request)
        assert user is not None
        project = self.project_of(pid)
        mr = self.mr_of(project, iid)
        data = request.body or {}
        position = data.get("position")
        if position is not None:
            # an unchanged line is on both sides: GitLab wants its old number too, and an added line
            # has none
            old_line = mr.context.get(position.get("new_path"), {}).get(position.get("new_line"))
            good = (
                position.get("position_type") == "text"
                and position.get("base_sha") == mr.base_sha
                and position.get("start_sha") == mr.start_sha
                and position.get("head_sha") in mr.heads
                and position.get("new_line") in mr.diff.get(position.get("new_path"), set())
                and position.get("old_line") == old_line
            )
            if not good:
                raise HttpError(400, '400 Bad request - Note {:line_code=>["can\'t be blank"]}')
        thread = {
            "id": f"{self.server.next_id():040x}",
            "individual_note": position is None,
            "notes": [self.note(user, data["body"], position)],
        }
        self.threads(project, mr).append(thread)
        return Reply(201, thread)

    def find_note(self, project: Repo, mr: FakePR, nid: str, did: str | None = None) -> dict[str, Any]:
        for thread in self.threads(project, mr):
            if did is not None and thread["id"] != did:
                continue
            for n in thread["notes"]:
                if n["id"] == int(nid):
                    return n
        raise HttpError(404, "404 Not found")

    def edit(self, request: Recorded, pid: str, iid: str, nid: str, did: str | None = None) -> Reply:
        user = self.who(request)
        project = self.project_of(pid)
        found = self.find_note(project, self.mr_of(project, iid), nid, did)
        if user is None or found["author"]["id"] != user.id:
            raise HttpError(403, "403 Forbidden")
        found["body"] = (request.body or {})["body"]
        return Reply(200, found)

    def put_discussion_note(self, request: Recorded, pid: str, iid: str, did: str, nid: str) -> Reply:
        return self.edit(request, pid, iid, nid, did)

    def post_note(self, request: Recorded, pid: str, iid: str) -> Reply:
        user = self.who(request)
        assert user is not None
        project = self.project_of(pid)
        mr = self.mr_of(project, iid)
        created = self.note(user, (request.body or {})["body"], None)
        self.threads(project, mr).append(
            {"id": f"{self.server.next_id():040x}", "individual_note": True, "notes": [created]}
        )
        return Reply(201, created)

    def put_note(self, request: Recorded, pid: str, iid: str, nid: str) -> Reply:
        return self.edit(request, pid, iid, nid)

    def list_statuses(self, request: Recorded, pid: str, sha: str) -> Reply:
        project = self.project_of(pid)
        name = request.query.get("name", [None])[0]
        every = request.query.get("all", ["false"])[0] == "true"
        items = [
            s
            for s in project.statuses
            if s["sha"] == sha and name in (None, s["name"]) and (every or not s["retried"])
        ]
        return self.server.paginate(request, items, default=20)

    def post_status(self, request: Recorded, pid: str, sha: str) -> Reply:
        user = self.who(request)
        assert user is not None
        project = self.project_of(pid)
        data = request.body or {}
        state, name = data.get("state"), data.get("name", "default")
        if state not in STATUS_STATES:
            raise HttpError(400, "state does not have a valid value")
        held = any(not m.fork and m.head_sha == sha for m in project.prs.values())  # its branch holds it
        if not data.get("ref") and not held:
            # without a ref GitLab looks for a branch that holds the commit: a fork MR's head (only
            # refs/merge-requests/N/head holds it) or a commit of no branch it knows has none
            raise HttpError(404, "404 References for commit Not Found")
        latest = next(
            (
                s
                for s in reversed(project.statuses)
                if s["sha"] == sha and s["name"] == name and not s["retried"]
            ),
            None,
        )
        if latest is not None and latest["status"] in ("pending", "running"):
            if latest["status"] == state:
                raise HttpError(400, f"Cannot transition status via :{state} from :{state}")
            latest.update(
                status=state, description=data.get("description"), target_url=data.get("target_url")
            )
            return Reply(201, latest)
        if latest is not None:
            latest["retried"] = True  # a finished status is replaced by a new one, as GitLab does
        status = {
            "id": self.server.next_id(),
            "sha": sha,
            "name": name,
            "status": state,
            "description": data.get("description"),
            "target_url": data.get("target_url"),
            "ref": data.get("ref"),
            "author": self.author(user),
            "retried": False,
        }
        project.statuses.append(status)
        return Reply(201, status)

    def table(self) -> list[tuple[str, str, Any]]:
        return [
            ("GET", r"/user", self.get_user),
            ("GET", PROJECT, self.get_project),
            ("GET", PROJECT + r"/merge_requests", self.list_mrs),
            ("GET", MR, self.get_mr),
            ("GET", MR + r"/versions", self.versions),
            ("GET", MR + r"/discussions", self.list_discussions),
            ("POST", MR + r"/discussions", self.post_discussion),
            ("PUT", MR + r"/discussions/(?P<did>[0-9a-f]+)/notes/(?P<nid>\d+)", self.put_discussion_note),
            ("POST", MR + r"/notes", self.post_note),
            ("PUT", MR + r"/notes/(?P<nid>\d+)", self.put_note),
            ("GET", PROJECT + r"/repository/commits/(?P<sha>[0-9a-f]+)/statuses", self.list_statuses),
            ("POST", PROJECT + r"/statuses/(?P<sha>[0-9a-f]+)", self.post_status),
        ]


def routes(server: ForgeServer) -> list[tuple[str, str, Any]]:
    return _Routes(server).table()
