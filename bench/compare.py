"""``python -m bench.compare OTHER [--runs N] [--pairs K]``: Jury's dispatch path on two checkouts of Jury,
measured in turns on this machine.

A shared two-core machine's speed wanders by half within minutes (Celery's no-op rate alone does), so two
``python -m bench`` figures taken an hour apart compare the hours as much as the code. Here each pair
measures both: ``N`` runs of the dispatch workload (``bench.dispatch.dispatch``'s, one reviewer whose agent
exits at once) on two fresh ``jury worker`` processes started from this checkout, then from ``OTHER`` (a
``git worktree add`` of another commit, say), in alternating order, ``K`` pairs; the table gives each
side's medians: tasks a second, and the CPU a run took of the workers, their child processes, Redis and
the whole machine. The bench itself (this process) is this checkout's either way.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import redis
from rich.console import Console
from rich.table import Table

from bench.__main__ import quiet_logs
from bench.cpu import Spent
from bench.dispatch import jury_side
from bench.fleet import ROOT, private_db
from bench.stats import Figure, figure


def one_sample(url: str, base: Path, code: Path, runs: int) -> tuple[float, Spent]:
    """``runs`` dispatch runs on two workers of the checkout ``code``: tasks a second and what they spent."""
    client = redis.Redis.from_url(url)
    try:
        rate, spent, states = jury_side(client, url, base, runs, warm=0, code=code)
    finally:
        client.close()
    if spent is None:
        raise SystemExit("bench.compare: CPU readings need Linux's /proc")
    if set(states) != {"converged"}:
        raise SystemExit(f"bench.compare: runs on {code} ended {sorted(set(states))}, not converged")
    return rate, spent


def compare(url: str, sides: dict[str, Path], runs: int, pairs: int) -> list[Figure]:
    samples: dict[str, list[tuple[float, Spent]]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as d:
        for k in range(pairs):
            order = list(sides.items()) if k % 2 == 0 else list(reversed(sides.items()))
            for name, code in order:
                samples[name].append(one_sample(url, Path(d) / f"{k}-{name}", code, runs))
    out: list[Figure] = []
    for name, rows in samples.items():
        per_run = [(s, s.busy_cores * 3 * runs / rate) for rate, s in rows]  # the machine's CPU seconds
        out += [
            figure(name, "dispatch rate", "tasks/s", [rate for rate, _ in rows]),
            figure(name, "CPU a run: the workers", "ms", [1e3 * s.workers / runs for s, _ in per_run]),
            figure(
                name, "CPU a run: their child processes", "ms", [1e3 * s.children / runs for s, _ in per_run]
            ),
            figure(name, "CPU a run: Redis", "ms", [1e3 * s.redis / runs for s, _ in per_run]),
            figure(name, "CPU a run: the whole machine", "ms", [1e3 * m / runs for _, m in per_run]),
        ]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("other", type=Path, help="another checkout of Jury (its working tree)")
    ap.add_argument("--runs", type=int, default=60, help="dispatch runs a sample (default 60)")
    ap.add_argument("--pairs", type=int, default=4, help="samples of each side, in turns (default 4)")
    ap.add_argument("--redis", default=os.environ.get("JURY_REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = ap.parse_args(argv)
    quiet_logs()
    other = args.other.resolve()
    if not (other / "jury_cli" / "__main__.py").is_file():
        ap.error(f"{args.other} is not a checkout of Jury (no jury_cli/__main__.py in it)")
    if args.runs < 1 or args.pairs < 1:
        ap.error("--runs and --pairs must be at least 1")
    rev = subprocess.run(
        ["git", "-C", str(other), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    sides = {"this checkout": ROOT, f"{args.other} ({rev.stdout.strip() or '?'})": other}
    with private_db(args.redis) as url:
        figures = compare(url, sides, args.runs, args.pairs)
    Console().print(side_by_side(figures, f"dispatch, {args.pairs} pairs of {args.runs} runs, in turns"))
    return 0


def side_by_side(figures: list[Figure], title: str) -> Table:
    """A row a figure, a column a checkout: each cell the median (min–max)."""
    sides = list(dict.fromkeys(f.section for f in figures))
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("unit")
    for side in sides:
        table.add_column(side, justify="right")
    for name in dict.fromkeys(f.name for f in figures):
        cells = {f.section: f for f in figures if f.name == name}
        row = [f"{cells[s].median:.1f} ({cells[s].low:.1f}–{cells[s].high:.1f})" for s in sides]
        table.add_row(name, cells[sides[0]].unit, *row)
    return table


if __name__ == "__main__":
    sys.exit(main())
