"""The event log: one interface (``EventStore``), two stores.

``FileStore`` (codejury's on-disk layout) is importable from here; ``RedisStore`` needs the ``redis``
client and is imported explicitly from ``orchestrator.store.redis``.
"""

from orchestrator.store.base import EventStore
from orchestrator.store.files import FileStore

__all__ = ["EventStore", "FileStore"]
