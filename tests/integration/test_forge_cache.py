"""The forge's ETag cache in Redis (``workers.fleet.forge_cache``) on the machine's Redis: a sweep's listing
is a conditional request the next time, from another sweep (another process, another client), and the 304 is
answered from the cache; entries are per credential, never hold a token or a URL in clear, expire, and a
body too large is not kept. The forge is tests/fakes/forge_server.py (ETags on every GET, 304 on a match).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from pydantic import SecretStr
from redis.backoff import NoBackoff
from redis.retry import Retry

from orchestrator.config import Settings
from orchestrator.forge import CachedAnswer, ForgeSettings, GitHub
from orchestrator.store.keys import forge_etag
from orchestrator.store.memory import MemoryStore
from tests.fakes.forge_server import FakePR, ForgeServer
from workers.fleet.forge_cache import DEFAULT_TTL, RedisETagCache, fleet_etag_cache
from workers.fleet.sweep import SweepFilters, SweepOptions, SweepReport, sweep

TOKEN = "ghp_S3CRETcacheTOKEN0123456789abcdef"
OTHER = "ghp_0THERcacheTOKEN9876543210fedcba"
REPO = "acme/app"
LIST = f"GET /github/repos/{REPO}/pulls"
PREFIX = "jurytest-etag"


@pytest.fixture
def client(shared_redis: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(shared_redis)
    yield c
    c.close()


@pytest.fixture
def forge() -> Iterator[ForgeServer]:
    with ForgeServer() as server:
        repo = server.github_repo(REPO)
        repo.add(FakePR(1, "one", "1" * 40))
        repo.add(FakePR(2, "two", "2" * 40, draft=True))
        yield server


def settings_for(server: ForgeServer, token: str | None) -> ForgeSettings:
    return ForgeSettings.model_construct(
        github_api=server.github_api,
        gitlab_api="http://127.0.0.1:9/none",
        github_token=SecretStr(token) if token else None,
        gitlab_token=None,
        github_login=None,
        github_checks="statuses",
        gitlab_auth="private-token",
        max_wait=0,
        retries=0,
    )


def dry_sweep(
    server: ForgeServer, cache: RedisETagCache, tmp_path: Path, token: str | None = TOKEN
) -> SweepReport:
    return sweep(
        Settings(dir=tmp_path / "state"),
        [REPO],
        SweepFilters(),
        SweepOptions(),
        store=MemoryStore(),
        kick=lambda slugs: None,
        dry_run=True,
        forge_settings=settings_for(server, token),
        etag_cache=cache,
    )


def test_the_next_sweep_asks_changed_since_and_uses_the_304(
    forge: ForgeServer, client: redis.Redis, tmp_path: Path
) -> None:
    cache = RedisETagCache(client, PREFIX)
    first = dry_sweep(forge, cache, tmp_path)
    assert [(r.number, r.outcome) for r in first.rows] == [(1, "would enqueue")]
    assert (forge.full[LIST], forge.not_modified[LIST]) == (1, 0)
    assert "if-none-match" not in forge.calls("GET", "/pulls")[-1].headers

    # another sweep, another client and cache object over the same Redis: a conditional request, a 304,
    # and the rows the cached body says
    second = dry_sweep(
        forge, RedisETagCache(redis.Redis(connection_pool=client.connection_pool), PREFIX), tmp_path
    )
    asked = forge.calls("GET", "/pulls")[-1]
    assert asked.headers["if-none-match"].startswith('W/"') and asked.status == 304
    assert (forge.full[LIST], forge.not_modified[LIST]) == (1, 1)
    assert [(r.number, r.head, r.outcome) for r in second.rows] == [(1, "1" * 40, "would enqueue")]

    # the PR moved: the ETag no longer matches, the full answer comes and replaces the entry
    forge.github[REPO].prs[1].push("9" * 40)
    third = dry_sweep(forge, cache, tmp_path)
    assert [r.head for r in third.rows] == ["9" * 40] and forge.full[LIST] == 2
    assert dry_sweep(forge, cache, tmp_path).rows[0].head == "9" * 40 and forge.not_modified[LIST] == 2


def test_entries_are_per_credential_bounded_and_hold_no_secret(
    forge: ForgeServer, client: redis.Redis, tmp_path: Path
) -> None:
    cache = RedisETagCache(client, PREFIX)
    dry_sweep(forge, cache, tmp_path)
    (key,) = client.keys(f"{PREFIX}:forge:etag:*")
    assert TOKEN.encode() not in key and b"acme" not in key and b"pulls" not in key
    raw = client.get(key)
    assert isinstance(raw, bytes) and TOKEN.encode() not in zlib.decompress(raw)
    assert 0 < client.ttl(key) <= DEFAULT_TTL

    # another token never reads this token's answers: an unconditional request, an entry of its own
    dry_sweep(forge, cache, tmp_path, token=OTHER)
    assert "if-none-match" not in forge.calls("GET", "/pulls")[-1].headers
    assert len(client.keys(f"{PREFIX}:forge:etag:*")) == 2

    # a body over the cap is not kept: the next call is simply unconditional
    small = RedisETagCache(client, PREFIX + "-small", max_bytes=200)
    small.put("k", CachedAnswer('W/"x"', [{"title": "x" * 10_000, "n": i} for i in range(50)]))
    assert small.get("k") is None and client.keys(f"{PREFIX}-small:*") == []
    small.put("k", CachedAnswer('W/"y"', [1], {"link": "<n>; rel=next"}))
    assert small.get("k") == CachedAnswer('W/"y"', [1], {"link": "<n>; rel=next"})


def test_an_unreadable_entry_or_an_unreachable_redis_is_a_miss(
    client: redis.Redis, forge: ForgeServer
) -> None:
    cache = RedisETagCache(client, PREFIX)
    client.set(forge_etag(PREFIX, "k"), b"not zlib")
    assert cache.get("k") is None
    client.set(forge_etag(PREFIX, "k"), zlib.compress(b'{"etag": 5}'))
    assert cache.get("k") is None
    nowhere = redis.Redis(host="127.0.0.1", port=9, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    gone = RedisETagCache(nowhere, PREFIX)
    gone.put("k", CachedAnswer('W/"z"', []))  # no exception: best effort
    assert gone.get("k") is None
    with httpx.Client() as http:
        unreachable = GitHub(http, token=TOKEN, api=forge.github_api, cache=gone)
        assert [p.number for p in unreachable.list_open(REPO)] == [1]  # the listing still works


def test_the_fleet_cache_is_redis_beside_the_store_only() -> None:
    assert fleet_etag_cache(MemoryStore()) is None
