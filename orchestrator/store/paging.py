"""A page of the run list, the same in every store: runs newest first (by their index score, then slug),
from a cursor, filtered by state and repository, each with its summary (``orchestrator.summary``).

A cursor is the last run a page looked at, ``<score>:<slug>``: the next page starts after it, so a run
created meanwhile (newer, so before the cursor) never shifts a page and none is listed twice. Filters
are applied to the summaries as the index is walked, a bounded number of runs a page (``SCAN_BUDGET``):
a filter that matches few runs gives short pages with a cursor, never a walk of the whole index. A run
without a summary (still live, or written before summaries) is handed back with None, for the caller to
fold and filter (``orchestrator.listing``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator

import structlog
from pydantic import ValidationError

from orchestrator.errors import StoreError, UsageError
from orchestrator.store.base import SummaryPage, check_slug
from orchestrator.summary import SUMMARY_VERSION, RunSummary, matches

log = structlog.get_logger()

SCAN_BUDGET = 2000  # the most runs of the index one page looks at (a filter that matches few: a short page)
MOST = 500  # the largest page


Position = tuple[float, str]  # a run's place in the index: its score (creation time) and slug


def cursor_of(score: float, slug: str) -> str:
    return f"{score!r}:{slug}"


def parse_cursor(cursor: str | None) -> Position | None:
    """The position a cursor names; UsageError for one no page handed out."""
    if cursor is None or cursor == "":
        return None
    score, sep, slug = cursor.partition(":")
    try:
        value = float(score)
        if not sep or not math.isfinite(value):
            raise ValueError(cursor)
        return value, check_slug(slug)
    except (ValueError, StoreError) as exc:
        raise UsageError(f"bad cursor {cursor!r}: pass the one a page printed") from exc


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MOST:
        raise UsageError(f"a page holds 1 to {MOST} runs, not {limit}")
    return limit


def after(position: Position, cursor: Position | None) -> bool:
    """Whether ``position`` comes after ``cursor`` in the listing's order (score, then slug, descending)."""
    return cursor is None or position < cursor


def parse_summary(slug: str, raw: bytes | str | None) -> RunSummary | None:
    """A stored summary, or None when there is none, it is unreadable (logged) or of another version."""
    if raw is None:
        return None
    try:
        summary = RunSummary.model_validate_json(raw)
    except ValidationError as exc:
        log.warning("store.bad_summary", slug=slug, error=str(exc).splitlines()[0])
        return None
    return summary if summary.version == SUMMARY_VERSION and summary.slug == slug else None


def collect(
    entries: Iterable[tuple[float, str, RunSummary | None]],
    limit: int,
    state: str | None,
    repo: str | None,
    budget: int = SCAN_BUDGET,
) -> SummaryPage:
    """A page from ``entries`` (the runs after the cursor, newest first, expired ones left out): up to
    ``limit`` runs that match (or have no summary), looking at ``budget`` runs at most."""
    rows: list[tuple[str, RunSummary | None]] = []
    scanned, last = 0, None
    for score, slug, summary in entries:
        if len(rows) == limit or scanned == budget:  # and there is at least one more
            return SummaryPage(rows, None if last is None else cursor_of(*last))
        scanned, last = scanned + 1, (score, slug)
        if summary is None or matches(summary, state, repo):
            rows.append((slug, summary))
    return SummaryPage(rows, None)


def page_of(
    index: Iterable[Position],
    summary_of: Callable[[str], RunSummary | None],
    limit: int,
    cursor: str | None,
    state: str | None,
    repo: str | None,
) -> SummaryPage:
    """``collect`` over a whole index held in this process (the memory and file stores)."""
    start = parse_cursor(cursor)
    ordered = sorted(index, reverse=True)

    def entries() -> Iterator[tuple[float, str, RunSummary | None]]:
        for score, slug in ordered:
            if after((score, slug), start):
                yield score, slug, summary_of(slug)

    return collect(entries(), check_limit(limit), state, repo)
