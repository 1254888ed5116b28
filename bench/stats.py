"""A figure is the median of repeated runs with their min and max: one run says little on a shared box."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Figure:
    """One row of a section: ``median`` (with ``low``/``high``, the min and max of ``runs``) in ``unit``."""

    section: str
    name: str
    unit: str
    median: float
    low: float
    high: float
    runs: int
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def figure(section: str, name: str, unit: str, samples: list[float], note: str = "", **extra: Any) -> Figure:
    """The median, min and max of ``samples`` as one figure."""
    if not samples:
        raise ValueError(f"{section}/{name}: no samples")
    return Figure(
        section=section,
        name=name,
        unit=unit,
        median=statistics.median(samples),
        low=min(samples),
        high=max(samples),
        runs=len(samples),
        note=note,
        extra=dict(extra),
    )


def seconds_of(fn: Callable[[], object], repeat: int) -> list[float]:
    """Wall seconds of ``repeat`` calls of ``fn``, one sample a call."""
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return samples


def ratio(section: str, name: str, num: Figure, den: Figure, note: str = "") -> Figure:
    """``num / den`` of two figures: the ratio of medians, bounded by the worst and best pairing."""
    return Figure(
        section=section,
        name=name,
        unit="x",
        median=num.median / den.median,
        low=num.low / den.high,
        high=num.high / den.low,
        runs=min(num.runs, den.runs),
        note=note,
    )
