"""``search_text``'s own process: a model's regular expression over the worktree, away from the worker.

Why a process and not a thread: the ``regex`` package releases the GIL while it matches a ``str`` and
stops at its ``timeout=``, but it compiles with the GIL held and without any limit — a 23-character
pattern such as ``((a{1000}){1000}){1000}`` compiles for minutes and takes gigabytes, and meanwhile
every thread of the worker (lease heartbeats included) stands still. Here the pattern can only stall
this process: the parent kills it at the deadline, the address space and CPU time are limited, and
matching itself stops at the deadline through ``timeout=``.

Run as ``python -I textsearch.py ROOT START PATTERN SECONDS`` (``-I``: no ``PYTHONPATH``, no user site,
no script directory on ``sys.path``, so nothing in the worktree can be imported). It imports only the
standard library and ``regex`` and prints one JSON object: ``{"hits": [...], "more": bool}`` or
``{"error": "...", "kind": "pattern" | "timeout" | "memory" | "path"}``.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import regex

MAX_RESULTS = 200
MAX_FILE_BYTES = 2_000_000
LINE_CHARS = 300
MEMORY_BYTES = 1024 * 1024 * 1024


def _limit(seconds: float) -> None:
    """Cap this process: the address space (a pattern that compiles to gigabytes fails here with
    MemoryError) and its CPU time (SIGXCPU past the deadline, should the parent's kill be late)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    cpu = int(seconds) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


def _files(root: Path, start: Path) -> list[Path]:
    if start.is_file():
        return [start]
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(start):  # symlinked directories are not descended
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        files.extend(Path(dirpath) / f for f in sorted(filenames))
    return files


def _text_of(root: Path, file: Path) -> str | None:
    """The file's text when it is a text file inside ``root`` (a symlink out, or into .git, is not)."""
    try:
        real = file.resolve()
        if not real.is_relative_to(root) or ".git" in real.relative_to(root).parts or not real.is_file():
            return None
        if real.stat().st_size > MAX_FILE_BYTES:
            return None
        data = real.read_bytes()
    except (OSError, RuntimeError, ValueError):
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def search(root: Path, start: Path, pattern: str, seconds: float) -> dict[str, object]:
    deadline = time.monotonic() + seconds
    try:
        compiled = regex.compile(pattern)
    except regex.error as exc:
        return {"error": f"bad regular expression: {exc}", "kind": "pattern"}
    except MemoryError:
        return {"error": "the pattern is too large; simplify it", "kind": "memory"}
    if start != root and not start.is_relative_to(root):
        return {"error": "path outside the worktree", "kind": "path"}
    hits: list[str] = []
    for file in _files(root, start):
        text = _text_of(root, file)
        if text is None:
            continue
        rel = file.relative_to(root).as_posix()
        for n, line in enumerate(text.splitlines(), 1):
            left = deadline - time.monotonic()
            if left <= 0:  # the tree is large, not the pattern slow: what was found so far
                return {"hits": hits, "more": True}
            try:
                found = compiled.search(line, timeout=left)
            except TimeoutError:
                return {"error": "pattern took too long; simplify it", "kind": "timeout"}
            if found:
                hits.append(f"{rel}:{n}: {line[:LINE_CHARS]}")
                if len(hits) >= MAX_RESULTS:
                    return {"hits": hits, "more": True}
    return {"hits": hits, "more": False}


def main(argv: list[str]) -> int:
    root, start, pattern, seconds = Path(argv[1]), Path(argv[2]), argv[3], float(argv[4])
    _limit(seconds)
    try:
        result = search(root, start, pattern, seconds)
    except MemoryError:
        result = {"error": "the pattern needs too much memory; simplify it", "kind": "memory"}
    sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
