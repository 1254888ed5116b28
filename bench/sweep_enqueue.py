"""A sweep's enqueue of thousands of PRs: ``python -m bench.sweep_enqueue [--prs N ...] [--repeat N]``.

A sweep lists a repository's open PRs, fetches their heads into this host's mirror, finds each one's
merge-base with its trunk (where the repository's ``jury.toml`` is read: the trunk side, never the PR
head), and starts a run for each. Issue 49 measured 16.3 s for 3,000 PRs, 6.3 s of it one ``git
merge-base`` a PR; the target is under 5 s.

The workload: a local bare repository of a trunk of ``TRUNK`` commits and N PR heads (``refs/merge-
requests/K/head``), each one commit on a trunk commit of its own (so the merge-bases differ), made by one
``git fast-import``; the tests' fake forge (``jury_cli.devforge``) lists them as a GitLab project's open
MRs, and git's ``insteadOf`` points gitlab.com at the bare repository. Each sweep is the whole of
``workers.fleet.sweep.sweep`` into the machine's Redis (a scratch prefix, deleted afterwards): listing,
fetch, merge-bases, config, first events, claims, kicks (which go nowhere: no worker runs). Each repeat is
a fresh state directory, so it fetches into a new mirror as a first sweep does. Beside the wall time, how
many git processes the sweep ran (``orchestrator.git``'s runner, wrapped): the batching's proof.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from bench.eventlog import scratch_prefix
from bench.stats import Figure, figure
from orchestrator import git as git_module
from orchestrator.config import Settings
from orchestrator.forge import ForgeSettings
from orchestrator.start import RunOptions
from orchestrator.store.redis import RedisStore

TRUNK = 200  # trunk commits; PR k branches off trunk commit k % TRUNK
TARGET_SECONDS = 5.0  # issue 49: 3,000 PRs enqueued
PROJECT = "bench/app"


def seed_repo(bare: Path, prs: int) -> None:
    """A bare repository: ``main`` of ``TRUNK`` commits, and ``prs`` MR heads, one commit each on the
    trunk commit ``k % TRUNK``, in one ``git fast-import``."""
    subprocess.run(["git", "init", "--bare", "--quiet", "-b", "main", str(bare)], check=True)
    lines: list[str] = []
    stamp = "bench <bench@example.com> 1700000000 +0000"

    def commit(ref: str, mark: int, parent: int | None, path: str, text: str) -> None:
        data = text.encode()
        message = f"{path}\n".encode()
        lines.extend([f"commit {ref}", f"mark :{mark}", f"author {stamp}", f"committer {stamp}"])
        lines.append(f"data {len(message)}\n{message.decode()}")
        if parent is not None:
            lines.append(f"from :{parent}")
        lines.append(f"M 100644 inline {path}\ndata {len(data)}\n{text}")

    for t in range(1, TRUNK + 1):
        commit("refs/heads/main", t, t - 1 if t > 1 else None, "trunk.txt", f"trunk {t}\n")
    for k in range(1, prs + 1):
        commit(f"refs/merge-requests/{k}/head", TRUNK + k, 1 + k % TRUNK, f"pr{k}.txt", f"pr {k}\n")
    stream = ("\n".join(lines) + "\n").encode()
    subprocess.run(["git", "fast-import", "--quiet"], cwd=bare, input=stream, check=True)


def heads(bare: Path) -> dict[int, str]:
    out = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname) %(objectname)", "refs/merge-requests/"],
        cwd=bare,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {int(ref.split("/")[2]): sha for ref, sha in (line.split() for line in out.splitlines())}


@contextmanager
def counting_git() -> Iterator[list[list[str]]]:
    """Every git process ``orchestrator.git`` runs meanwhile, by its arguments (the runner, wrapped)."""
    calls: list[list[str]] = []
    real = git_module.subprocess.run

    def counted(args: list[str], *a: Any, **kw: Any) -> Any:
        if args and args[0] == "git":
            calls.append(list(args))
        return real(args, *a, **kw)

    git_module.subprocess.run = counted  # type: ignore[assignment]
    try:
        yield calls
    finally:
        git_module.subprocess.run = real


def forge_settings(api: str) -> ForgeSettings:
    return ForgeSettings.model_construct(
        github_api="http://127.0.0.1:9/none",
        gitlab_api=api,
        github_token=None,
        gitlab_token=None,
        github_login=None,
        github_checks="auto",
        gitlab_auth="private-token",
        max_wait=0,
        retries=0,
    )


def operator_file(path: Path) -> Path:
    agent = '["sh", "-c", "echo NO NEW FINDINGS", "agent", "{prompt_file}"]'
    path.write_text(
        f"[agents.r1]\nargv = {agent}\n\n[agents.j]\nargv = {agent}\njudge_argv = {agent}\n",
    )
    return path


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of its children waited for (git)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def one_sweep(client: redis.Redis, root: Path, api: str, config: Path) -> tuple[float, int, int, float]:
    """One sweep into a fresh state directory and scratch prefix: (seconds, runs enqueued, git runs, CPU
    seconds of the sweep's process and its git processes: on a shared machine, the wall time is mostly
    waiting for a core)."""
    from workers.fleet.sweep import SweepFilters, SweepOptions, sweep

    state = Path(tempfile.mkdtemp(dir=root, prefix="state-"))
    with scratch_prefix(client) as prefix, counting_git() as calls:
        store = RedisStore(client, prefix=prefix)
        opts = SweepOptions(run=RunOptions(reviewers="r1", judge="j", config=config))
        t0, cpu0 = time.perf_counter(), cpu_seconds()
        report = sweep(
            Settings(dir=state),
            [f"gitlab:{PROJECT}"],
            SweepFilters(),
            opts,
            store=store,
            kick=lambda slugs: None,
            forge_settings=forge_settings(api),
        )
        seconds, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    errors = report.having("error")
    if errors:
        raise RuntimeError(f"sweep bench: {len(errors)} PRs failed, the first: {errors[0].reason}")
    return seconds, len(report.enqueued), len(calls), cpu


def measure(client: redis.Redis, sizes: tuple[int, ...] = (100, 3000), repeat: int = 3) -> list[Figure]:
    from jury_cli.devforge.server import FakePR, ForgeServer

    out: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="jury-bench-sweep-") as d:
        root = Path(d)
        gitconfig = root / "gitconfig"
        gitconfig.write_text(f'[url "file://{root}/remotes/"]\n\tinsteadOf = https://gitlab.com/\n')
        os.environ["GIT_CONFIG_GLOBAL"] = str(gitconfig)
        config = operator_file(root / "jury-bench.toml")
        for n in sizes:
            bare = root / "remotes" / f"{PROJECT}.git"
            if bare.exists():
                subprocess.run(["rm", "-rf", str(bare)], check=True)
            bare.parent.mkdir(parents=True, exist_ok=True)
            seed_repo(bare, n)
            with ForgeServer() as server:
                project = server.gitlab_project(PROJECT)
                for k, sha in heads(bare).items():
                    project.add(FakePR(k, f"pr {k}", sha))
                samples = [one_sweep(client, root, server.gitlab_api, config) for _ in range(repeat)]
            runs = {s[1] for s in samples}
            if runs != {n}:
                raise RuntimeError(f"sweep bench: enqueued {runs}, not {n}")
            note = f"target < {TARGET_SECONDS} s" if n >= 3000 else ""
            out.append(figure("sweep", f"enqueue {n:,} PRs", "s", [s[0] for s in samples], note=note))
            out.append(figure("sweep", f"enqueue {n:,} PRs, per PR", "ms", [s[0] * 1e3 / n for s in samples]))
            out.append(
                figure(
                    "sweep",
                    f"enqueue {n:,} PRs, CPU",
                    "s",
                    [s[3] for s in samples],
                    note="the sweep's process and its git processes (not Redis's)",
                )
            )
            out.append(
                figure("sweep", f"enqueue {n:,} PRs, git processes", "", [float(s[2]) for s in samples])
            )
    return out


def main(argv: list[str] | None = None) -> int:
    from bench import machine
    from bench.__main__ import quiet_logs
    from bench.__main__ import report as print_report

    ap = argparse.ArgumentParser(prog="python -m bench.sweep_enqueue", description=__doc__.splitlines()[0])
    ap.add_argument("--prs", type=int, action="append", help="PRs a sweep (repeatable; default 100 and 3000)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--redis", default=os.environ.get("JURY_REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = ap.parse_args(argv)
    quiet_logs()
    client = redis.Redis.from_url(args.redis)
    client.ping()
    figures = measure(client, tuple(args.prs or (100, 3000)), args.repeat)
    print_report(machine.describe(client), figures, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
