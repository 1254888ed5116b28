"""One forge API over an ``httpx.Client``: auth, rate-limit waits, ETags, pagination, errors.

Both forge clients sit on ``Api``. It owns what every call shares:

- The token goes in a header on each request (never on the client, never in a URL, never in a log), and
  only to the API's own origin: pagination links and redirects that point elsewhere are refused, so a
  forge answer cannot send the token to another host.
- Rate limits are waited out with the injected ``sleep`` (``limits.retry_delay``), at most
  ``max_retries`` times and never longer than ``max_wait`` seconds at once; a longer wait fails at once
  with a ``ForgeError`` that says until when.
- GETs send ``If-None-Match`` with the ETag of the last full answer kept in an ``ETagCache``; a 304 reuses
  the cached body (GitHub does not count 304s against the quota).
- An answer is checked against the shape the caller expects (``answers``) before anyone reads it: a
  list where an object belongs, a string where a nested object belongs, is a one-line ``ForgeError``.
- Every failure is a ``ForgeError`` naming the forge, the repository, the call (``GET /repos/o/r/pulls``)
  and the status, with the token scrubbed from whatever text the server sent back.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

import httpx
import structlog

from orchestrator.forge import limits
from orchestrator.forge.answers import shape_problem, what_kind
from orchestrator.forge.base import ForgeError

log = structlog.get_logger()

Sleep = Callable[[float], None]
Clock = Callable[[], float]  # epoch seconds, like the forges' reset headers

DEFAULT_MAX_RETRIES = 3
DEFAULT_MAX_WAIT = 300.0
DEFAULT_TIMEOUT = 30.0
MAX_PAGES = 100
MAX_REDIRECTS = 3
_KEPT_HEADERS = ("link", "x-next-page")  # what a 304 needs from the cached answer to go on paging
_LINK_RE = re.compile(r'<([^>]*)>\s*;\s*rel="?([^";]+)"?')


class ETagCache(Protocol):
    """Where ETags and the bodies they stand for are kept between calls (in memory by default).

    A cache shared between clients must keep credentials apart: keys already carry a fingerprint of
    the token, so one token's private answers are never served to another.
    """

    def get(self, key: str) -> CachedAnswer | None: ...

    def put(self, key: str, answer: CachedAnswer) -> None: ...


@dataclass(frozen=True)
class CachedAnswer:
    etag: str
    data: Any
    headers: dict[str, str] = field(default_factory=dict)


class MemoryETagCache:
    """A small least-recently-used ETag cache in memory."""

    def __init__(self, max_entries: int = 512) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, CachedAnswer] = OrderedDict()

    def get(self, key: str) -> CachedAnswer | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: str, answer: CachedAnswer) -> None:
        self._entries[key] = answer
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)


@dataclass
class Answer:
    status: int
    data: Any
    headers: Mapping[str, str]
    cached: bool = False  # True: a 304 answered and ``data`` came from the cache


def next_link(headers: Mapping[str, str]) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header, if any."""
    for url, rel in _LINK_RE.findall(headers.get("link", "")):
        if "next" in rel.split():
            return url
    return None


def message_of(data: Any, text: str) -> str:
    """The human part of an error answer: ``message`` (and GitHub's ``errors``), or GitLab's ``error``."""
    if isinstance(data, dict):
        parts: list[str] = []
        for key in ("message", "error", "error_description"):
            value = data.get(key)
            if isinstance(value, str | list | dict) and value:
                parts.append(value if isinstance(value, str) else str(value))
        errors = data.get("errors")
        if isinstance(errors, list) and errors:
            parts.append(
                "; ".join(e.get("message", str(e)) if isinstance(e, dict) else str(e) for e in errors)
            )
        if parts:
            return " — ".join(parts)
    return text.strip() or "(no message)"


class Api:
    """Calls to one forge API at ``base_url`` with one set of credentials."""

    def __init__(
        self,
        *,
        forge: str,
        base_url: str,
        client: httpx.Client,
        auth: Mapping[str, str],
        headers: Mapping[str, str] | None = None,
        sleep: Sleep = time.sleep,
        clock: Clock = time.time,
        cache: ETagCache | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_wait: float = DEFAULT_MAX_WAIT,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.forge = forge
        self.base_url = base_url.rstrip("/")
        split = urlsplit(self.base_url)
        if split.scheme not in ("http", "https") or not split.netloc:
            raise ValueError(f"{forge}: the API URL must be http(s)://host[/path], not {base_url!r}")
        self._origin = (split.scheme, split.netloc.lower())
        self._base_path = split.path
        self.client = client
        self._auth = dict(auth)
        self._headers = {"User-Agent": "jury", **(headers or {})}
        self._secrets = [v for v in self._auth.values() if v] + [
            v.split(" ", 1)[1] for v in self._auth.values() if " " in v
        ]
        self._fingerprint = hashlib.sha256("\0".join(sorted(self._auth.values())).encode()).hexdigest()[:16]
        self.sleep = sleep
        self.clock = clock
        self.cache: ETagCache = cache if cache is not None else MemoryETagCache()
        self.max_retries = max_retries
        self.max_wait = max_wait
        self.timeout = timeout
        self._paused_until = 0.0

    # --- helpers -----------------------------------------------------------------------------------

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def url(self, path: str) -> str:
        return self.base_url + path

    def _same_origin(self, url: str) -> bool:
        split = urlsplit(url)
        return (split.scheme, split.netloc.lower()) == self._origin and split.path.startswith(self._base_path)

    def _fail(self, repo: str, call: str, detail: str, status: int | None = None) -> ForgeError:
        return ForgeError(self.forge, repo, call, self.scrub(detail)[:500], status=status)

    def _wait(self, repo: str, call: str, seconds: float, why: str, attempt: int) -> None:
        if seconds > self.max_wait:
            until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.clock() + seconds))
            raise self._fail(
                repo,
                call,
                f"{why}: the forge asks to wait {seconds:.0f}s (until {until}), "
                f"more than the {self.max_wait:.0f}s Jury waits",
            )
        log.warning(
            "forge.rate_limited",
            forge=self.forge,
            repo=repo,
            call=call,
            wait=seconds,
            why=why,
            attempt=attempt,
        )
        if seconds > 0:
            self.sleep(seconds)

    # --- one request, with retries ---------------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        *,
        repo: str,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        expect: Any = None,
    ) -> Answer:
        """``method path`` (relative to the API URL); a non-2xx answer raises ``ForgeError``, and so does
        an answer that is not of the shape ``expect`` (a model of ``answers``, or ``list[...]`` of one)."""
        call = f"{method} {path}"
        answer = self._send(method, self.url(path), repo=repo, call=call, params=params, json=json)
        if expect is not None and (problem := shape_problem(expect, answer.data)) is not None:
            raise self._fail(repo, call, problem, answer.status)
        return answer

    def pages(
        self, path: str, *, repo: str, params: Mapping[str, Any] | None = None, item: Any = None
    ) -> Iterator[Any]:
        """The items of a paginated list, page after page (``Link: rel=next``, else ``X-Next-Page``),
        each of the shape ``item`` when given (else ``ForgeError``, naming the call)."""
        call = f"GET {path}"
        url, query = self.url(path), dict(params or {})
        for _ in range(MAX_PAGES):
            answer = self._send("GET", url, repo=repo, call=call, params=query)
            if not isinstance(answer.data, list):
                raise self._fail(
                    repo,
                    call,
                    f"unexpected answer: expected a list, got {what_kind(answer.data)}",
                    answer.status,
                )
            if item is not None and (problem := shape_problem(list[item], answer.data)) is not None:
                raise self._fail(repo, call, problem, answer.status)
            yield from answer.data
            following = next_link(answer.headers)
            if following is not None:
                following = urljoin(url, following)
                if not self._same_origin(following):
                    raise self._fail(repo, call, f"refusing a next page on another origin: {following}")
                url, query = following, {}
                continue
            page = answer.headers.get("x-next-page", "").strip()
            if not page:
                return
            query = {**dict(params or {}), "page": page}
        raise self._fail(repo, call, f"more than {MAX_PAGES} pages")

    def _send(
        self,
        method: str,
        url: str,
        *,
        repo: str,
        call: str,
        params: Mapping[str, Any] | None,
        json: Any = None,
    ) -> Answer:
        key = None
        cached: CachedAnswer | None = None
        if method == "GET":
            query = "&".join(f"{k}={v}" for k, v in sorted((params or {}).items()))
            key = f"{self.forge} {self._fingerprint} {url}?{query}"
            cached = self.cache.get(key)
        attempt = 0
        redirects = 0
        while True:
            attempt += 1
            self._respect_pause(repo, call, attempt)
            headers = {**self._headers, **self._auth}
            if cached is not None:
                headers["If-None-Match"] = cached.etag
            try:
                resp = self.client.request(
                    method,
                    url,
                    params=params or None,
                    json=json,
                    headers=headers,
                    timeout=self.timeout,
                    follow_redirects=False,
                )
            except httpx.TransportError as exc:
                if attempt > self.max_retries:
                    raise self._fail(repo, call, f"{type(exc).__name__}: {exc}") from None
                self._wait(
                    repo, call, limits.SERVER_BACKOFF * 2 ** (attempt - 1), "connection error", attempt
                )
                continue
            status = resp.status_code
            log.debug("forge.call", forge=self.forge, repo=repo, call=call, status=status)
            if status == 304 and cached is not None:
                self._note_quota(resp.headers)
                return Answer(status, cached.data, {**cached.headers, **resp.headers}, cached=True)
            if 200 <= status < 300:
                self._note_quota(resp.headers)
                data = self._json(resp, repo, call)
                etag = resp.headers.get("etag")
                if key is not None and etag:
                    kept = {h: resp.headers[h] for h in _KEPT_HEADERS if h in resp.headers}
                    self.cache.put(key, CachedAnswer(etag, data, kept))
                return Answer(status, data, resp.headers)
            if status in (301, 302, 307, 308) and method == "GET" and redirects < MAX_REDIRECTS:
                target = urljoin(url, resp.headers.get("location", ""))
                if not self._same_origin(target):
                    raise self._fail(repo, call, f"refusing a redirect to another origin: {target}", status)
                url, params, redirects = target, None, redirects + 1
                attempt -= 1
                continue
            try:
                body = resp.json()
            except ValueError:
                body = None
            message = message_of(body, resp.text[:500])
            wait = limits.retry_delay(status, resp.headers, message, self.clock(), attempt)
            if wait is None:
                raise self._fail(repo, call, message, status)
            why = "rate limited" if status in (403, 429) else "server unavailable"
            if attempt > self.max_retries:
                raise self._fail(repo, call, f"{why}, gave up after {attempt} tries: {message}", status)
            self._wait(repo, call, wait, why, attempt)

    def _json(self, resp: httpx.Response, repo: str, call: str) -> Any:
        if resp.status_code == 204 or not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise self._fail(repo, call, "the answer is not JSON", resp.status_code) from None

    def _note_quota(self, headers: Mapping[str, str]) -> None:
        """A successful answer that spent the last of the quota: pause the next call until it resets."""
        now = self.clock()
        left = limits.exhausted_until(headers, now)
        if left is not None:
            self._paused_until = max(self._paused_until, now + left)

    def _respect_pause(self, repo: str, call: str, attempt: int) -> None:
        left = self._paused_until - self.clock()
        if left > 0:
            self._paused_until = 0.0
            self._wait(repo, call, left, "quota exhausted", attempt)
