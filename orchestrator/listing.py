"""The run list, a page at a time, from the runs' summaries (``jury runs``, the console's ``/api/runs``),
and the backfill that writes summaries for runs that ended before summaries were written.

A page costs the store's ``summary_page`` (the same round trips at a hundred runs or a hundred thousand)
plus one fold for each run on it that has no summary: a live run (its summary is written when it ends)
or an old one. That fold goes through ``orchestrator.run_reader`` (the coordinator's snapshot and what
follows it), never the whole log of every run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from orchestrator.fold import RunState
from orchestrator.run_reader import fold_run
from orchestrator.spec import TERMINAL_STATES
from orchestrator.store.base import EventStore
from orchestrator.summary import RunSummary, matches, summarize

__all__ = ["Backfill", "Listing", "backfill", "list_runs"]

DEFAULT_LIMIT = 50
# The store pages one listing reads at most: a run without a summary that the filters then leave out
# makes a store's page short, and the listing reads on (a few times, never the whole index).
MAX_PAGES = 4


class Listing(NamedTuple):
    """A page of runs, newest first; the runs on it that could not be read (slug, why); the next page's
    cursor (None: the last page)."""

    runs: list[RunSummary]
    skipped: list[tuple[str, str]]
    next: str | None


def list_runs(
    store: EventStore,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    state: str | None = None,
    repo: str | None = None,
    fold_one: Callable[[str], RunState] | None = None,
) -> Listing:
    """A page of ``limit`` runs (``EventStore.summary_page``; short when the filters leave few in the part
    of the index a page looks at); a run without a summary is folded (``fold_one``, default
    ``run_reader.fold_run``)
    and filtered here. One that cannot be read is ``skipped``, never blanking the page."""
    runs: list[RunSummary] = []
    skipped: list[tuple[str, str]] = []
    for _ in range(MAX_PAGES):
        page = store.summary_page(limit - len(runs), cursor, state, repo)
        for slug, summary in page.rows:
            shown = summary or _fold_summary(store, slug, fold_one, skipped)
            if shown is not None and matches(shown, state, repo):
                runs.append(shown)
        cursor = page.next
        if len(runs) == limit or cursor is None:
            break
    return Listing(runs, skipped, cursor)


def _fold_summary(
    store: EventStore,
    slug: str,
    fold_one: Callable[[str], RunState] | None,
    skipped: list[tuple[str, str]],
) -> RunSummary | None:
    """The summary of a run that has none stored, from its fold; None (and the run ``skipped``, with
    why) when it cannot be read."""
    try:
        s = fold_one(slug) if fold_one is not None else fold_run(store, slug)
        if s.events == 0:
            raise ValueError("no readable events")
    except Exception as exc:  # one unreadable run never blanks the list
        skipped.append((slug, str(exc) or type(exc).__name__))
        return None
    return summarize(s)


class Backfill(NamedTuple):
    """What ``backfill`` did: summaries written, runs that had one, runs not ended (they get theirs when
    they end) and runs it could not read (slug, why)."""

    written: int
    kept: int
    live: int
    unreadable: list[tuple[str, str]]


def backfill(store: EventStore) -> Backfill:
    """A summary for every ended run of ``store`` without one (or with one of another version): what
    runs written before summaries need to be listed from them. Idempotent: a second call writes none."""
    written = kept = live = 0
    unreadable: list[tuple[str, str]] = []
    for slug in store.runs():
        if store.read_summary(slug) is not None:
            kept += 1
            continue
        try:
            s = fold_run(store, slug)
            if s.events == 0:
                raise ValueError("no readable events")
        except Exception as exc:  # one unreadable run never stops the others
            unreadable.append((slug, str(exc) or type(exc).__name__))
            continue
        if s.state not in TERMINAL_STATES:
            live += 1
            continue
        store.write_summary(slug, summarize(s))
        written += 1
    return Backfill(written, kept, live, unreadable)
