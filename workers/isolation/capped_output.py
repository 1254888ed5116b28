"""Capping what an agent prints: each stream is read from a pipe on a thread that keeps the head and the
tail and drops the middle, so a runaway agent cannot fill the disk (``run_supervised``'s ``max_output``)."""

from __future__ import annotations

import os
import select
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO

import structlog

log = structlog.get_logger()

POLL_SECONDS = 0.1  # how often a reader looks whether it was told to finish
READ_CHUNK = 64 * 1024
# After the group is SIGKILLed, how long a reader keeps draining a pipe that a process outside the group
# (one that called setsid) still holds open; then the pipe is closed under it.
DRAIN_SECONDS = 2.0


def drop_marker(dropped: int) -> bytes:
    """The line that stands for the dropped middle of a capped stream."""
    return f"\n[... {dropped} bytes dropped by jury ...]\n".encode()


class _Tail:
    """The last ``cap`` bytes seen, as a deque of chunks (no copying per chunk)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.chunks: deque[bytes] = deque()
        self.size = 0

    def add(self, data: bytes) -> None:
        if self.cap <= 0 or not data:
            return
        self.chunks.append(data)
        self.size += len(data)
        while self.chunks and self.size - len(self.chunks[0]) >= self.cap:
            self.size -= len(self.chunks.popleft())

    def value(self) -> bytes:
        data = b"".join(self.chunks)
        return data[len(data) - min(self.cap, len(data)) :]


class CappedOutput:
    """One stream of the agent: read from a pipe on a thread, written to ``path``, capped at ``cap`` bytes.

    Everything read is appended to the file at once (unbuffered), so the file is readable while the agent
    runs. The thread remembers the first ``cap // 2`` bytes and the last ``cap - cap // 2``; whenever the
    file passes ``2 * cap`` it is rewritten as head + marker + tail (to a temporary file, then renamed, so
    a reader never sees a half-written file) and appending goes on. At the end, if anything was dropped,
    the file becomes exactly head + marker (with the final count) + tail. Disk use stays under about
    ``2 * cap`` and memory under ``cap`` per stream. A pipe rather than a file the child writes itself:
    only then can Jury cut the middle of a file the child is still appending to.
    """

    def __init__(self, pipe: IO[bytes], path: Path, cap: int) -> None:
        self.pipe = pipe
        self.path = path
        self.cap = cap
        self.head = bytearray()
        self.head_cap = cap // 2
        self.tail = _Tail(cap - self.head_cap)
        self.total = 0
        self.error: str | None = None
        self._file: IO[bytes] | None = path.open("wb", buffering=0)
        self._file_size = 0
        self._stop = threading.Event()
        self._drain_until = 0.0
        self._thread = threading.Thread(target=self._run, name=f"capped-output:{path.name}", daemon=True)

    @property
    def dropped(self) -> int:
        """Bytes read but kept neither in the head nor in the tail."""
        return self.total - len(self.head) - min(self.tail.size, self.tail.cap)

    def start(self) -> None:
        self._thread.start()

    def finish(self, drain: float = DRAIN_SECONDS) -> None:
        """Drain what is left (up to ``drain`` seconds of continuous output), write the capped file, close."""
        self._drain_until = time.monotonic() + drain
        self._stop.set()
        self._thread.join()
        self.pipe.close()

    def _run(self) -> None:
        fd = self.pipe.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            while True:
                if self._stop.is_set() and time.monotonic() >= self._drain_until:
                    break
                if not poller.poll(POLL_SECONDS * 1000):
                    if self._stop.is_set():
                        break
                    continue
                data = os.read(fd, READ_CHUNK)
                if not data:
                    break
                self._take(data)
        except OSError as exc:
            self._fail(exc)
        finally:
            self._close()

    def _take(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
        self.tail.add(data[max(room, 0) :])
        if self._file is None:
            return  # writing failed earlier: keep draining so the agent never blocks on a full pipe
        try:
            self._file.write(data)
            self._file_size += len(data)
            if self._file_size > 2 * self.cap:
                self._rewrite()
        except OSError as exc:
            self._fail(exc)

    def _rewrite(self) -> None:
        content = bytes(self.head) + drop_marker(self.dropped) + self.tail.value()
        tmp = self.path.with_name(self.path.name + ".jury-tmp")
        tmp.write_bytes(content)
        os.replace(tmp, self.path)
        if self._file is not None:
            self._file.close()
        self._file = self.path.open("ab", buffering=0)
        self._file_size = len(content)

    def _fail(self, exc: OSError) -> None:
        if self.error is None:
            self.error = str(exc)
            log.warning("proc.output_write_failed", path=str(self.path), error=self.error)
        if self._file is not None:
            self._file.close()
            self._file = None

    def _close(self) -> None:
        try:
            if self._file is not None and self.dropped:
                self._rewrite()
        except OSError as exc:
            self._fail(exc)
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.dropped:
            log.info("proc.output_capped", path=str(self.path), total=self.total, dropped=self.dropped)
