"""The runs' summaries in Redis and the paged run list read from them (``RedisStore``'s half for listings).

A summary is one string per run (``keys.summary``), with no TTL and outside the run's key spaces, so the
run's expiry leaves it; ``keys.summaries`` lists them by when their run ended. A page of the run list is
two round trips whatever the number of runs: the index's next slugs after the cursor (``ZREVRANGEBYSCORE``
with ``LIMIT``, beside the server's clock), then their retention deadlines and summaries (one ``ZMSCORE``
and one ``MGET``). A filtered page walks on, batch by batch, to ``paging.SCAN_BUDGET`` runs at most.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import cast

import redis

from orchestrator.store import keys
from orchestrator.store.base import SummaryPage, check_slug
from orchestrator.store.paging import (
    SCAN_BUDGET,
    Position,
    after,
    check_limit,
    collect,
    parse_cursor,
    parse_summary,
)
from orchestrator.store.redis_codec import text
from orchestrator.store.redis_marks import store_errors
from orchestrator.summary import RunSummary

FILTERED_BATCH = 200  # the runs a filtered page reads per round trip pair


class RedisSummaries:
    """Summaries and pages of a ``RedisStore`` (its ``client``, key ``prefix`` and ``prune``)."""

    client: redis.Redis
    prefix: str

    def prune(self) -> int:  # RedisStore's: forget the runs whose keys expired
        raise NotImplementedError

    def write_summary(self, slug: str, summary: RunSummary) -> None:
        """SET the summary (no TTL) and ZADD it to the summaries by end, in one MULTI."""
        check_slug(slug)
        ended = _epoch(summary.ended or summary.updated)
        with store_errors("write the summary of", slug):
            pipe = self.client.pipeline(transaction=True)
            pipe.set(keys.summary(self.prefix, slug), summary.model_dump_json())
            pipe.zadd(keys.summaries(self.prefix), {slug: ended})
            pipe.execute()

    def read_summary(self, slug: str) -> RunSummary | None:
        with store_errors("read the summary of", check_slug(slug)):
            raw = cast(bytes | None, self.client.get(keys.summary(self.prefix, slug)))
        return parse_summary(slug, raw)

    def drop_summary(self, slug: str) -> None:
        with store_errors("drop the summary of", check_slug(slug)):
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(keys.summary(self.prefix, slug))
            pipe.zrem(keys.summaries(self.prefix), slug)
            pipe.execute()

    def summary_page(
        self, limit: int, cursor: str | None = None, state: str | None = None, repo: str | None = None
    ) -> SummaryPage:
        """A page of the index after ``cursor`` (see the module docstring); expired runs are forgotten
        first (``prune``) and one that expires meanwhile is left out by its deadline."""
        start = parse_cursor(cursor)
        check_limit(limit)
        # Unfiltered, a batch holds the page, the run a cursor names and one more (is there a next page).
        batch = max(limit + 2, FILTERED_BATCH) if state or repo else limit + 2
        with store_errors("list runs", "*"):
            self.prune()
            return collect(self._index_after(start, batch), limit, state, repo)

    def _index_after(
        self, start: Position | None, batch: int
    ) -> Iterator[tuple[float, str, RunSummary | None]]:
        """The runs after ``start``, newest first, each with its summary, read ``batch`` at a time (at most
        ``SCAN_BUDGET`` and a batch); runs past their retention deadline are left out."""
        top = "+inf" if start is None else repr(start[0])
        offset, read = 0, 0
        while read < SCAN_BUDGET + batch:
            pipe = self.client.pipeline(transaction=False)
            pipe.time()
            pipe.zrevrangebyscore(keys.runs_index(self.prefix), top, "-inf", offset, batch, withscores=True)
            (now, _), got = cast(tuple[tuple[int, int], list[tuple[bytes, float]]], pipe.execute())
            if not got:
                return
            if top == "+inf":  # a run created while the page is read is newer: it does not shift the offset
                top = repr(got[0][1])
            slugs = [text(member) for member, _ in got]
            pipe = self.client.pipeline(transaction=False)
            pipe.zmscore(keys.expiring_runs(self.prefix), slugs)
            pipe.mget([keys.summary(self.prefix, slug) for slug in slugs])
            deadlines, raws = cast(tuple[list[float | None], list[bytes | None]], pipe.execute())
            for (_, score), slug, deadline, raw in zip(got, slugs, deadlines, raws, strict=True):
                if after((score, slug), start) and (deadline is None or deadline > now):
                    yield score, slug, parse_summary(slug, raw)
            if len(got) < batch:
                return
            offset, read = offset + batch, read + batch


def _epoch(ts: str | None) -> float:
    """Epoch seconds of an event's time (ISO 8601), 0 when there is none or it is unreadable."""
    try:
        return datetime.fromisoformat((ts or "").replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
