"""Who may read and who may act: the console's token, its cookie, and the checks on every request.

- **The token.** One per console: ``--token`` / ``JURY_WEB_TOKEN``, else a random one printed in the URL at
  start (as Jupyter does). ``GET /?token=...`` trades it for a cookie (HttpOnly, SameSite=Strict) and
  redirects to the same page without it, so it stays out of the history and of any Referer. The cookie is
  named for the port the console serves (``jury_console_8765``): a browser keeps cookies per host, not per
  port, so two consoles on one machine would otherwise overwrite each other's and sign each other out.
- **Reads** need the token, on loopback too (every request does, but ``GET /healthz``, which answers
  ``ok`` and nothing else: a health check holds no token): every process of the machine reaches loopback.
  Only ``jury web --no-token``, on loopback, an explicit choice it logs, lets reads pass without it.
- **Actions** (cancel, resume, re-publish) always need it, in the cookie or a header (``X-Jury-Token`` or
  ``Authorization: Bearer``), are POST only, and are refused when the request comes from another origin
  (``Origin``, ``Sec-Fetch-Site``): no other web page can press them, even on localhost.
- **Host.** On loopback the ``Host`` header must name loopback: a page of another site that rebinds its
  DNS name to 127.0.0.1 reaches the console under its own name, and is refused.
- Every answer carries a strict Content-Security-Policy: the page runs only the console's own script and
  shows the run's (hostile) strings as text.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

COOKIE = "jury_console"  # the cookie's name, before the port it is named for (``cookie_name``)
TOKEN_HEADER = "x-jury-token"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
OPEN_PATHS = frozenset({"/healthz"})  # answered without the token: they say nothing of the runs
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address or name) is this machine only."""
    name = host.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Guard:
    """The console's access rules: its token and whether reads need it (always, but ``--no-token``)."""

    token: str
    reads_need_token: bool

    def valid(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())  # type: ignore[union-attr]


def headers_of(scope: Scope) -> dict[str, str]:
    """The request's headers, lower-cased names (the last of a repeated one)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def cookie_name(scope: Scope) -> str:
    """The cookie of the console that answers ``scope``: ``jury_console_<port>``, the port it serves.

    Browsers send a host's cookies to every port of it; one name for every console would let the second
    console a user opens replace the first one's cookie (each holds its own token).
    """
    server = scope.get("server")
    port = server[1] if server and len(server) > 1 else None
    return f"{COOKIE}_{port}" if port else COOKIE


def presented_token(headers: dict[str, str], cookie: str) -> str | None:
    """The token a request carries: a header, else the console's cookie (named ``cookie``)."""
    if given := headers.get(TOKEN_HEADER):
        return given.strip()
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    jar = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # a malformed Cookie header is no token
        return None
    morsel = jar.get(cookie)
    return morsel.value if morsel is not None else None


def host_allowed(headers: dict[str, str], loopback: bool) -> bool:
    """On loopback, the Host header must be a loopback name (see the module docstring: DNS rebinding)."""
    if not loopback:
        return True
    host = headers.get("host", "")
    name = urlsplit(f"//{host}").hostname or ""
    return name in LOOPBACK_NAMES or is_loopback(name)


def same_origin(headers: dict[str, str], scheme: str) -> str | None:
    """None when the request may be an action of the console's own page, else why not.

    Browsers send ``Sec-Fetch-Site`` and, on a POST, ``Origin``; a cross-site page cannot forge either. A
    client that sends neither (curl, a script) is no browser page and still needs the token.
    """
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"cross-origin request refused (Sec-Fetch-Site: {site})"
    origin = headers.get("origin")
    if origin is not None:
        expected = f"{scheme}://{headers.get('host', '')}"
        if origin.lower() != expected.lower():
            return "cross-origin request refused (Origin does not match the console)"
    return None


class GuardMiddleware:
    """Applies the ``Guard`` to every request and adds the security headers to every answer."""

    def __init__(self, app: ASGIApp, guard: Guard, loopback: bool) -> None:
        self.app, self.guard, self.loopback = app, guard, loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = headers_of(scope)

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                present = {k.lower() for k, _ in message["headers"]}
                message["headers"] = list(message["headers"]) + [
                    (k, v) for k, v in SECURITY_HEADERS if k not in present
                ]
            await send(message)

        if not host_allowed(headers, self.loopback):
            return await deny(secured, 403, "the Host header does not name this console (loopback only)")
        authed = self.guard.valid(presented_token(headers, cookie_name(scope)))
        scope.setdefault("state", {})["authed"] = authed
        path = scope.get("path", "")
        query_token = _query_token(scope)
        if query_token is not None and scope["method"] == "GET" and not path.startswith("/api/"):
            return await self._trade(scope, query_token, secured)
        if self.guard.reads_need_token and not authed and path not in OPEN_PATHS:
            return await deny(secured, 401, "this console needs its token: open the URL `jury web` printed")
        await self.app(scope, receive, secured)

    async def _trade(self, scope: Scope, given: str, send: Send) -> None:
        """``?token=``: set the cookie and redirect to the same path without the token."""
        if not self.guard.valid(given):
            return await deny(send, 403, "wrong token: open the URL `jury web` printed")
        cookie = f"{cookie_name(scope)}={self.guard.token}; Path=/; HttpOnly; SameSite=Strict"
        if scope.get("scheme") == "https":
            cookie += "; Secure"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", quote("/" + (scope.get("path") or "").lstrip("/")).encode()),
                    (b"set-cookie", cookie.encode()),
                    (b"cache-control", b"no-store"),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _query_token(scope: Scope) -> str | None:
    qs = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    values = qs.get("token")
    return values[-1] if values else None


async def deny(send: Send, status: int, message: str) -> None:
    import json

    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
