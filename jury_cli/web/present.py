"""What the run page offers, held to what the server would do: a button only where its action can act,
an artifact link only where the artifact answers. A page that offers what then fails (a re-publish of a
local branch's run, 409; a prompt that was never stored, 404) tells less than the truth."""

from __future__ import annotations

from typing import Any

import redis

from orchestrator.errors import StoreError
from orchestrator.spec import TERMINAL_STATES
from orchestrator.store import keys
from orchestrator.store.files import FileStore
from orchestrator.store.redis import RedisStore


def publish_refusal(slug: str, state: str, target: dict[str, Any]) -> str | None:
    """Why ``jury publish`` (and the console's re-publish) would refuse run ``slug``, or None: the same
    rules as ``workers.runtime.publish.publish_run``. ``target`` is the run's target as the page has it."""
    if state not in TERMINAL_STATES:
        return f"run {slug} is {state}: publish it once it has ended"
    if not target.get("url") or not target.get("head"):
        return f"run {slug} reviewed a local branch: it has no PR to publish to"
    return None


def present_artifacts(store: Any, slug: str, names: list[str]) -> list[str]:
    """The names among ``names`` whose artifact ``store`` holds, in order: the events name every
    prompt and patch, but not every store kept each (a files record has no patch that stayed in an
    embedded Redis). One round trip on Redis; a look at the disk in a files record."""
    if not names:
        return []
    if isinstance(store, FileStore):
        run_dir = (store.root / "runs" / slug).resolve()
        kept = []
        for name in names:
            path = (run_dir / name).resolve()
            if path.is_relative_to(run_dir) and path.is_file():
                kept.append(name)
        return kept
    if isinstance(store, RedisStore):
        pipe = store.client.pipeline(transaction=False)
        for name in names:
            pipe.exists(keys.artifact(store.prefix, slug, name))
        try:
            found = pipe.execute()
        except redis.RedisError as exc:
            raise StoreError(f"cannot read the artifacts of {slug}: {exc}") from exc
        return [name for name, there in zip(names, found, strict=True) if there]
    return [name for name in names if store.get_artifact(slug, name) is not None]
