"""The end of a command's output as a verification run keeps it: the tails of stdout and stderr, read
from the files the supervisor wrote, in one bounded string."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["combine", "read_tail"]


def read_tail(path: Path, limit: int) -> str:
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - limit * 4))
            data = fh.read()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[-limit:]


_STDERR_MARK = "\n--- stderr ---\n"


def combine(out: str, err: str, limit: int) -> str:
    """The ends of stdout and stderr in at most ``limit`` characters; each gets half, or what the other
    leaves."""
    if not err.strip():
        return out[-limit:]
    if not out.strip():
        return err[-limit:]
    room = limit - len(_STDERR_MARK)
    half = room // 2
    if len(err) <= half:
        out_room = room - len(err)
    elif len(out) <= half:
        out_room = len(out)
    else:
        out_room = half
    return out[-out_room:] + _STDERR_MARK + err[-(room - out_room) :]
