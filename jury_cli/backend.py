"""Where runs live for one command: the shared Redis of ``JURY_REDIS_URL``, or a private Redis with local
workers started for this command (``workers.runtime.embedded``); and where ``runs`` and ``show`` read."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.config import Settings
from orchestrator.errors import StoreUnreachable
from orchestrator.fold import RunState
from orchestrator.store.base import EventStore
from orchestrator.store.files import FileStore, mirror

if TYPE_CHECKING:
    from orchestrator.store.redis import RedisStore


@dataclass
class Backend:
    """The live store of a run and how to reach its workers."""

    store: RedisStore
    files: FileStore
    settings: Settings
    celery: Any
    embedded: bool

    def waker(self) -> Callable[[Sequence[str]], None]:
        """``wake`` bound to this backend's broker and store: what ``start_run`` and a sweep are handed."""
        from workers.runtime.wake import celery_kick

        return celery_kick(self.celery, self.store, self.settings.reap_after)

    def sync(self, slug: str) -> RunState:
        """Mirror the live log into the files under --dir and rewrite run.json."""
        return mirror(self.store, self.files, slug)


@contextmanager
def backend(settings: Settings, concurrency: int = 4) -> Iterator[Backend]:
    """The shared Redis of JURY_REDIS_URL, or a private Redis with local workers for this command."""
    from orchestrator.store.redis_archive import open_store
    from workers.runtime.app import make_app
    from workers.runtime.embedded import EmbeddedRedis, LocalWorkers

    files = FileStore(settings.dir)
    if settings.redis_url:
        store = shared_store(settings.redis_url)
        yield Backend(store, files, settings, make_app(settings), embedded=False)
        return
    with interrupted_by_term(), EmbeddedRedis(settings.dir) as url:
        local = settings.model_copy(update={"redis_url": url})
        with LocalWorkers(url, settings.dir, concurrency=concurrency):
            yield Backend(open_store(url), files, local, make_app(local), embedded=True)


@contextmanager
def interrupted_by_term() -> Iterator[None]:
    """SIGTERM and SIGHUP (``timeout``, a process manager, a closed terminal) interrupt the command as
    Ctrl-C does: the run is kept, and the embedded Redis and local workers are stopped on the way out.
    Python's default for them ends the process at once, leaving both running, orphaned, for ever."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread sets handlers
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        for sig in before:  # once: a second signal must not cut the stopping of the workers short
            signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt

    before: dict[signal.Signals, Any] = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        before[sig] = signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def reading_store(settings: Settings) -> EventStore:
    """Where ``runs`` and ``show`` read: the shared Redis when JURY_REDIS_URL is set, else the files."""
    if settings.redis_url:
        return shared_store(settings.redis_url)
    return FileStore(settings.dir)


def shared_store(url: str) -> RedisStore:
    """The store on the fleet's Redis of ``JURY_REDIS_URL``, once it answers a PING: a server that does not
    answer is a setting to fix, said at once in one line (exit 2), not a failure of the first run it
    touches ("cannot create run ...")."""
    from orchestrator.store.redis_archive import open_store

    store = open_store(url)
    check_reachable(store, url)
    return store


def check_reachable(store: RedisStore, url: str) -> None:
    """PING the store's server; StoreUnreachable naming Redis, the URL tried (its password masked) and the
    variable that sets it, when it does not answer (refused, unresolvable, timed out, TLS or AUTH failed)."""
    from redis.exceptions import RedisError

    from orchestrator.store.urls import redact_url, scrub

    try:
        store.client.ping()
    except RedisError as exc:
        store.close()
        reason = scrub(str(exc), url).strip().rstrip(".") or type(exc).__name__
        raise StoreUnreachable(
            f"cannot reach Redis at {redact_url(url)} (JURY_REDIS_URL): {reason}; start that server, "
            "or set JURY_REDIS_URL to one that answers (unset: a private Redis for the command)"
        ) from exc
