"""``python -m bench [--quick] [--json] [--only SECTION ...]``: Jury's figures on this machine.

Needs the machine's Redis (``--redis``, default ``$JURY_REDIS_URL`` or redis://127.0.0.1:6379/0); every
key it writes is under a fresh ``bench-*`` prefix and deleted afterwards. ``--quick`` runs in under two
minutes with smaller workloads; the figures say which size they measured.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable
from typing import cast

import redis
import structlog
from rich.console import Console
from rich.table import Table
from rich.text import Text

from bench import dispatch, eventlog, fairness, fleet, isolation, listing, machine, parsers, reaper, startup
from bench.stats import Figure

SECTIONS = (
    "dispatch",
    "fleet",
    "fair share",
    "event log",
    "reaper",
    "listing",
    "isolation",
    "parsers",
    "start-up",
)


def quiet_logs() -> None:
    """The workers' info lines (a dispatch per coordinate pass) would bury the tables."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    logging.getLogger().setLevel(logging.WARNING)


def number(x: float) -> str:
    if math.isnan(x):
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3g}"


def report(info: dict[str, object], figures: list[Figure], *, as_json: bool) -> None:
    """Every bench script's output: one JSON document (the machine and every figure), or the tables."""
    if as_json:
        json.dump({"machine": info, "figures": [f.as_dict() for f in figures]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_tables(Console(width=None if sys.stdout.isatty() else 132), info, figures)


def print_tables(console: Console, info: dict[str, object], figures: list[Figure]) -> None:
    console.print(
        f"[bold]{info['date']}[/bold]  {info['cpu']}, {info['cores']} cores (host {info['host_cores']}), "
        f"{info['memory_gb']} GB, Python {info['python']}, Redis {info['redis']}, load {info['load_avg']}, "
        f"temporary files on {info.get('tmp_fs') or 'an unknown file system'}"
        + ("  [yellow]--quick[/yellow]" if info.get("quick") else "")
        + f"  ({info.get('seconds')} s)"
    )
    sections: dict[str, list[Figure]] = {}
    for f in figures:
        sections.setdefault(f.section, []).append(f)
    took = cast(dict[str, float], info.get("section_seconds", {}))
    for name, rows in sections.items():
        # a figure's section may be a part of what ran ("coordinate" in "event log"): no time of its own
        title = f"{name} ({took[name]} s)" if name in took else name
        table = Table(title=title, title_justify="left")
        for col in ("figure", "median", "min", "max", "unit", "runs", "note"):
            table.add_column(col, justify="left" if col in ("figure", "unit", "note") else "right")
        for f in rows:
            cells = (f.name, number(f.median), number(f.low), number(f.high), f.unit, str(f.runs), f.note)
            table.add_row(*(Text(c) for c in cells))  # plain text: a note may hold "[limits]"
        console.print(table)


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number of runs, 1 or more, not {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small workloads, under two minutes")
    ap.add_argument("--json", action="store_true", help="one JSON document: the machine and every figure")
    ap.add_argument("--only", action="append", choices=SECTIONS, help="run only this section (repeatable)")
    ap.add_argument("--redis", default=os.environ.get("JURY_REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument(
        "--fleet-repeat",
        type=positive,
        default=1,
        metavar="N",
        help="runs of the fleet section's workload per W, for a median of N (default 1: a 200-PR run "
        "on W = 2 takes about 40 minutes)",
    )
    args = ap.parse_args(argv)
    quiet_logs()
    client = redis.Redis.from_url(args.redis)
    client.ping()
    info = machine.describe(client) | {"quick": args.quick}
    repeat = 3 if args.quick else 5
    runs: dict[str, Callable[[], list[Figure]]] = {
        "event log": lambda: eventlog.measure(client, quick=args.quick, repeat=repeat),
        "reaper": lambda: reaper.measure(client, runs=reaper.RUNS, repeat=repeat),
        "listing": lambda: listing.measure(
            sizes=(1_000, 10_000) if args.quick else listing.SIZES,
            repeat=repeat,
            old=0 if args.quick else listing.OLD,
        ),
        "isolation": lambda: isolation.measure(quick=args.quick, repeat=repeat),
        "parsers": lambda: parsers.measure(repeat, size=100_000 if args.quick else parsers.MB),
        "start-up": lambda: startup.measure(repeat=repeat),
    }
    runs = {
        "dispatch": lambda: dispatch.measure_dispatch(args.redis, quick=args.quick),
        "fleet": lambda: fleet.measure(args.redis, quick=args.quick, repeat=args.fleet_repeat),
        "fair share": lambda: fairness.measure(args.redis, quick=args.quick, repeat=1 if args.quick else 3),
    } | runs
    chosen = args.only or list(runs)
    figures: list[Figure] = []
    started = time.perf_counter()
    took: dict[str, float] = {}
    for name in chosen:
        if name in runs:
            begun = time.perf_counter()
            figures += runs[name]()
            took[name] = round(time.perf_counter() - begun, 1)
    info["seconds"] = round(time.perf_counter() - started, 1)
    info["section_seconds"] = took
    report(info, figures, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
