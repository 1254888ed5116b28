"""Isolation: what a checkout from a warm mirror saves over a fresh clone, and what the sandbox costs.

Every agent runs in a checkout of its own; a host recycles checkouts of the mirrors it keeps
(``workers.isolation.worktree.Worktrees`` with a pool: reset to the task's commit) instead of cloning, and
adds a detached worktree to a local target's repository. The clone here is ``git clone file://`` (git's pack
transport, no hard links): a lower bound on what a clone from a forge costs. Every command an agent or a
verification runs starts in bubblewrap (``workers.isolation.sandbox``); the figure is one ``true`` through
``workers.isolation.supervise.run_supervised`` with and without its ``Jail``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.stats import Figure, figure, ratio, seconds_of
from orchestrator.spec import SandboxSettings
from workers.isolation.sandbox import Jail, confine, sandbox_problem
from workers.isolation.supervise import run_supervised
from workers.isolation.worktree import Worktrees

IDENTITY = ["-c", "user.name=Bench", "-c", "user.email=bench@jury.invalid", "-c", "commit.gpgsign=false"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *IDENTITY, *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def generated_repo(where: Path, files: int) -> tuple[Path, str, str]:
    """A repository of ``files`` small Python files in 50 packages: a trunk commit and a PR head on it
    that changes 10 of them; its path and both shas."""
    repo = where / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for i in range(files):
        pkg = repo / f"pkg{i % 50:02d}"
        pkg.mkdir(exist_ok=True)
        (pkg / f"mod{i:05d}.py").write_text(f'"""Module {i}."""\n\n\ndef f{i}(x):\n    return x + {i}\n' * 8)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "generated")
    trunk = git(repo, "rev-parse", "HEAD").strip()
    for i in range(0, files, max(1, files // 10)):
        path = repo / f"pkg{i % 50:02d}" / f"mod{i:05d}.py"
        path.write_text(path.read_text() + f"\n\ndef g{i}(x):\n    return -x\n")
    git(repo, "commit", "-q", "-am", "a PR")
    return repo, trunk, git(repo, "rev-parse", "HEAD").strip()


def worktree_vs_clone(repeat: int, files: int = 5_000) -> list[Figure]:
    """A task's checkout, three ways: a recycled one (``Worktrees`` with a pool, as a host checks out its
    mirrors: taken, reset to the commit, released), a fresh worktree
    (``workers.isolation.worktree.add_worktree``: git's records written by Jury, the files by one ``git
    read-tree``; and its removal, as for a local target) and a ``git clone`` (and its removal). Each sample is
    the whole cycle, the checkout made and given up; the commits alternate between trunk and a PR head 10
    files apart, as successive tasks of a fleet do."""
    with tempfile.TemporaryDirectory() as d:
        base = Path(d)
        repo, trunk, head = generated_repo(base, files)
        recycled = Worktrees(base / "recycled", pool=1)
        fresh = Worktrees(base / "worktrees")
        with recycled.checkout(repo, trunk, "warm"), fresh.checkout(repo, trunk, "warm"):
            pass  # the repository's objects and index in the page cache, the recycled checkout made
        pool_samples, wt_samples, clone_samples = [], [], []
        for i in range(repeat):
            sha = head if i % 2 == 0 else trunk
            t = time.perf_counter()
            with recycled.checkout(repo, sha, f"r{i}"):
                pass
            pool_samples.append(time.perf_counter() - t)
            t = time.perf_counter()
            with fresh.checkout(repo, sha, f"w{i}"):
                pass
            wt_samples.append(time.perf_counter() - t)
            dst = base / f"clone{i}"
            t = time.perf_counter()
            subprocess.run(
                ["git", "clone", "-q", "--no-hardlinks", "--no-checkout", f"file://{repo}", str(dst)],
                check=True,
                capture_output=True,
            )
            subprocess.run(
                ["git", "checkout", "-q", "--detach", sha], cwd=dst, check=True, capture_output=True
            )
            shutil.rmtree(dst)
            clone_samples.append(time.perf_counter() - t)
    pool = figure(
        "isolation",
        f"recycled checkout ({files:,} files)",
        "s",
        pool_samples,
        note="taken, reset to the commit, released",
    )
    wt = figure(
        "isolation", f"worktree add + remove ({files:,} files)", "s", wt_samples, note="a local target"
    )
    clone = figure(
        "isolation",
        f"git clone + remove ({files:,} files)",
        "s",
        clone_samples,
        note="file://, no hard links",
    )
    return [
        pool,
        wt,
        clone,
        ratio("isolation", "clone / recycled checkout", clone, pool, note="target >= 10x"),
        ratio("isolation", "clone / worktree add", clone, wt),
    ]


def sandbox_startup(repeat: int) -> list[Figure]:
    """Seconds of ``true`` through run_supervised, bare and jailed; the difference is the sandbox's cost."""
    settings = SandboxSettings(mode="bwrap")
    problem = sandbox_problem(settings)
    env = dict(os.environ)
    out: list[Figure] = []
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)

        def run(jail: Jail | None) -> None:
            r = run_supervised(
                ["true"],
                cwd=work,
                env=env,
                stdout_path=work / "out",
                stderr_path=work / "err",
                timeout=30,
                jail=jail,
            )
            if r.error or r.exit_code != 0:
                raise RuntimeError(f"true failed: {r}")

        bare = figure(
            "isolation",
            "run_supervised true, no sandbox",
            "ms",
            [s * 1e3 for s in seconds_of(lambda: run(None), repeat)],
        )
        out.append(bare)
        if problem is not None:
            out.append(
                figure(
                    "isolation",
                    "run_supervised true in bwrap",
                    "ms",
                    [float("nan")],
                    note=f"no sandbox here: {problem}",
                )
            )
            return out
        jail = Jail(worktree=work, settings=settings)
        run(jail)  # the first start pays for caches the rest share
        jailed = figure(
            "isolation",
            "run_supervised true in bwrap",
            "ms",
            [s * 1e3 for s in seconds_of(lambda: run(jail), repeat)],
        )
        out.append(jailed)
        # both figures above include run_supervised's output readers, limits, process group; the spawn alone:
        confined = confine(jail, ["true"], work, env)
        raw_bare = figure(
            "isolation",
            "spawn true, no sandbox",
            "ms",
            [s * 1e3 for s in seconds_of(lambda: subprocess.run(["true"], cwd=work, check=True), repeat)],
        )
        raw_jailed = figure(
            "isolation",
            "spawn true in bwrap",
            "ms",
            [
                s * 1e3
                for s in seconds_of(
                    lambda: subprocess.run(confined.argv, cwd=work, env=confined.env, check=True), repeat
                )
            ],
            note="workers.isolation.sandbox.confine's argv",
        )
        cost = figure(
            "isolation",
            "sandbox start-up per command",
            "ms",
            [raw_jailed.median - raw_bare.median],
            note="spawn in bwrap minus bare spawn, medians",
        )
        out += [raw_bare, raw_jailed, cost]
    return out


def measure(*, quick: bool, repeat: int) -> list[Figure]:
    """The full figures on 5,000 files; ``quick`` on 1,000, since on a machine with a slow disk the first
    checkouts of 5,000 files alone took most of the two minutes ``--quick`` has."""
    if quick:
        return worktree_vs_clone(3, files=1_000) + sandbox_startup(5)
    return worktree_vs_clone(2 * repeat) + sandbox_startup(10)
