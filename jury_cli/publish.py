"""``jury publish SLUG``: (re-)publish an ended run to its PR by hand — the review and the ``jury`` check,
updated in place when the run published before (``workers/runtime/publish.py``)."""

from __future__ import annotations

from jury_cli.context import DirOpt, out, settings_for
from orchestrator.domain import RunPublished
from orchestrator.errors import JuryError
from orchestrator.store.base import check_slug


def publish(slug: str, dir: DirOpt = None) -> None:
    """Publish an ended run to its PR: one review with inline comments, and the `jury` check."""
    from workers.runtime.publish import publish_named

    settings = settings_for(dir)
    check_slug(slug)
    event = publish_named(settings.dir, settings.redis_url, slug)  # the record under --dir says it too
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
