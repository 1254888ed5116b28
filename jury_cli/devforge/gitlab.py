"""The GitLab REST v4 routes of ``ForgeServer`` (called under the server's lock).

A project is found only by its URL-encoded full path (``group%2Fsub%2Frepo``) or its numeric id, as on
GitLab: a client that sends the path unencoded gets a 404.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from jury_cli.devforge.server import FakePR, HttpError, Recorded, Reply, Repo, User, iso

if TYPE_CHECKING:
    from jury_cli.devforge.server import ForgeServer

PROJECT = r"/projects/(?P<pid>[^/]+)"
MR = PROJECT + r"/merge_requests/(?P<iid>\d+)"
STATUS_STATES = {"pending", "running", "success", "failed", "canceled", "skipped"}


def routes(server: ForgeServer) -> list[tuple[str, str, Any]]:
    def project_of(pid: str) -> Repo:
        if pid.isdigit():
            found = next((p for p in server.gitlab.values() if p.id == int(pid)), None)
        else:
            found = server.gitlab.get(unquote(pid))
        if found is None:
            raise HttpError(404, "404 Project Not Found")
        return found

    def mr_of(project: Repo, iid: str) -> FakePR:
        found = project.prs.get(int(iid))
        if found is None:
            raise HttpError(404, "404 Not found")
        return found

    def who(request: Recorded, *, required: bool = True) -> User | None:
        token = request.headers.get("private-token")
        auth = request.headers.get("authorization", "")
        if token is None and auth.startswith("Bearer "):
            token = auth.removeprefix("Bearer ")
        user = server.user_of(token or "")
        if user is None and required:
            raise HttpError(401, "401 Unauthorized")
        return user

    def author(user: User) -> dict[str, Any]:
        return {"id": user.id, "username": user.login}

    def mr_json(project: Repo, mr: FakePR) -> dict[str, Any]:
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

    def get_user(request: Recorded) -> Reply:
        user = who(request)
        assert user is not None
        return Reply(200, author(user))

    def get_project(request: Recorded, pid: str) -> Reply:
        project = project_of(pid)
        return Reply(
            200,
            {
                "id": project.id,
                "path_with_namespace": project.path,
                "http_url_to_repo": f"https://gitlab.com/{project.path}.git",
                "web_url": f"https://gitlab.com/{project.path}",
            },
        )

    def list_mrs(request: Recorded, pid: str) -> Reply:
        project = project_of(pid)
        q = {k: v[0] for k, v in request.query.items()}
        if q.get("state", "opened") != "opened":
            return server.paginate(request, [], default=20)
        items = list(project.prs.values())
        if not server.gitlab_filters:
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
        return server.paginate(request, [mr_json(project, m) for m in items], default=20)

    def get_mr(request: Recorded, pid: str, iid: str) -> Reply:
        project = project_of(pid)
        return Reply(200, mr_json(project, mr_of(project, iid)))

    def versions(request: Recorded, pid: str, iid: str) -> Reply:
        mr = mr_of(project_of(pid), iid)
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
        return server.paginate(request, items, default=20)

    def threads(project: Repo, mr: FakePR) -> list[dict[str, Any]]:
        return project.discussions.setdefault(mr.number, [])

    def list_discussions(request: Recorded, pid: str, iid: str) -> Reply:
        project = project_of(pid)
        return server.paginate(request, threads(project, mr_of(project, iid)), default=20)

    def note(user: User, body: str, position: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "id": server.next_id(),
            "body": body,
            "author": author(user),
            "type": "DiffNote" if position else None,
            "position": position,
            "system": False,
        }

    def post_discussion(request: Recorded, pid: str, iid: str) -> Reply:
        user = who(request)
        assert user is not None
        project = project_of(pid)
        mr = mr_of(project, iid)
        data = request.body or {}
        position = data.get("position")
        if position is not None:
            good = (
                position.get("position_type") == "text"
                and position.get("base_sha") == mr.base_sha
                and position.get("start_sha") == mr.start_sha
                and position.get("head_sha") in mr.heads
                and position.get("new_line") in mr.diff.get(position.get("new_path"), set())
            )
            if not good:
                raise HttpError(400, '400 Bad request - Note {:line_code=>["can\'t be blank"]}')
        thread = {
            "id": f"{server.next_id():040x}",
            "individual_note": position is None,
            "notes": [note(user, data["body"], position)],
        }
        threads(project, mr).append(thread)
        return Reply(201, thread)

    def find_note(project: Repo, mr: FakePR, nid: str, did: str | None = None) -> dict[str, Any]:
        for thread in threads(project, mr):
            if did is not None and thread["id"] != did:
                continue
            for n in thread["notes"]:
                if n["id"] == int(nid):
                    return n
        raise HttpError(404, "404 Not found")

    def edit(request: Recorded, pid: str, iid: str, nid: str, did: str | None = None) -> Reply:
        user = who(request)
        project = project_of(pid)
        found = find_note(project, mr_of(project, iid), nid, did)
        if user is None or found["author"]["id"] != user.id:
            raise HttpError(403, "403 Forbidden")
        found["body"] = (request.body or {})["body"]
        return Reply(200, found)

    def put_discussion_note(request: Recorded, pid: str, iid: str, did: str, nid: str) -> Reply:
        return edit(request, pid, iid, nid, did)

    def post_note(request: Recorded, pid: str, iid: str) -> Reply:
        user = who(request)
        assert user is not None
        project = project_of(pid)
        mr = mr_of(project, iid)
        created = note(user, (request.body or {})["body"], None)
        threads(project, mr).append(
            {"id": f"{server.next_id():040x}", "individual_note": True, "notes": [created]}
        )
        return Reply(201, created)

    def put_note(request: Recorded, pid: str, iid: str, nid: str) -> Reply:
        return edit(request, pid, iid, nid)

    def list_statuses(request: Recorded, pid: str, sha: str) -> Reply:
        project = project_of(pid)
        name = request.query.get("name", [None])[0]
        every = request.query.get("all", ["false"])[0] == "true"
        items = [
            s
            for s in project.statuses
            if s["sha"] == sha and name in (None, s["name"]) and (every or not s["retried"])
        ]
        return server.paginate(request, items, default=20)

    def post_status(request: Recorded, pid: str, sha: str) -> Reply:
        user = who(request)
        assert user is not None
        project = project_of(pid)
        data = request.body or {}
        state, name = data.get("state"), data.get("name", "default")
        if state not in STATUS_STATES:
            raise HttpError(400, "state does not have a valid value")
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
            "id": server.next_id(),
            "sha": sha,
            "name": name,
            "status": state,
            "description": data.get("description"),
            "target_url": data.get("target_url"),
            "author": author(user),
            "retried": False,
        }
        project.statuses.append(status)
        return Reply(201, status)

    return [
        ("GET", r"/user", get_user),
        ("GET", PROJECT, get_project),
        ("GET", PROJECT + r"/merge_requests", list_mrs),
        ("GET", MR, get_mr),
        ("GET", MR + r"/versions", versions),
        ("GET", MR + r"/discussions", list_discussions),
        ("POST", MR + r"/discussions", post_discussion),
        ("PUT", MR + r"/discussions/(?P<did>[0-9a-f]+)/notes/(?P<nid>\d+)", put_discussion_note),
        ("POST", MR + r"/notes", post_note),
        ("PUT", MR + r"/notes/(?P<nid>\d+)", put_note),
        ("GET", PROJECT + r"/repository/commits/(?P<sha>[0-9a-f]+)/statuses", list_statuses),
        ("POST", PROJECT + r"/statuses/(?P<sha>[0-9a-f]+)", post_status),
    ]
