"""A fleet without a shared disk: two ``jury worker`` processes and a ``jury scheduler``, each with a
``JURY_DIR`` of its own, and a submitting process with a fourth, share one Redis and nothing else, and
review 10 PRs of a ``file://`` remote to the end.

The remote is a local bare repository with ``refs/pull/N/head`` refs (each PR the sample repository's
buggy ``median`` plus a note of its own, so every PR has its own head and fix commits); a github.com PR
URL reaches it through git's ``url.<base>.insteadOf``. The judge really fixes the bug, so its patch must
travel through the store: any worker may review the tree another worker's coordinator built. Then
``jury show`` answers from Redis, ``jury fetch`` rebuilds each run's ``jury/<slug>`` in a fresh clone
with the recorded shas, and a run started with ``--push`` left its branch on the remote.

Nine of the PRs carry the ``jury`` label, and the scheduler's schedule (every two seconds) sweeps them
from a local GitHub API server whose PRs are the remote's: the scheduler enqueues their runs from its own
mirror, once per head however often it fires. The tenth, unlabelled, is started by ``jury review
--detach --push`` from the submitting host. The reaper runs in every worker, in turn.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.fold import RunState, fold
from orchestrator.spec import TERMINAL_STATES
from orchestrator.store.redis import from_url
from tests.conftest import fake_agent, outside_env
from tests.e2e.test_fleet import PrivateRedis, git, stop_group, wait_for
from tests.fakes.forge_server import FakePR, ForgeServer

PRS = range(1, 11)
TOKEN = "ghp_NOSHAREDdiskTOKEN0123456789"
PUSHED = 10  # the PR whose run is started with --push; the others are swept by the schedule
IDENTITY = ["-c", "user.name=Test", "-c", "user.email=test@jury.invalid", "-c", "commit.gpgsign=false"]


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[PrivateRedis]:
    r = PrivateRedis(tmp_path / "redis")
    r.start()
    yield r
    r.stop()


def make_remote(sample: Path, where: Path) -> Path:
    """A bare ``acme/sample.git`` whose PR N is ``feature`` plus ``notes/pr-N.txt``."""
    remote = where / "acme" / "sample.git"
    remote.parent.mkdir(parents=True)
    git(sample, "clone", "--bare", "--quiet", str(sample), str(remote))
    git(remote, "symbolic-ref", "HEAD", "refs/heads/main")
    for n in PRS:
        git(sample, "checkout", "--quiet", "-B", f"pr{n}", "feature")
        (sample / "notes").mkdir(exist_ok=True)
        (sample / "notes" / f"pr-{n}.txt").write_text(f"pull request {n}\n")
        git(sample, *IDENTITY, "add", "-A")
        git(sample, *IDENTITY, "commit", "--quiet", "-m", f"note for PR {n}")
    git(sample, "push", "--quiet", str(remote), *(f"pr{n}:refs/pull/{n}/head" for n in PRS))
    return remote


def test_two_workers_with_their_own_dirs_review_ten_prs(
    redis_server: PrivateRedis, sample_repo: Path, write_config, tmp_path: Path
) -> None:
    remote = make_remote(sample_repo, tmp_path / "remotes")
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://github.com/\n')
    # The operator's file: the agents, and the schedule the scheduler fires (the runs it starts read it too).
    schedule = (
        '[[schedules]]\nname = "prs"\ncron = "* * * * *"\nseconds = "*/2"\n'
        'kind = "review"\nrepos = ["acme/sample"]\n'
        'label = "jury"\nreviewers = ["finder"]\njudge = "judge"\n'
    )
    config = write_config(fake_agent("finder", "find"), fake_agent("judge", "clean", "fix"), schedule)
    forge = ForgeServer()
    forge.user(TOKEN, "jury-bot")  # the push asks the forge whether the PR's head is from acme/sample
    pulls = forge.github_repo("acme/sample")
    for n in PRS:
        head = git(remote, "rev-parse", f"refs/pull/{n}/head").strip()
        pulls.add(FakePR(n, f"PR {n}", head, labels=[] if n == PUSHED else ["jury"]))
    dirs = {name: tmp_path / name for name in ("w1", "w2", "scheduler", "submit", "reader")}
    for d in dirs.values():
        d.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()

    def env(name: str) -> dict[str, str]:
        e = outside_env()
        e.update(
            {
                "JURY_REDIS_URL": redis_server.url,
                "JURY_DIR": str(dirs[name]),
                "FAKE_STATE": str(dirs[name]),
                "GIT_CONFIG_GLOBAL": str(gitconfig),
                "JURY_GITHUB_API": forge.github_api,
                "GITHUB_TOKEN": TOKEN,
                "NO_COLOR": "1",
                "JURY_LOG_LEVEL": "INFO",
                "JURY_LOG_JSON": "true",
            }
        )
        return e

    def jury(name: str, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "jury_cli", *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env(name), timeout=120)

    workers: list[subprocess.Popen[bytes]] = []
    store = from_url(redis_server.url)
    forge.__enter__()
    try:
        for name in ("w1", "w2", "scheduler"):
            out = open(logs / f"{name}.log", "wb")
            argv = [sys.executable, "-m", "jury_cli", "worker", "--concurrency", "2"]
            if name == "scheduler":
                argv = [sys.executable, "-m", "jury_cli", "scheduler", "--config", str(config)]
            workers.append(
                subprocess.Popen(
                    argv,
                    env=env(name),
                    stdout=out,
                    stderr=out,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
            out.close()
        # The tenth PR (unlabelled, so no schedule sweeps it) from the submitting host, with --push.
        submitted = subprocess.run(
            [
                sys.executable,
                "-m",
                "jury_cli",
                "review",
                f"https://github.com/acme/sample/pull/{PUSHED}",
                "--reviewer",
                "finder",
                "--judge",
                "judge",
                "--config",
                str(config),
                "--no-refute",
                "--detach",
                "--push",
            ],
            env=env("submit"),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        slugs: dict[int, str] = {PUSHED: submitted.stdout.strip().splitlines()[-1]}

        def swept() -> dict[int, str] | None:
            """The nine PRs' runs the scheduler's sweep started, by PR number, once all are there."""
            found = {}
            for slug in store.runs():
                url = fold(store.read(slug), slug).target.url or ""
                if slug != slugs[PUSHED] and url.startswith("https://github.com/acme/sample/pull/"):
                    found[int(url.rsplit("/", 1)[1])] = slug
            return found if len(found) == len(PRS) - 1 else None

        found = wait_for("the schedule to sweep the nine labelled PRs", swept, 120, lambda: str(store.runs()))
        assert found is not None and sorted(found) == [n for n in PRS if n != PUSHED]
        slugs.update(found)

        def why() -> str:
            parts = []
            for slug in slugs.values():
                s = fold(store.read(slug), slug)
                parts.append(
                    f"{slug}: {s.state} {s.target.state_note} inflight={[a.key for a in s.inflight()]}"
                )
            for f in sorted(logs.glob("*.log")):
                parts.append(f"--- {f.name}\n{f.read_bytes()[-3000:].decode(errors='replace')}")
            return "\n".join(parts)

        def all_ended() -> dict[int, RunState] | None:
            states = {n: fold(store.read(slug), slug) for n, slug in slugs.items()}
            done = all(s.state in TERMINAL_STATES and not s.inflight() for s in states.values())
            return states if done else None

        states = wait_for("the ten runs to end", all_ended, 300, why)
        assert states is not None
        assert sorted(store.runs()) == sorted(slugs.values())  # one run per head, however often it fired
        assert all(p.poll() is None for p in workers), why()  # the workers and the scheduler still up
    finally:
        for p in workers:
            stop_group(p)
        forge.__exit__(None, None, None)

    heads = {n: git(remote, "rev-parse", f"refs/pull/{n}/head").strip() for n in PRS}
    tips: dict[int, str] = {}
    for n, s in states.items():
        assert s.state == "converged", f"PR {n}: {s.state} {s.target.state_note}"
        assert [f.status for f in s.findings.values()] == ["accepted"]
        assert s.target.head == heads[n]
        fixes = [c for c in s.commits if not c.pushed]
        assert len(fixes) == 1
        tips[n] = fixes[0].sha
    assert len(set(tips.values())) == len(PRS)  # each PR's fix sits on its own head

    # `jury show` answers from Redis on a host that never saw the runs.
    shown = jury("reader", "show", slugs[3])
    assert shown.returncode == 0 and "converged" in shown.stdout, shown.stdout + shown.stderr
    assert f"jury fetch {slugs[3]}" in shown.stdout and "run record" not in shown.stdout  # none here

    # `jury fetch` rebuilds each run's branch in a fresh clone, with the recorded shas.
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "--quiet", str(remote), str(clone))
    r = jury("reader", "fetch", *slugs.values(), "--into", str(clone))
    assert r.returncode == 0, r.stdout + r.stderr
    for n, slug in slugs.items():
        assert git(clone, "rev-parse", f"jury/{slug}").strip() == tips[n]
        assert git(clone, "rev-parse", f"jury/{slug}~1").strip() == heads[n]
        assert "len(ordered) % 2 == 0" in git(clone, "show", f"jury/{slug}:stats.py")
        assert f"pull request {n}" in git(clone, "show", f"jury/{slug}:notes/pr-{n}.txt")
    again = jury("reader", "fetch", slugs[1], "--into", str(clone))  # the same branch again: fine
    assert again.returncode == 0, again.stderr
    git(clone, "branch", "-f", f"jury/{slugs[2]}", heads[2])  # a branch of that name elsewhere: refused
    clash = jury("reader", "fetch", slugs[2], "--into", str(clone))
    assert clash.returncode == 2 and f"already has jury/{slugs[2]}" in clash.stderr, clash.stderr
    # --push put the run's branch on the remote; the others' stayed in the store.
    pushed = git(remote, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/jury/").split("\n")
    assert [line for line in pushed if line] == [f"refs/heads/jury/{slugs[PUSHED]} {tips[PUSHED]}"]

    # Each worker worked from its own directory: its own mirror, its own agents' files, and never a path
    # of another host's directory (the submitting host's mirror is the runs' recorded target path).
    for name in ("w1", "w2"):
        assert (dirs[name] / "mirrors" / "github.com" / "acme" / "sample.git" / "HEAD").is_file()
        ran = [d for d in (dirs[name] / "runs").iterdir() if any(d.glob("*.stdout.txt"))]
        assert ran, f"worker {name} ran no agent"
        text = (logs / f"{name}.log").read_text(errors="replace")
        for other in set(dirs) - {name}:
            assert str(dirs[other]) not in text, f"worker {name} touched {other}'s directory"
    mirror = Path("mirrors") / "github.com" / "acme" / "sample.git"  # the starting host's own mirror
    assert {n: s.target.path for n, s in states.items()} == {
        n: str(dirs["submit" if n == PUSHED else "scheduler"] / mirror) for n in PRS
    }
