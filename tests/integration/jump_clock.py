"""A clock a timeout test moves: ``run_supervised``'s timeout fires when the test has seen what it needs.

A test that asserts what a timeout does (the group killed, the output kept) must let the child reach the
state it needs first, however long a loaded machine takes; a short real timeout makes that a race. With
``JumpClock.install``, ``workers.isolation.supervise`` reads the real clock plus an offset, and the test jumps
the offset past the timeout from a tick or an ``interrupted`` callback once the child is where it wants it.
"""

from __future__ import annotations

import time

import pytest

from workers.isolation import supervise


class JumpClock:
    """``time`` as ``workers.isolation.supervise`` sees it: the real clock, moved ahead when the test says."""

    def __init__(self) -> None:
        self.offset = 0.0

    @classmethod
    def install(cls, monkeypatch: pytest.MonkeyPatch) -> JumpClock:
        """A clock that ``workers.isolation.supervise`` reads until the test ends."""
        clock = cls()
        monkeypatch.setattr(supervise, "time", clock)
        return clock

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    @property
    def jumped(self) -> bool:
        return self.offset > 0

    def jump(self, seconds: float) -> None:
        """Move the clock ``seconds`` ahead (once a test has seen what it waited for)."""
        self.offset += seconds

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)
