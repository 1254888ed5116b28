"""The console's ASGI app (Starlette): three pages, their one script and style sheet, and the JSON API
they use (docs/console.md).

    GET  /  /runs/{slug}  /fleet                 the pages: static HTML, filled in by console.js
    GET  /api/session                            what this browser may do (its token, publishing)
    GET  /api/runs?limit=&cursor=&state=&repo=  a page of the run list (the runs that could not be read,
                                                 the next page's cursor)
    GET  /api/runs/{slug}                        one run's page: timeline, rounds, conversations, findings
    GET  /api/runs/{slug}/events                 server-sent events following the log (``sse.py``)
    GET  /api/runs/{slug}/artifacts/{name}       one artifact, as text
    POST /api/runs/{slug}/{cancel|resume|publish}  the actions (token, same origin: ``auth.py``)
    GET  /api/fleet                              workers, queues, runs in flight, today's spend, schedules
    GET  /healthz                                "ok", without the token (a health check's): nothing else

The store is the one ``jury runs`` reads (``backend.reading_store``): the fleet's Redis, else the files.
When it does not answer (Redis down), what needs it answers 503 with the store's own words, never a 500.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from jury_cli.web import actions, fleet, present, sse, views
from jury_cli.web.auth import Guard, GuardMiddleware, same_origin
from orchestrator.config import Settings
from orchestrator.errors import JuryError, StoreError, UsageError
from orchestrator.listing import DEFAULT_LIMIT
from orchestrator.store.base import check_artifact_name, check_slug
from orchestrator.store.files import FileStore

STATIC = Path(__file__).parent / "static"
ARTIFACT_CAP = 32 * 1024 * 1024  # bytes of one artifact the console serves from a files record
ARTIFACT_CSP = "default-src 'none'; sandbox"


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers={"cache-control": "no-store"})


class StoreUnavailable(Exception):
    """The store did not answer where a route had to ask it (whether a run exists, an artifact of a live
    run): the request answers 503 (``unavailable``), wherever in the route it was raised."""

    def __init__(self, cause: StoreError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def unavailable(exc: Exception) -> JSONResponse:
    return error(503, f"the run store is unavailable: {exc}")


async def on_unavailable(request: Request, exc: Exception) -> Response:
    return unavailable(exc)


def _page(name: str) -> Any:
    """The endpoint of one static page: its HTML, filled in by console.js."""

    async def endpoint(request: Request) -> Response:
        return FileResponse(STATIC / name, headers={"cache-control": "no-store"})

    return endpoint


def _healthz(request: Request) -> Response:
    """The console serves: all a health check needs, and all it is told (it has no token)."""
    return PlainTextResponse("ok", headers={"cache-control": "no-store"})


class _Console:
    """The console's routes over one store: each method an endpoint (``create_app`` routes them)."""

    def __init__(self, settings: Settings, store: Any) -> None:
        self.settings = settings
        self.store = store  # an EventStore; a LiveStore brings ticks and the fleet
        self.list_folds = views.ListFolds()

    def known(self, slug: str) -> str | None:
        """``slug`` when it names a run of the store, else None; StoreUnavailable when the store is down."""
        try:
            check_slug(slug)
        except StoreError:
            return None
        try:
            return slug if self.store.exists(slug) else None
        except StoreError as exc:
            raise StoreUnavailable(exc) from exc

    def session(self, request: Request) -> Response:
        return JSONResponse(
            {
                "canAct": bool(request.scope["state"].get("authed")),
                "publish": True,
                "store": "redis" if self.settings.redis_url else "files",
                "dir": str(self.settings.dir),
            }
        )

    def run_list(self, request: Request) -> Response:
        try:
            page = list_query(request)
        except UsageError as exc:
            return error(400, str(exc))
        try:
            return JSONResponse(views.run_list(self.store, self.list_folds, **page))
        except UsageError as exc:  # a cursor no page handed out
            return error(400, str(exc))
        except StoreError as exc:
            return unavailable(exc)

    def run_page(self, request: Request) -> Response:
        slug = request.path_params["slug"]
        try:
            if self.known(slug) is None:
                return error(404, f"no run named {slug}")
            log = views.read_log(self.store, slug)
            doc = views.run_page(slug, log, views.ticks_of(self.store, slug))
            doc["artifacts"] = present.present_artifacts(self.store, slug, doc["artifacts"])
        except StoreError as exc:
            return unavailable(exc)
        why = actions.resume_refusal(self.settings, slug, doc["state"])
        doc.update(resumable=why is None, resumeRefusal=why)
        why = present.publish_refusal(slug, doc["state"], doc["target"])
        doc.update(publishable=why is None, publishRefusal=why)
        return JSONResponse(doc)

    async def events(self, request: Request) -> Response:
        slug = request.path_params["slug"]
        if self.known(slug) is None:
            return error(404, f"no run named {slug}")
        position = request.headers.get("last-event-id") or request.query_params.get("after") or None
        return StreamingResponse(
            sse.follow(self.store, slug, position, request.is_disconnected),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    def artifact(self, request: Request) -> Response:
        slug, name = request.path_params["slug"], request.path_params["name"]
        try:
            check_artifact_name(name)
        except StoreError as exc:
            return error(404, str(exc))
        if self.known(slug) is None:
            return error(404, f"no run named {slug}")
        try:
            data = read_artifact(self.store, slug, name)
        except StoreError as exc:  # a name that leaves the run, or no regular file
            return error(404, str(exc))
        if data is None:
            return error(404, f"run {slug} has no artifact {name!r}")
        return Response(
            data,
            media_type="text/plain; charset=utf-8",
            headers={"content-security-policy": ARTIFACT_CSP, "cache-control": "no-store"},
        )

    def act(self, request: Request) -> Response:
        slug, what = request.path_params["slug"], request.path_params["action"]
        if what not in actions.ACTIONS:
            return error(404, f"no action {what!r}: cancel, resume or publish")
        if (why := same_origin(dict(request.headers), request.url.scheme)) is not None:
            return error(403, why)
        if not request.scope["state"].get("authed"):  # the guard's word on this request's token
            return error(403, "actions need the console's token: open the URL `jury web` printed")
        if self.known(slug) is None:
            return error(404, f"no run named {slug}")
        if what == "resume":
            try:
                state = views.folded(slug, views.read_log(self.store, slug).events, []).state
            except StoreError as exc:
                return unavailable(exc)
            if (why := actions.resume_refusal(self.settings, slug, state)) is not None:
                return error(409, why)
        try:
            message = actions.ACTIONS[what](self.settings, slug)
        except actions.PublishFailed as exc:
            return error(502, str(exc))
        except UsageError as exc:
            return error(409, str(exc))
        except StoreError as exc:
            return unavailable(exc)
        except JuryError as exc:
            return error(503, str(exc))
        return JSONResponse({"ok": True, "message": message})

    def fleet_page(self, request: Request) -> Response:
        try:
            return JSONResponse(fleet.fleet(self.store, self.settings))
        except StoreError as exc:
            return unavailable(exc)


def create_app(settings: Settings, store: Any, guard: Guard, loopback: bool) -> GuardMiddleware:
    """The console over ``store`` (an ``EventStore``; a ``LiveStore`` brings ticks and the fleet)."""
    console = _Console(settings, store)
    routes = [
        Route("/healthz", _healthz),
        Route("/", _page("index.html")),
        Route("/runs/{slug}", _page("run.html")),
        Route("/fleet", _page("fleet.html")),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        Route("/api/session", console.session),
        Route("/api/runs", console.run_list),
        Route("/api/fleet", console.fleet_page),
        Route("/api/runs/{slug}", console.run_page),
        Route("/api/runs/{slug}/events", console.events),
        Route("/api/runs/{slug}/artifacts/{name:path}", console.artifact),
        Route("/api/runs/{slug}/{action}", console.act, methods=["POST"]),
    ]
    return GuardMiddleware(
        Starlette(routes=routes, exception_handlers={StoreUnavailable: on_unavailable}), guard, loopback
    )


def list_query(request: Request) -> dict[str, Any]:
    """``/api/runs``'s query: ``limit`` (default ``listing.DEFAULT_LIMIT``), ``cursor``, ``state``,
    ``repo``; UsageError for a limit that is no number."""
    query = request.query_params
    raw = query.get("limit") or str(DEFAULT_LIMIT)
    if not raw.isdigit():
        raise UsageError(f"limit must be a number of runs, not {raw!r}")
    return {
        "limit": int(raw),
        "cursor": query.get("cursor") or None,
        "state": query.get("state") or None,
        "repo": query.get("repo") or None,
    }


def read_artifact(store: Any, slug: str, name: str) -> bytes | None:
    """The artifact's bytes, never anything outside its run: in a files record the resolved path (every
    symlink followed) must still lie inside the run's directory, and be a regular file."""
    if not isinstance(store, FileStore):
        try:
            return store.get_artifact(slug, name)  # the name was checked: a StoreError is the store down
        except StoreError as exc:
            raise StoreUnavailable(exc) from exc
    run_dir = (store.root / "runs" / slug).resolve()
    path = (run_dir / name).resolve()
    if not path.is_relative_to(run_dir) or path == run_dir:
        raise StoreError(f"artifact {name!r} is outside run {slug}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read artifact {name!r} of run {slug}: {exc}") from exc
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise StoreError(f"artifact {name!r} of run {slug} is not a file")
        size = os.fstat(fh.fileno()).st_size
        data = fh.read(ARTIFACT_CAP)
    if size > len(data):  # cut, and said so: a long artifact is never shown as if it were whole
        data += f"\n[jury: the console shows the first {len(data):,} of its {size:,} bytes]\n".encode()
    return data
