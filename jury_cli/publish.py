"""``jury publish SLUG``: (re-)publish an ended run to its PR by hand — the review and the ``jury`` check,
updated in place when the run published before (``workers/publish.py``)."""

from __future__ import annotations

from jury_cli.context import DirOpt, out, settings_for
from orchestrator.domain import RunPublished
from orchestrator.errors import JuryError
from orchestrator.store.base import EventStore, check_slug
from orchestrator.store.files import FileStore


def publish(slug: str, dir: DirOpt = None) -> None:
    """Publish an ended run to its PR: one review with inline comments, and the `jury` check."""
    from workers.publish import publish_run

    settings = settings_for(dir)
    check_slug(slug)
    files = FileStore(settings.dir)
    store: EventStore = files
    if settings.redis_url:
        from orchestrator.store.redis import from_url as redis_store

        live = redis_store(settings.redis_url)
        if live.exists(slug) or not files.exists(slug):
            store = live
    event = publish_run(store, slug, files=files)  # the record under --dir says it too
    say(event)
    if not event.ok:
        raise JuryError(f"publishing {slug} failed: {event.error}")


def say(event: RunPublished) -> None:
    where = f"{event.forge} {event.repo}#{event.number}" if event.repo else "the PR"
    if event.ok:
        counts = ", ".join(f"{n} {what}" for what, n in sorted(event.comments.items())) or "none"
        out.print(
            f"published to {where}: review {event.review_url or event.review_id} "
            f"({'created' if event.review_created else 'updated'}; inline comments: {counts}; "
            f"{event.off_diff} off the diff, in the summary); check jury: {event.conclusion}",
            markup=False,
            highlight=False,
        )
