"""Ended runs out of Redis: the archive an operator names (``JURY_ARCHIVE``) and what one run's copy holds.

A finished run held 25-70 KB of Redis (its log, its fold twice, its artifacts, its key set) for as long as
its retention lasts; a fleet reviewing 100,000 PRs a day would keep about 19 GB of them. Once a run ended
and its publish is done, the coordinator writes the run's record here and leaves Redis a stub of a few
hundred bytes (``orchestrator.store.redis_archive``); the Redis store then reads the run from here, so
``jury runs show``, the console and ``jury verify`` see it as before.

``Archive`` is what an archive must do: keep one blob per run, written whole or not at all, and give it
back. ``DirectoryArchive`` keeps them as files in a directory the fleet shares (a mounted volume); an
object store is another implementation of the same two methods, named by its own URL scheme in
``archive_from``.

The blob (``ArchivedRun``) is zlib-compressed JSON, so an operator can read it without Jury
(``python -c 'import zlib,sys; print(zlib.decompress(open(sys.argv[1],"rb").read()).decode())' F``): the
log's entries with their stream ids (a snapshot's position and the log's origin stay valid when the run is
loaded back), its seen eids, its fold and snapshot as stored, its ticks, its budget hash, its key set and
its artifacts (base64).
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from orchestrator.errors import ConfigError, StoreError
from orchestrator.store.base import check_slug

ARCHIVE_ENV = "JURY_ARCHIVE"
FORMAT = 1  # the blob's format: a reader refuses a newer one rather than misread it
SUFFIX = ".run.zz"
DIR_MODE = 0o700  # the archive holds prompts, agent output and diffs: its owner only
FILE_MODE = 0o600


class Archive(Protocol):
    """Where ended runs are kept once they leave Redis: one blob per run slug."""

    @property
    def where(self) -> str:
        """The archive's location as ``archive_from`` reads it: a stub in Redis names it, so a reader
        without ``JURY_ARCHIVE`` set still finds the run."""
        ...

    def put(self, slug: str, blob: bytes) -> None:
        """Keep ``blob`` as the run's copy, replacing any before it, durably and atomically: a reader (or a
        crash) sees the old copy or the new one whole, never a part; on return it is on stable storage."""
        ...

    def get(self, slug: str) -> bytes | None:
        """The run's copy, or None if the archive holds none."""
        ...


class DirectoryArchive:
    """An ``Archive`` in a directory: ``<root>/<slug>.run.zz``, mode 0600 in a 0700 directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def where(self) -> str:
        return self.root.resolve().as_uri()

    def _path(self, slug: str) -> Path:
        return self.root / f"{check_slug(slug)}{SUFFIX}"

    def put(self, slug: str, blob: bytes) -> None:
        """Write a temporary file beside the target, fsync it, rename it over the target, fsync the
        directory: the rename is atomic, and both fsyncs make the copy outlast a crash before Redis lets go
        of the run (``redis_archive``)."""
        target = self._path(slug)
        try:
            self.root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{slug}.", suffix=".tmp")
            try:
                os.fchmod(fd, FILE_MODE)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(blob)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            dir_fd = os.open(self.root, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise StoreError(f"cannot archive run {slug!r} in {self.root}: {exc}") from exc

    def get(self, slug: str) -> bytes | None:
        try:
            return self._path(slug).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read the archive of run {slug!r} in {self.root}: {exc}") from exc


def archive_from(value: str | None) -> Archive | None:
    """The archive ``value`` names (``JURY_ARCHIVE``): a directory path or a ``file://`` URL; None when
    unset. Any other scheme is refused by name, so a typo never silently keeps every run in Redis."""
    if not value:
        return None
    if "://" not in value:
        path = Path(value).expanduser()
        if not path.is_absolute():
            raise ConfigError(f"{ARCHIVE_ENV}={value!r}: give an absolute directory path or a file:// URL")
        return DirectoryArchive(path)
    url = urlparse(value)
    if url.scheme != "file" or url.netloc not in ("", "localhost"):
        raise ConfigError(
            f"{ARCHIVE_ENV}: {url.scheme}:// archives are not supported; give a directory the fleet "
            "shares (a path or a file:// URL)"
        )
    return DirectoryArchive(Path(unquote(url.path)))


def archive_from_env() -> Archive | None:
    """The fleet's archive from ``JURY_ARCHIVE`` (None: ended runs stay in Redis until their retention)."""
    return archive_from(os.environ.get(ARCHIVE_ENV))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode())


@dataclass
class ArchivedRun:
    """One run's record as it was in Redis when it was archived (values as Redis held them)."""

    slug: str
    entries: list[tuple[str, bytes]]  # the log: stream id, the entry's event JSON
    eids: list[bytes] = field(default_factory=list)
    state: bytes | None = None
    snapshot: bytes | None = None
    alive: dict[bytes, bytes] = field(default_factory=dict)
    ledger: dict[bytes, bytes] = field(default_factory=dict)
    key_set: list[bytes] = field(default_factory=list)  # the run's key set (keys.run_index)
    artifacts: dict[str, bytes] = field(default_factory=dict)  # name -> bytes

    @property
    def origin(self) -> str | None:
        return self.entries[0][0] if self.entries else None

    @property
    def last(self) -> str | None:
        return self.entries[-1][0] if self.entries else None

    def after(self, position: str | None) -> list[tuple[str, bytes]] | None:
        """The entries after ``position`` (None: all); None when no entry has that id."""
        if position is None:
            return list(self.entries)
        for i, (entry_id, _) in enumerate(self.entries):
            if entry_id == position:
                return self.entries[i + 1 :]
        return None

    def encode(self) -> bytes:
        doc: dict[str, Any] = {
            "format": FORMAT,
            "slug": self.slug,
            "entries": [[i, e.decode()] for i, e in self.entries],
            "eids": [e.decode() for e in self.eids],
            "state": None if self.state is None else _b64(self.state),
            "snapshot": None if self.snapshot is None else _b64(self.snapshot),
            "alive": {_b64(k): _b64(v) for k, v in self.alive.items()},
            "ledger": {_b64(k): _b64(v) for k, v in self.ledger.items()},
            "key_set": [k.decode() for k in self.key_set],
            "artifacts": {name: _b64(data) for name, data in self.artifacts.items()},
        }
        return zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 6)

    @classmethod
    def decode(cls, slug: str, blob: bytes) -> ArchivedRun:
        """The run ``blob`` holds; StoreError when it is damaged, of a newer format or another run's."""
        try:
            doc = json.loads(zlib.decompress(blob))
            if doc.get("format") != FORMAT or doc.get("slug") != slug:
                raise ValueError(f"format {doc.get('format')!r} of run {doc.get('slug')!r}")
            return cls(
                slug=slug,
                entries=[(str(i), str(e).encode()) for i, e in doc["entries"]],
                eids=[str(e).encode() for e in doc["eids"]],
                state=None if doc["state"] is None else _unb64(doc["state"]),
                snapshot=None if doc["snapshot"] is None else _unb64(doc["snapshot"]),
                alive={_unb64(k): _unb64(v) for k, v in doc["alive"].items()},
                ledger={_unb64(k): _unb64(v) for k, v in doc["ledger"].items()},
                key_set=[str(k).encode() for k in doc["key_set"]],
                artifacts={str(n): _unb64(d) for n, d in doc["artifacts"].items()},
            )
        except (ValueError, KeyError, TypeError, AttributeError, zlib.error) as exc:
            raise StoreError(f"the archive of run {slug!r} is unreadable: {exc}") from exc


class RunArchived(StoreError):
    """An append reached a run whose record is in the archive: it must be loaded back into Redis first
    (``redis_archive.ArchivingStore`` does; a plain ``RedisStore`` cannot, and says so)."""
