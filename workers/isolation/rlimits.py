"""Resource limits for a jail, set before bwrap starts so everything in the sandbox inherits them.

Apart from ``workers.isolation.sandbox`` (what a jail sees) because how a limit reaches a child — util-linux's
``prlimit`` exec'ing it, or a ``preexec_fn`` where prlimit is missing — is its own concern, with its own
cost (``through_prlimit``).
"""

from __future__ import annotations

import resource
import shutil
from collections.abc import Callable
from functools import cache

MIB = 1024 * 1024


def capped(res: int, value: int) -> int:
    """A limit as the child gets it: ``value``, never above the worker's hard limit (which a child
    inherits, and root could otherwise raise)."""
    _soft, hard = resource.getrlimit(res)
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def set_limits(limits: tuple[tuple[int, int], ...]) -> Callable[[], None] | None:
    """A ``preexec_fn`` part that lowers each limit (never raises one above the worker's hard limit)."""
    if not limits:
        return None

    def apply() -> None:
        for res, value in limits:
            cap = capped(res, value)
            resource.setrlimit(res, (cap, cap))

    return apply


# util-linux's prlimit names for the limits a jail sets.
PRLIMIT_OPTIONS = {
    resource.RLIMIT_AS: "--as",
    resource.RLIMIT_NPROC: "--nproc",
    resource.RLIMIT_FSIZE: "--fsize",
}


@cache
def prlimit_binary() -> str | None:
    """util-linux's ``prlimit``, from the system's own directories only (never the worker's PATH)."""
    return shutil.which("prlimit", path="/usr/bin:/bin")


def through_prlimit(
    argv: list[str], limits: tuple[tuple[int, int], ...]
) -> tuple[list[str], tuple[tuple[int, int], ...]]:
    """``argv`` exec'd through ``prlimit``, which sets the limits (each ``capped``) on itself and then
    execs it, and no limits left for a ``preexec_fn``; or, without prlimit here, ``argv`` and the limits.

    Why: a ``preexec_fn`` makes Python fork the whole worker and run Python in the child, where without
    one it can vfork: 9.6 ms and about 8 ms of CPU a command against 1.2 ms, measured in a worker-sized
    process (docs/architecture.md, "Trust boundary"). The limits are the same: set before bwrap starts, and
    inherited by everything in the sandbox."""
    binary = prlimit_binary()
    if not limits or binary is None or any(res not in PRLIMIT_OPTIONS for res, _ in limits):
        return list(argv), limits
    options = []
    for res, value in limits:
        cap = capped(res, value)
        options.append(f"{PRLIMIT_OPTIONS[res]}={cap}:{cap}")
    return [binary, *options, "--", *argv], ()
