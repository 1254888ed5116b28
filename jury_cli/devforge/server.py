"""A real local HTTP server that speaks the GitHub REST v3 and GitLab REST v4 calls Jury's forge uses.

It is the tests' fake forge (tests/fakes/forge_server.py re-exports it) and the core of ``jury dev forge``
(``jury_cli.devforge.command``), which serves it over local bare repositories so sweeps can be tried
offline. ``ForgeServer`` listens on 127.0.0.1 (port 0 unless given) in a thread. The GitHub API is
under ``/github`` (``server.github_api``), the GitLab one under ``/gitlab/api/v4``
(``server.gitlab_api``). It keeps state (PRs/MRs with their diffs, reviews, comments, discussions, check
runs, statuses) that tests seed and inspect, and does what the forges do that a client must cope with:

- pagination over ``per_page`` (capped by ``max_per_page`` so two PRs can make two pages), with ``Link``
  headers (and GitLab's ``X-Next-Page``);
- ETags on every GET answer and 304 to a matching ``If-None-Match`` (``full`` and ``not_modified`` count
  per path, so a test can tell a reused body from a resent one);
- refusals: writes without a known token (401), check runs for a token that is not an app (403), inline
  comments on lines outside the diff (422 on GitHub, 400 on GitLab);
- scripted faults (``fail_next``): 429/403/5xx with any headers and message, for the next N requests
  whose path contains a string; and malformed answers (``garble_next``): a 200 whose body is whatever
  the test says (a list where an object belongs, a string), for the next request of a method and path.

Routes live in ``jury_cli.devforge.github`` and ``jury_cli.devforge.gitlab``; every request is recorded.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from jury_cli.devforge.model import (  # noqa: F401  (re-exported: tests import them from here)
    GITHUB_PREFIX,
    GITLAB_PREFIX,
    FakePR,
    Fault,
    Garble,
    HttpError,
    Recorded,
    Reply,
    Repo,
    User,
    iso,
)


class ForgeServer:
    """The server; use as a context manager (``with ForgeServer() as server``)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        from jury_cli.devforge import github as github_routes
        from jury_cli.devforge import gitlab as gitlab_routes

        self.lock = threading.RLock()
        self.users: dict[str, User] = {}
        # Who an unknown token is (``jury dev forge`` takes any token); None: an unknown token is refused.
        self.anyone: User | None = None
        self.on_request: Callable[[Recorded], None] | None = None  # told of every request once answered
        self.github: dict[str, Repo] = {}
        self.gitlab: dict[str, Repo] = {}
        self.requests: list[Recorded] = []
        self.full: Counter[str] = Counter()  # "GET /path" -> 200 answers with a body
        self.not_modified: Counter[str] = Counter()  # "GET /path" -> 304 answers
        self.faults: deque[Fault] = deque()
        self.garbles: list[Garble] = []
        self.max_per_page = 100
        self.gitlab_links = True  # False: GitLab lists page by X-Next-Page alone
        self.gitlab_filters = True  # False: GitLab ignores the list filters (Jury must filter on its side)
        self.extra_headers: dict[str, str] = {}  # sent with every successful answer
        self.next_link_base: str | None = None  # point "next" links at another origin (an attack)
        self._ids = 1000
        self.routes: list[tuple[str, str, Any]] = [
            *((m, GITHUB_PREFIX + p, h) for m, p, h in github_routes.routes(self)),
            *((m, GITLAB_PREFIX + p, h) for m, p, h in gitlab_routes.routes(self)),
        ]
        self.httpd = ThreadingHTTPServer((host, port), self._handler())
        self.httpd.daemon_threads = False
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="forge-server", daemon=True
        )

    # --- set-up ------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def github_api(self) -> str:
        return self.url + GITHUB_PREFIX

    @property
    def gitlab_api(self) -> str:
        return self.url + GITLAB_PREFIX

    def user(self, token: str, login: str, *, app: bool = False) -> User:
        with self.lock:
            found = self.users[token] = User(login, self.next_id(), app)
            return found

    def user_of(self, token: str) -> User | None:
        """The user a token stands for: a known one's, else ``anyone`` (None unless set)."""
        with self.lock:
            return self.users.get(token, self.anyone)

    def github_repo(self, path: str) -> Repo:
        with self.lock:
            return self.github.setdefault(path, Repo(path, self.next_id()))

    def gitlab_project(self, path: str) -> Repo:
        with self.lock:
            return self.gitlab.setdefault(path, Repo(path, self.next_id()))

    def fail_next(
        self,
        count: int,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        message: str = "scripted failure",
        match: str = "",
    ) -> None:
        """Answer the next ``count`` requests whose path contains ``match`` with ``status``."""
        with self.lock:
            self.faults.append(Fault(status, dict(headers or {}), message, match, count))

    def garble_next(self, method: str, pattern: str, data: Any) -> None:
        """Answer the next ``method`` request whose path matches ``pattern`` (``re.search``) with a 200
        holding ``data``: a malformed answer, nothing done."""
        with self.lock:
            self.garbles.append(Garble(method, pattern, data))

    def next_id(self) -> int:
        with self.lock:
            self._ids += 1
            return self._ids

    def calls(self, method: str | None = None, contains: str = "") -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if (method is None or r.method == method) and contains in r.path]

    def __enter__(self) -> ForgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    # --- serving -----------------------------------------------------------------------------------

    def _fault(self, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.match in path and fault.left > 0:
                    fault.left -= 1
                    if fault.left == 0:
                        self.faults.remove(fault)
                    return fault
        return None

    def _route(self, method: str, path: str) -> tuple[Any, dict[str, str]] | None:
        for route_method, pattern, handler in self.routes:
            if route_method != method:
                continue
            found = re.fullmatch(pattern, path)
            if found:
                return handler, found.groupdict()
        return None

    def paginate(self, request: Recorded, items: list[Any], *, default: int) -> Reply:
        """One page of ``items`` by ``page``/``per_page``: a ``Link`` header on both forges (GitLab's can
        be switched off with ``gitlab_links``, as GitLab drops it on some lists), and GitLab's ``X-Page``
        and ``X-Next-Page`` as well."""
        gitlab = request.path.startswith(GITLAB_PREFIX)
        per_page = min(int(request.query.get("per_page", [default])[0]), self.max_per_page)
        page = max(int(request.query.get("page", ["1"])[0]), 1)
        chunk = items[(page - 1) * per_page : page * per_page]
        last = max((len(items) + per_page - 1) // per_page, 1)
        headers: dict[str, str] = {}
        if gitlab:
            headers["X-Page"] = str(page)
            headers["X-Next-Page"] = str(page + 1) if page < last else ""
        if page < last and (self.gitlab_links or not gitlab):
            query = {k: v[0] for k, v in request.query.items()}
            here = (self.next_link_base or self.url) + request.path
            headers["Link"] = ", ".join(
                [
                    f'<{here}?{urlencode({**query, "page": page + 1})}>; rel="next"',
                    f'<{here}?{urlencode({**query, "page": last})}>; rel="last"',
                ]
            )
        return Reply(200, chunk, headers)

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        split = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length).decode("utf-8", errors="replace") if length else ""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        request = Recorded(
            method,
            split.path,
            parse_qs(split.query),
            {k.lower(): v for k, v in handler.headers.items()},
            body,
        )
        with self.lock:
            self.requests.append(request)
        reply = self._answer(request)
        request.status = reply.status
        if self.on_request is not None:
            self.on_request(request)
        payload = b"" if reply.status == 304 else json.dumps(reply.data).encode()
        headers = {"Content-Type": "application/json", **reply.headers}
        if method == "GET" and reply.status == 200:
            tag = hashlib.sha1(payload + headers.get("Link", "").encode()).hexdigest()
            etag = f'W/"{tag}"'
            headers["ETag"] = etag
            key = f"GET {request.path}"
            if request.headers.get("if-none-match") == etag:
                reply, payload = Reply(304), b""
                request.status = 304
                headers = {"ETag": etag}
                with self.lock:
                    self.not_modified[key] += 1
            else:
                with self.lock:
                    self.full[key] += 1
        if reply.status < 400:
            headers.update(self.extra_headers)
        try:
            handler.send_response(reply.status)
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _answer(self, request: Recorded) -> Reply:
        with self.lock:
            for garble in self.garbles:
                if garble.method == request.method and re.search(garble.pattern, request.path):
                    self.garbles.remove(garble)
                    return Reply(200, garble.data)
        fault = self._fault(request.path)
        if fault is not None:
            return Reply(fault.status, {"message": fault.message}, fault.headers)
        routed = self._route(request.method, request.path)
        if routed is None:
            return Reply(404, {"message": "Not Found"})
        handler, params = routed
        try:
            with self.lock:
                return handler(request, **params)
        except HttpError as exc:
            return Reply(exc.status, {"message": exc.message})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: nothing idles at shutdown

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                server._handle(self, "GET")

            def do_POST(self) -> None:
                server._handle(self, "POST")

            def do_PUT(self) -> None:
                server._handle(self, "PUT")

            def do_PATCH(self) -> None:
                server._handle(self, "PATCH")

        return Handler


Handler = Callable[..., Reply]
