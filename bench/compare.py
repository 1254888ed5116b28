"""``python -m bench.compare OTHER [--runs N] [--pairs K] [--celery]``: Jury's dispatch path on two checkouts
of Jury, measured in turns on this machine.

A shared two-core machine's speed wanders by half within minutes (Celery's no-op rate alone does), so two
``python -m bench`` figures taken an hour apart compare the hours as much as the code. Here each pair
measures both: ``N`` runs of the dispatch workload (``bench.dispatch.dispatch``'s, one reviewer whose agent
exits at once) on two fresh ``jury worker`` processes started from this checkout, then from ``OTHER`` (a
``git worktree add`` of another commit, say), in alternating order, ``K`` pairs; the table gives each
side's medians: tasks a second, and the CPU a run took of the workers, their child processes, Redis and
the whole machine. The bench itself (this process) is this checkout's either way. With ``--celery`` each
pair also measures Celery's own no-op task (``bench.dispatch.noop_side``, as many tasks as the pair's
runs made, at least 200) and gives each side's rate over it, pair by pair: the dispatch target's ratio
for a checkout (a patched one, say: how far a change would take it), taken in the same minutes.
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
from bench.dispatch import jury_side, noop_side
from bench.fleet import ROOT, Processes, fleet_env, private_db
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


def compare(url: str, sides: dict[str, Path], runs: int, pairs: int, celery: bool = False) -> list[Figure]:
    samples: dict[str, list[tuple[float, Spent]]] = {name: [] for name in sides}
    noop_rates: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        for k in range(pairs):
            order = list(sides.items()) if k % 2 == 0 else list(reversed(sides.items()))
            for name, code in order:
                samples[name].append(one_sample(url, Path(d) / f"{k}-{name}", code, runs))
            if celery:
                noop_rates.append(noop_sample(url, Path(d) / f"{k}-celery", runs))
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
        if noop_rates:
            out.append(over_celery(name, [rate for rate, _ in rows], noop_rates))
    if noop_rates:
        out.append(figure(CELERY, "Celery's no-op rate", "tasks/s", noop_rates))
    return out


CELERY = "Celery's no-op"  # the column of its own rate


def over_celery(side: str, rates: list[float], noop_rates: list[float]) -> Figure:
    """A side's dispatch rate over Celery's no-op rate of the same pair, pair by pair: the target's ratio."""
    return figure(
        side, "dispatch rate / Celery's no-op", "x", [r / c for r, c in zip(rates, noop_rates, strict=True)]
    )


def noop_sample(url: str, base: Path, runs: int) -> float:
    """Celery's no-op task on two fresh workers of its defaults (after 60 to warm them): tasks a second."""
    client = redis.Redis.from_url(url)
    try:
        procs = Processes(fleet_env(url, base / "state"), base / "logs")
        rate, _ = noop_side(client, url, "celery", procs, 2, 60, max(200, 3 * runs))
        return rate
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("other", type=Path, help="another checkout of Jury (its working tree)")
    ap.add_argument("--runs", type=int, default=60, help="dispatch runs a sample (default 60)")
    ap.add_argument("--pairs", type=int, default=4, help="samples of each side, in turns (default 4)")
    ap.add_argument(
        "--celery",
        action="store_true",
        help="also Celery's no-op task each pair, and each side's rate over it",
    )
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
        figures = compare(url, sides, args.runs, args.pairs, celery=args.celery)
    Console().print(side_by_side(figures, f"dispatch, {args.pairs} pairs of {args.runs} runs, in turns"))
    return 0


def side_by_side(figures: list[Figure], title: str) -> Table:
    """A row a figure, a column a checkout (and Celery's no-op, with ``--celery``): each cell the median
    (min–max), "–" where a column has no such figure."""
    sides = list(dict.fromkeys(f.section for f in figures))
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("unit")
    for side in sides:
        table.add_column(side, justify="right")
    for name in dict.fromkeys(f.name for f in figures):
        cells = {f.section: f for f in figures if f.name == name}
        row = [cell(cells[s]) if s in cells else "–" for s in sides]
        table.add_row(name, next(iter(cells.values())).unit, *row)
    return table


def cell(f: Figure) -> str:
    """A figure's median (min–max): a ratio to three places, the rest to one."""
    digits = 3 if f.unit == "x" else 1
    return f"{f.median:.{digits}f} ({f.low:.{digits}f}–{f.high:.{digits}f})"


if __name__ == "__main__":
    sys.exit(main())
