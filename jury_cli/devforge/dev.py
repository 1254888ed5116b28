"""``DevForge``: the tests' ``ForgeServer`` served for people, over bare repositories on disk.

It takes any token (as the user ``jury-dev``), keeps its PRs in git (``jury_cli.devforge.repos``), and adds
a small API of its own under ``/_dev`` that ``jury dev forge seed``, ``env`` and ``published`` call:

- ``GET /_dev``: where it serves from (the root, the API URLs);
- ``POST /_dev/repos`` ``{"name": "OWNER/NAME", "trunk": "main"}``: the bare repository, made if missing;
- ``POST /_dev/pulls`` ``{"repo", "head", "base", "title", "body"}``: open a PR (or move it to its branch);
- ``GET /_dev/published``: what Jury wrote, per repository: reviews, inline comments, statuses, check runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from jury_cli.devforge.repos import DevRepos
from jury_cli.devforge.server import FakePR, ForgeServer, HttpError, Recorded, Reply, User

DEV_LOGIN = "jury-dev"
DEV_TOKEN = "dev-forge-token"  # any token is taken; this is the one ``jury dev forge env`` suggests


def pr_summary(name: str, pr: FakePR) -> dict[str, Any]:
    return {
        "repo": name,
        "number": pr.number,
        "title": pr.title,
        "head": pr.head_branch,
        "base": pr.base,
        "head_sha": pr.head_sha,
        "url": f"https://github.com/{name}/pull/{pr.number}",
    }


class DevForge:
    """A ``ForgeServer`` on ``host:port`` whose repositories are the bare ones under ``root``."""

    def __init__(self, root: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.server = ForgeServer(host, port)
        self.server.anyone = User(DEV_LOGIN, self.server.next_id())
        self.repos = DevRepos(root, self.server)
        self.server.routes[:0] = [
            ("GET", r"/_dev", self._info),
            ("POST", r"/_dev/repos", self._create),
            ("POST", r"/_dev/pulls", self._open),
            ("GET", r"/_dev/published", self._published),
        ]
        with self.server.lock:
            self.found = self.repos.scan()

    def __enter__(self) -> DevForge:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)

    def tell(self, say: Callable[[Recorded], None]) -> None:
        """Call ``say`` with every request that wrote something (what Jury published), once answered."""
        self.server.on_request = lambda r: (
            say(r) if r.method != "GET" and not r.path.startswith("/_dev") else None
        )

    @staticmethod
    def _field(request: Recorded, key: str, default: str | None = None) -> str:
        body = request.body if isinstance(request.body, dict) else {}
        value = body.get(key, default)
        if not isinstance(value, str) or not value:
            raise HttpError(422, f"{key} is required (a string)")
        return value

    def _info(self, request: Recorded) -> Reply:
        return Reply(
            200,
            {
                "root": str(self.repos.root),
                "url": self.server.url,
                "github_api": self.server.github_api,
                "repos": sorted(self.server.github),
            },
        )

    def _create(self, request: Recorded) -> Reply:
        name = self._field(request, "name")
        path = self.repos.create(name, self._field(request, "trunk", "main"))
        return Reply(201, {"name": name, "git_dir": str(path)})

    def _open(self, request: Recorded) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        name = self._field(request, "repo")
        pr = self.repos.open(
            name,
            self._field(request, "head"),
            body.get("base") or None,
            str(body.get("title") or ""),
            str(body.get("body") or ""),
        )
        return Reply(201, pr_summary(name, pr))

    def _published(self, request: Recorded) -> Reply:
        return Reply(
            200,
            {
                name: {
                    "pulls": [
                        pr_summary(name, pr) for pr in sorted(repo.prs.values(), key=lambda p: p.number)
                    ],
                    "reviews": repo.reviews,
                    "comments": repo.comments,
                    "statuses": repo.statuses,
                    "check_runs": repo.check_runs,
                }
                for name, repo in sorted(self.server.github.items())
            },
        )
