"""The forge's ETag cache in the fleet's Redis, so conditional requests work across processes.

``orchestrator.forge.transport.Api`` sends ``If-None-Match`` with the ETag of the last full answer its
``ETagCache`` holds for a GET, and reuses the cached body on a 304 (GitHub does not count a 304 against
the rate limit). Its default cache lives in memory, which a sweep throws away when it ends: every
``jury sweep`` and every scheduled firing is a new process or a new client, so a nightly sweep never
sent a conditional request. ``RedisETagCache`` keeps the answers in the store every host shares, so the
next sweep, on any host, asks "changed since?" instead of downloading every listing again.

What is kept, and what is not:

- **Never a token.** An entry's key is ``<prefix>:forge:etag:<sha256>``, the digest of the transport's own
  cache key, which is the forge, a fingerprint of the credentials (a truncated SHA-256 of the auth
  header's value, never the value) and the URL with its query. The value is the ETag, the parsed body and
  the few headers paging needs (``Link``, ``X-Next-Page``); the request's headers are not stored.
- **One credential's answers for that credential only.** The forges' answers to authenticated calls
  depend on the token (a private repository is listed only to a token that can see it; GitHub sends
  ``Vary: Authorization``), so the fingerprint is part of the key: hosts that share a token share entries,
  a host with another token never reads them. An anonymous call has a fingerprint too (of no token).
- **Bounded.** Each entry expires ``ttl`` seconds after it was written (default a week: a nightly or a
  weekly sweep still finds its ETags), and a body above ``max_bytes`` once compressed is not kept (the
  next call is simply unconditional). The cache holds one entry per URL a sweep lists (a page each), not
  per PR.
- **Best effort.** Redis unreachable or an entry unreadable is a miss: the call goes out unconditional,
  and the sweep goes on.

The bodies are what the sweep's runs record anyway (the PRs' titles, heads, branches): whoever can read
the fleet's Redis reads the run logs too. Whoever can write it could plant an answer, but can already
make every worker run commands (README: "Running a fleet safely").
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import redis
import structlog
from redis.exceptions import RedisError

from orchestrator.forge.transport import CachedAnswer, ETagCache
from orchestrator.store import keys
from orchestrator.store.base import LiveStore

log = structlog.get_logger()

DEFAULT_TTL = 7 * 86400  # seconds an entry is kept after it was written
DEFAULT_MAX_BYTES = 1024 * 1024  # the largest entry kept, compressed


class RedisETagCache:
    """An ``ETagCache`` (``orchestrator.forge.transport``) in Redis; see the module docstring."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str = keys.PREFIX,
        *,
        ttl: int = DEFAULT_TTL,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl = ttl
        self.max_bytes = max_bytes

    def get(self, key: str) -> CachedAnswer | None:
        try:
            raw = self.client.get(keys.forge_etag(self.prefix, key))
        except RedisError as exc:
            log.warning("forge.cache_unavailable", error=str(exc))
            return None
        if not isinstance(raw, bytes):
            return None
        try:
            doc: Any = json.loads(zlib.decompress(raw))
            etag, data, headers = doc["etag"], doc["data"], doc.get("headers", {})
            if not isinstance(etag, str) or not etag or not isinstance(headers, dict):
                raise ValueError("malformed entry")
            return CachedAnswer(etag, data, {str(k): str(v) for k, v in headers.items()})
        except (ValueError, KeyError, TypeError, zlib.error):
            log.warning("forge.cache_unreadable")
            return None

    def put(self, key: str, answer: CachedAnswer) -> None:
        doc = {"etag": answer.etag, "data": answer.data, "headers": dict(answer.headers)}
        try:
            raw = zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 6)
        except (TypeError, ValueError):
            return
        if len(raw) > self.max_bytes:
            log.debug("forge.cache_skipped", bytes=len(raw), max_bytes=self.max_bytes)
            return
        try:
            self.client.set(keys.forge_etag(self.prefix, key), raw, ex=self.ttl)
        except RedisError as exc:
            log.warning("forge.cache_unavailable", error=str(exc))


def fleet_etag_cache(store: LiveStore) -> ETagCache | None:
    """The ETag cache beside ``store``'s keys when it is a Redis store (the fleet's), else None (the
    transport's own cache in memory, which lasts one sweep)."""
    from orchestrator.store.redis import RedisStore

    if isinstance(store, RedisStore):
        return RedisETagCache(store.client, store.prefix)
    return None
