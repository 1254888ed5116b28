"""Start-up: wall seconds of ``jury --help``, ``jury version`` and ``jury runs --help`` against a bare Python.

Every command once imported the whole project first (Celery, Redis, httpx, the domain models): 0.76-0.9 s
for ``jury --help`` against 0.01 s for a bare Python. The commands are now imported when run
(``jury_cli.app``); the target is each within 0.3 s of a bare Python (the "over bare" rows).

    python -m bench.startup [--repeat N] [--json]      (or: python -m bench --only start-up)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from bench.stats import Figure, figure

SECTION = "start-up"
TARGET_OVER_BARE = 0.3  # seconds a command's start-up may add to a bare Python's
COMMANDS: dict[str, list[str]] = {
    "jury --help": ["--help"],
    "jury version": ["version"],
    "jury runs --help": ["runs", "--help"],
}


def wall(argv: list[str]) -> float:
    """Wall seconds of one run of ``argv`` to its end (its output discarded); it must succeed."""
    began = time.perf_counter()
    subprocess.run(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
    )
    return time.perf_counter() - began


def measure(repeat: int = 10) -> list[Figure]:
    """A bare Python, each command, and each command's median over the bare Python's. The runs alternate
    (bare, then each command, ``repeat`` times) so a load that comes and goes weighs on all alike."""
    argvs = {"bare python (python -c pass)": [sys.executable, "-c", "pass"]}
    argvs |= {name: [sys.executable, "-m", "jury_cli", *args] for name, args in COMMANDS.items()}
    samples: dict[str, list[float]] = {name: [] for name in argvs}
    for argv in argvs.values():  # once each, unmeasured: the page cache warm for all alike
        wall(argv)
    for _ in range(repeat):
        for name, argv in argvs.items():
            samples[name].append(wall(argv))
    bare_name = next(iter(argvs))
    figures = [figure(SECTION, name, "s", got) for name, got in samples.items()]
    for f in figures[1:]:
        over = figure(
            SECTION,
            f"{f.name} over bare",
            "s",
            [a - b for a, b in zip(samples[f.name], samples[bare_name], strict=True)],
        )
        over.note = (
            f"target <= {TARGET_OVER_BARE} s: {'met' if over.median <= TARGET_OVER_BARE else 'MISSED'}"
        )
        figures.append(over)
    return figures


def main(argv: list[str] | None = None) -> int:

    from bench.__main__ import report
    from bench.machine import describe

    ap = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10, help="runs of each command (default 10)")
    ap.add_argument("--json", action="store_true", help="one JSON document: the machine and the figures")
    args = ap.parse_args(argv)
    began = time.perf_counter()
    figures = measure(max(1, args.repeat))
    info = describe(None) | {"seconds": round(time.perf_counter() - began, 1)}
    report(info, figures, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
