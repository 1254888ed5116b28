"""The event log on disk, in codejury's layout (the run record of README.md and docs/index.md).

    <root>/runs/<slug>/events.ndjson    one event a line (``dump_event``), appended under an flock
    <root>/runs/<slug>/run.json         the fold, pretty JSON, replaced atomically
    <root>/runs/<slug>/<name>           artifacts (``round-1.codex.stdout.txt``, ``patches/...``)
    <root>/runs/<slug>/.lock            the per-run lock (``fcntl.flock``)
    <root>/runs/<slug>/.created         creation time (epoch seconds) of runs Jury registered

Appends lock ``events.ndjson`` itself, not ``.lock``: a holder of ``lock()`` must still be able to append.

A run's record holds prompts, agent output and diffs of code under review: its files are written 0600 in
directories of mode 0700 (``runs/`` and each run's directory are tightened to 0700 if they were looser).
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import structlog
from pydantic_core import to_json

from orchestrator.domain import Event, RunResumed, dump_event, parse_event
from orchestrator.errors import StoreError
from orchestrator.fold import RunState, fold
from orchestrator.run_json import run_json
from orchestrator.spec import TERMINAL_STATES
from orchestrator.store.base import (
    CREATED_FILE,
    EVENTS_FILE,
    LOCK_FILE,
    STATE_FILE,
    SUMMARY_FILE,
    EventStore,
    SummaryPage,
    check_artifact_name,
    check_slug,
    put_each_artifact,
)
from orchestrator.store.paging import page_of, parse_summary
from orchestrator.summary import RunSummary, summarize

log = structlog.get_logger()

POLL_SECONDS = 0.2  # wait()'s polling period
LOCK_POLL_SECONDS = 0.05  # lock()'s retry period while another holder has it
DIR_MODE = 0o700  # a record's directories: its owner only
FILE_MODE = 0o600  # a record's files: its owner only


def private_dir(path: Path, *, tighten: bool = True) -> Path:
    """``path`` as a directory only its owner may enter (0700).

    Missing directories (its parents too) are created 0700; an existing one of ours that others may enter
    is tightened when ``tighten`` (parents that already exist are left as they are).
    """
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        if path.parent != path:
            private_dir(path.parent, tighten=False)
        try:
            path.mkdir(mode=DIR_MODE)
        except FileExistsError:
            return private_dir(path, tighten=tighten)
        os.chmod(path, DIR_MODE)  # whatever the umask
        return path
    if tighten and stat.S_ISDIR(st.st_mode) and st.st_mode & 0o077 and st.st_uid == os.geteuid():
        os.chmod(path, DIR_MODE)
    return path


@dataclass
class _Seen:
    """The eids of ``events.ndjson`` up to ``offset`` (a line boundary) of the file with inode ``ino``."""

    ino: int
    offset: int
    eids: set[str] = field(default_factory=set)


class FileStore:
    """An ``EventStore`` under ``root/runs``; safe across threads and processes on one host."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._runs_dir = self.root / "runs"
        self._seen: dict[str, _Seen] = {}
        self._seen_lock = threading.Lock()

    # -- paths ---------------------------------------------------------------------------------------------

    def _run_dir(self, slug: str) -> Path:
        return self._runs_dir / check_slug(slug)

    def _events_path(self, slug: str) -> Path:
        return self._run_dir(slug) / EVENTS_FILE

    def _made(self, path: Path) -> Path:
        """``path`` (a run directory or one inside it) made private, ``runs/`` too."""
        private_dir(self._runs_dir)
        return private_dir(path)

    # -- runs ----------------------------------------------------------------------------------------------

    def create_run(self, slug: str) -> bool:
        """Register the run (create ``events.ndjson``); False if it already existed."""
        with _os_errors("create run", slug):
            return self._register(slug)

    def _register(self, slug: str) -> bool:
        run_dir = self._made(self._run_dir(slug))
        try:
            fd = os.open(run_dir / EVENTS_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except FileExistsError:
            return False
        os.close(fd)
        # Not synced: without it (a crash), a run's time is its first event's (``_created_at``).
        _write_atomic(run_dir / CREATED_FILE, f"{time.time():.6f}\n".encode(), durable=False)
        return True

    def claim(self, base: str, tries: int = 999) -> str:
        """A slug of no run of this directory, claimed for a new run: ``base``, else the first ``base-N``
        that ``create_run`` registers. The claim is the exclusive creation of the run's log file, so
        commands started together on one directory (each with its own private Redis) never take the same
        slug, and each may write its record knowing no other writes there."""
        for i in range(1, tries + 1):
            if self.create_run(slug := base if i == 1 else f"{base}-{i}"):
                return slug
        raise StoreError(f"no free run name after {base}-{tries} in {self._runs_dir}")

    def unclaim(self, slug: str) -> None:
        """Give back a claim nothing was written under (its log still empty): the command that made it
        failed before its run began. A run with events is never touched."""
        run_dir = self._run_dir(slug)
        try:
            if (run_dir / EVENTS_FILE).stat().st_size:
                return
            for name in (EVENTS_FILE, CREATED_FILE):
                (run_dir / name).unlink(missing_ok=True)
            run_dir.rmdir()
        except OSError as exc:  # gone already, or something else was put there: leave it
            log.info("store.unclaim_skipped", slug=slug, error=str(exc))

    def runs(self) -> list[str]:
        """Slugs of the directories holding ``events.ndjson``, newest first.

        Creation time is ``.created`` if Jury made the run, else the first event's ``ts`` (codejury's
        runs), else the directory's mtime. An unreadable run is logged and left out, never fatal.
        """
        return [slug for _, slug in sorted(self._dated(), reverse=True)]

    def _dated(self) -> list[tuple[float, str]]:
        """Each run's creation time and slug (``runs``), in no order."""
        if not self._runs_dir.is_dir():
            return []
        dated: list[tuple[float, str]] = []
        with _os_errors("list runs", "*"):
            entries = list(os.scandir(self._runs_dir))
        for entry in entries:
            try:
                if not entry.is_dir() or not _is_slug(entry.name):
                    continue
                run_dir = Path(entry.path)
                if not (run_dir / EVENTS_FILE).is_file():
                    continue
                dated.append((_created_at(run_dir), entry.name))
            except OSError as exc:
                log.warning("store.skipped_run", slug=entry.name, error=str(exc))
        return dated

    def exists(self, slug: str) -> bool:
        """Whether ``runs/<slug>/events.ndjson`` exists."""
        return self._events_path(slug).is_file()

    # -- events --------------------------------------------------------------------------------------------

    def append(self, slug: str, events: Sequence[Event]) -> int:
        """Append the events with unseen eids in one write under an exclusive flock."""
        path = self._events_path(slug)
        with _os_errors("append to", slug):
            if not path.exists():
                self._register(slug)
            with open(path, "a+b") as fh, _flocked(fh, fcntl.LOCK_EX):
                return self._append_locked(slug, fh, events)

    def _append_locked(self, slug: str, fh: IO[bytes], events: Sequence[Event]) -> int:
        st = os.fstat(fh.fileno())
        with self._seen_lock:
            cached = self._seen.get(slug)
        if cached is None or cached.ino != st.st_ino or cached.offset > st.st_size:
            cached = _Seen(ino=st.st_ino, offset=0)
        fh.seek(cached.offset)
        tail = fh.read()
        cut = tail.rfind(b"\n") + 1
        complete, rest = tail[:cut], tail[cut:]  # ``rest``: a torn or unterminated last line
        read, torn = _eids_of(complete), _eids_of(rest)
        added: set[str] = set()
        lines: list[bytes] = []
        for event in events:
            if event.eid in added or event.eid in cached.eids or event.eid in read or event.eid in torn:
                continue
            added.add(event.eid)
            lines.append(dump_event(event).encode() + b"\n")
        # The cache's set grows in place, once what it names is in the file (a copy of it for each append
        # grew with the run's age: the one cost of a coordinator pass that did). The file's lock keeps
        # every other appender of this run out meanwhile.
        if lines:
            # Never glue a new line onto a torn one: the torn text stays a line of its own (skipped on read).
            blob = (b"\n" if rest else b"") + b"".join(lines)
            fh.write(blob)
            fh.flush()
            cached.eids.update(read, torn, added)
            new = _Seen(ino=st.st_ino, offset=cached.offset + len(tail) + len(blob), eids=cached.eids)
        else:
            cached.eids.update(read)
            new = _Seen(ino=st.st_ino, offset=cached.offset + cut, eids=cached.eids)
        with self._seen_lock:
            self._seen[slug] = new
        return len(lines)

    def held(self, slug: str) -> int:
        """How many distinct eids the run's record held at this process's last append to it (0 if none):
        ``mirror`` compares it with the fold it writes to know the record is complete."""
        with self._seen_lock:
            cached = self._seen.get(slug)
        return len(cached.eids) if cached is not None else 0

    def read(self, slug: str, after: int = 0) -> list[Event]:
        """The events in file order after the first ``after``; torn or garbage lines are skipped."""
        path = self._events_path(slug)
        try:
            with open(path, "rb") as fh, _flocked(fh, fcntl.LOCK_SH):
                data = fh.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"cannot read run {slug!r}: {exc}") from exc
        return _parse_log(slug, data)[max(after, 0) :]

    def wait(self, slug: str, after: int, timeout: float) -> list[Event]:
        """``read(after)``, polling every 0.2 s (re-reading only when the file's size changed)."""
        path = self._events_path(slug)
        deadline = time.monotonic() + timeout
        last_size: int | None = None
        while True:
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                size = -1
            if size != last_size:
                found = self.read(slug, after)
                if found:
                    return found
                last_size = size
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            time.sleep(min(POLL_SECONDS, remaining))

    # -- artifacts and state -------------------------------------------------------------------------------

    def put_artifact(self, slug: str, name: str, data: bytes) -> None:
        """Write ``runs/<slug>/<name>`` atomically (parent directories created)."""
        path = self._run_dir(slug) / check_artifact_name(name)
        with _os_errors("write artifact of", slug):
            self._made(self._run_dir(slug))
            self._made(path.parent)
            _write_atomic(path, bytes(data))

    def put_artifacts(self, slug: str, artifacts: Mapping[str, bytes]) -> None:
        """``put_artifact`` of each; a name refused is refused before any is written, as in Redis."""
        put_each_artifact(self.put_artifact, slug, artifacts)

    def get_artifact(self, slug: str, name: str) -> bytes | None:
        """The artifact's bytes, or None.

        Only a regular file inside the run's directory once every symlink is resolved: a link planted in
        a run directory (to another run, to a key file) reads as no artifact, never as the file it names.
        """
        run_dir = self._run_dir(slug)
        path = run_dir / check_artifact_name(name)
        try:
            real = path.resolve(strict=True)
            if not real.is_relative_to(run_dir.resolve(strict=True)) or not real.is_file():
                log.warning("store.artifact_outside_run", slug=slug, name=name)
                return None
            return real.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read artifact {name!r} of run {slug!r}: {exc}") from exc

    def write_state(self, slug: str, state: dict[str, Any]) -> None:
        """Replace ``run.json`` atomically (temp file + ``os.replace``), pretty-printed.

        Every coordinator pass writes it, so it is written cheaply: printed by pydantic-core (the
        standard library prints indented JSON in Python, several times slower) and not synced to disk,
        since it is a cache of the log (``events.ndjson``), which the next pass folds and writes again."""
        run_dir = self._run_dir(slug)
        data = to_json(state, indent=2) + b"\n"
        with _os_errors("write state of", slug):
            self._made(run_dir)
            _write_atomic(run_dir / STATE_FILE, data, durable=False)

    def read_state(self, slug: str) -> dict[str, Any] | None:
        """``run.json``, or None if absent or unreadable (logged)."""
        path = self._run_dir(slug) / STATE_FILE
        try:
            state = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError) as exc:
            log.warning("store.bad_state", slug=slug, error=str(exc))
            return None
        if not isinstance(state, dict):
            log.warning("store.bad_state", slug=slug, error="not a JSON object")
            return None
        return state

    def write_summary(self, slug: str, summary: RunSummary) -> None:
        """Replace ``summary.json`` beside ``run.json`` (atomically); a record's files never expire."""
        run_dir = self._run_dir(slug)
        with _os_errors("write the summary of", slug):
            self._made(run_dir)
            _write_atomic(run_dir / SUMMARY_FILE, summary.model_dump_json().encode() + b"\n", durable=False)

    def read_summary(self, slug: str) -> RunSummary | None:
        """``summary.json``, or None if absent, unreadable (logged) or of another version."""
        try:
            raw = (self._run_dir(slug) / SUMMARY_FILE).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("store.bad_summary", slug=slug, error=str(exc))
            return None
        return parse_summary(slug, raw)

    def drop_summary(self, slug: str) -> None:
        with _os_errors("drop the summary of", slug):
            (self._run_dir(slug) / SUMMARY_FILE).unlink(missing_ok=True)

    def summary_page(
        self, limit: int, cursor: str | None = None, state: str | None = None, repo: str | None = None
    ) -> SummaryPage:
        """A page of ``runs`` (``paging.page_of``): every run's creation time is read, each page's
        summaries only (a files record is one host's, not the fleet's ten thousand runs)."""
        return page_of(self._dated(), self.read_summary, limit, cursor, state, repo)

    @contextmanager
    def lock(self, slug: str, timeout: float = 60.0) -> Iterator[None]:
        """Hold ``fcntl.flock`` on ``runs/<slug>/.lock``; StoreError if not had within ``timeout``."""
        run_dir = self._run_dir(slug)
        with _os_errors("lock", slug):
            self._made(run_dir)
            fh = os.fdopen(
                os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_APPEND, FILE_MODE), "a+b"
            )
        with fh:
            # Each call opens its own file description, so threads of one process exclude each other too.
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise StoreError(f"run {slug!r} is locked by another holder") from None
                    time.sleep(LOCK_POLL_SECONDS)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _is_slug(name: str) -> bool:
    """Whether ``name`` is a valid slug (other directories under ``runs/`` are ignored)."""
    try:
        check_slug(name)
    except StoreError:
        return False
    return True


@contextmanager
def _os_errors(what: str, slug: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise StoreError(f"cannot {what} run {slug!r}: {exc}") from exc


@contextmanager
def _flocked(fh: IO[bytes], how: int) -> Iterator[None]:
    fcntl.flock(fh.fileno(), how)
    try:
        yield
    finally:
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to a temp file beside ``path``, fsync it (when ``durable``), and ``os.replace`` it
    into place: a reader sees the old file or the new one, never a part."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _eids_of(data: bytes) -> set[str]:
    """The eids of the JSON lines in ``data`` (lines that are not JSON objects with an eid are ignored)."""
    found: set[str] = set()
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):  # a torn or hostile line is no event
            continue
        if isinstance(obj, dict) and isinstance(obj.get("eid"), str):
            found.add(obj["eid"])
    return found


def _parse_log(slug: str, data: bytes) -> list[Event]:
    """The events of an ``events.ndjson`` body; every line that is not one is logged and skipped."""
    lines = data.split(b"\n")
    events: list[Event] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = parse_event(line)
        except ValueError:
            event = None
        if event is None:
            torn = number == len(lines)  # no newline after it: a crash or a writer mid-line
            log.warning("store.skipped_line", slug=slug, line=number, torn=torn)
            continue
        events.append(event)
    return events


def _created_at(run_dir: Path) -> float:
    """When the run was created, in epoch seconds (see ``FileStore.runs``)."""
    try:
        return float((run_dir / CREATED_FILE).read_text().strip())
    except (FileNotFoundError, ValueError):
        pass
    with open(run_dir / EVENTS_FILE, "rb") as fh:
        first = fh.readline()
    try:
        ts = json.loads(first)["ts"]
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return run_dir.stat().st_mtime


def mirror(live: EventStore, files: FileStore, slug: str) -> RunState:
    """Copy the live log of ``slug`` into the plain-file record and rewrite ``run.json`` (the fold) in
    both; the fold. Whoever folds outside the coordinator calls it (a publish, a re-verification, the
    CLI's sync), so the files are complete in the distributed deployment too; the coordinator calls
    ``record`` and writes ``run.json`` with its snapshot."""
    state, doc = record(live, files, slug)
    live.write_state(slug, doc)
    return state


def record(
    live: EventStore,
    files: FileStore,
    slug: str,
    state: RunState | None = None,
    new: Sequence[Event] | None = None,
) -> tuple[RunState, dict[str, Any]]:
    """``mirror``'s half in the files: the live log of ``slug`` copied into the plain-file record and its
    ``run.json`` rewritten; the fold and that document, for the live store (the coordinator writes it with
    its snapshot: ``LiveStore.write_fold``).

    With ``new`` (the events the caller read or wrote since the log position its ``state`` was folded
    from, while the record already held the rest) only those are appended (the record skips the ones
    it holds) and ``run.json`` is written from ``state``: the coordinator's pass costs what is new, not the
    log's age. Without it the whole live log is read, and folded again unless ``state`` is its fold.
    """
    if new is not None and state is not None:
        files.append(slug, new)
        if files.held(slug) < state.events:  # the record began after the fold's snapshot: copy it all
            files.append(slug, live.read(slug))
    else:
        events = live.read(slug)
        if state is None or state.events != len({e.eid for e in events}):
            state = fold(events, slug)
        files.append(slug, events)
    doc = run_json(state)
    files.write_state(slug, doc)
    keep_summary(live, files, slug, state, new)
    return state, doc


def keep_summary(
    live: EventStore, files: FileStore, slug: str, state: RunState, new: Sequence[Event] | None
) -> None:
    """The run's summary in both stores, as ``record`` leaves the fold: written when the run has ended
    (again, after a later event: a nightly ``verify.ran``, a publish; it keeps the end it had), dropped
    when it runs again (resumed: a listing folds a live run). Written only when it changed, so an ended
    run's passes cost one read."""
    stores = [live] if live is files else [live, files]
    if state.state in TERMINAL_STATES:
        before = live.read_summary(slug)
        summary = summarize(
            state, before.ended if before is not None and before.state == state.state else None
        )
        if summary != before:
            for store in stores:
                store.write_summary(slug, summary)
    elif new is None or any(isinstance(e, RunResumed) for e in new):
        for store in stores:
            store.drop_summary(slug)
