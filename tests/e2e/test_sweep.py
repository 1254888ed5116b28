"""``jury sweep`` end to end: a fake GitHub (tests/fakes/forge_server.py) lists the PRs, a local bare
repository stands for github.com (git's ``url.<base>.insteadOf``), the machine's Redis is the fleet's, and
real ``jury worker`` processes run what must run, with the fake agents."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from orchestrator.domain import JuryConfigEvent, RoundStart, RunCarried
from orchestrator.fold import fold
from orchestrator.spec import TERMINAL_STATES, JuryConfig
from orchestrator.store.redis import from_url
from tests.conftest import fake_agent, outside_env
from tests.e2e.test_fleet import stop_group
from tests.e2e.test_review import standard_jury
from tests.e2e.test_review import workers as workers_fixture
from tests.fakes.forge_server import FakePR, ForgeServer

IDENTITY = ["-c", "user.name=T", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *IDENTITY, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def commit_on(work: Path, start: str, path: str, text: str) -> str:
    """A new commit on top of ``start`` (a ref of ``work``) adding ``path``; its sha."""
    git(work, "checkout", "--quiet", "--detach", start)
    (work / path).write_text(text)
    git(work, "add", path)
    git(work, "commit", "--quiet", "-m", f"add {path}")
    return git(work, "rev-parse", "HEAD")


def publish_pr(remote: Path, work: Path, number: int, sha: str) -> None:
    """What the forge does when a PR's head moves: its ``refs/pull/N/head`` in the repository."""
    git(work, "push", "--quiet", "--force", str(remote), f"{sha}:refs/pull/{number}/head")


PUSH_TOKEN = "ghp_SWEEPpushTOKEN0123456789"


@pytest.fixture
def forge() -> Iterator[ForgeServer]:
    with ForgeServer() as server:
        yield server


@pytest.fixture
def remote(sample_repo: Path, tmp_path: Path) -> Path:
    """github.com/acme/sample as a local bare repository."""
    bare = tmp_path / "remotes" / "acme" / "sample.git"
    bare.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "--bare", "--quiet", str(sample_repo), str(bare)], check=True)
    subprocess.run(["git", "-C", str(bare), "symbolic-ref", "HEAD", "refs/heads/main"], check=True)
    return bare


workers = workers_fixture  # two ``jury worker`` processes on the shared Redis (test_review's fixture)


def forge_env(forge: ForgeServer, tmp_path: Path, redis_url: str) -> dict[str, str]:
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://github.com/\n')
    return {
        "GIT_CONFIG_GLOBAL": str(gitconfig),
        "JURY_GITHUB_API": forge.github_api,
        "JURY_REDIS_URL": redis_url,
    }


def swept(r) -> dict[int, dict]:
    assert r.code == 0, r.out + r.err
    return {row["number"]: row for row in json.loads(r.out)["rows"]}


def wait_for(what: str, check, seconds: float = 120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    pytest.fail(f"not so after {seconds} s: {what}")


def test_sweep_enqueues_once_per_head_and_carries_what_was_settled(
    jury,
    workers,
    forge,
    remote,
    sample_repo,
    write_config,
    tmp_path,
) -> None:
    work = sample_repo
    buggy = git(work, "rev-parse", "feature")  # PR 1: the median bug, which the jury finds and fixes
    repo = forge.github_repo("acme/sample")
    heads = {1: buggy}
    for n in (2, 3, 4, 5):  # harmless changes: the finder finds nothing there
        heads[n] = commit_on(work, "main", f"note{n}.md", f"note {n}\n")
    for n, sha in heads.items():
        publish_pr(remote, work, n, sha)
    repo.add(FakePR(1, "median", buggy))
    repo.add(FakePR(2, "note 2", heads[2]))
    repo.add(FakePR(3, "a draft", heads[3], draft=True))
    repo.add(FakePR(4, "into release", heads[4], base="release"))
    repo.add(FakePR(5, "note 5", heads[5]))
    env = forge_env(forge, tmp_path, workers)
    config = standard_jury(write_config)
    args = ["sweep", "acme/sample", "--base", "main", "--reviewer", "finder,quiet", "--judge", "judge"]
    args += ["--config", str(config), "--json"]

    # the matching PRs get a run each: not the draft, not the one into another base
    first = swept(jury(*args, "--detach", env=env))
    assert sorted(first) == [1, 2, 5]
    assert {row["outcome"] for row in first.values()} == {"enqueued"}
    slugs = {n: row["slug"] for n, row in first.items()}
    assert len(set(slugs.values())) == 3

    # a second sweep enqueues nothing: every head has its run
    second = swept(jury(*args, "--detach", env=env))
    assert {n: row["outcome"] for n, row in second.items()} == {1: "skipped", 2: "skipped", 5: "skipped"}
    assert {n: row["slug"] for n, row in second.items()} == slugs
    assert all(("in flight" in r["reason"] or "converged" in r["reason"]) for r in second.values())

    # PR 1's run converges: the finder's median bug accepted with a fix
    store = from_url(workers)
    first_run = slugs[1]
    wait_for(f"{first_run} converged", lambda: store.run_states([first_run])[first_run] == "converged")
    settled = [e for e in store.read(first_run) if e.t == "finding.resolved" and e.verdict == "accepted"]
    assert settled, "the first run settled nothing"
    claim = next(e.claim for e in store.read(first_run) if e.t == "finding.raised" and e.id == settled[0].id)

    # PR 1 moves; a dry run says it would be enqueued and changes nothing
    moved = commit_on(work, buggy, "more.md", "more\n")
    publish_pr(remote, work, 1, moved)
    repo.prs[1].push(moved)
    client = redis.Redis.from_url(workers)
    claims = sorted(client.scan_iter(match="jury:sweep:*"))
    runs, active = store.runs(), store.active_runs()
    dry = swept(jury(*args, "--dry-run", env=env))
    assert dry[1]["outcome"] == "would enqueue" and dry[1]["carried_from"] == first_run
    assert {dry[2]["outcome"], dry[5]["outcome"]} == {"skipped"}
    # no claim, no run (the workers still finishing PRs 2 and 5 write keys of their own meanwhile)
    assert sorted(client.scan_iter(match="jury:sweep:*")) == claims and store.runs() == runs
    assert set(store.active_runs()) <= set(active)

    # the third sweep enqueues PR 1 only, and its run starts from what the first run settled
    third = swept(jury(*args, "--detach", env=env))
    assert {n: row["outcome"] for n, row in third.items()} == {1: "enqueued", 2: "skipped", 5: "skipped"}
    again = third[1]["slug"]
    assert again not in slugs.values() and third[1]["head"] == moved
    assert third[1]["carried_from"] == first_run and third[1]["carried"] == len(settled)
    log = store.read(again)
    (carried,) = [e for e in log if isinstance(e, RunCarried)]
    assert carried.from_run == first_run and carried.from_head == buggy
    assert [i.id for i in carried.items] == [f"{first_run}:{e.id}" for e in settled]
    start = wait_for(
        f"{again} round 1",
        lambda: next((e for e in store.read(again) if isinstance(e, RoundStart) and e.n == 1), None),
    )
    assert f"run {first_run}" in start.prompt
    assert f"{first_run}:{settled[0].id} [accepted] {claim}" in start.prompt
    shown = jury("show", again, env=env)
    assert f"carried over: {len(settled)} settled findings of run {first_run}" in shown.out, (
        shown.out + shown.err
    )


def test_a_hundred_prs_are_enqueued_by_one_process(
    jury, shared_redis, forge, remote, sample_repo, write_config, tmp_path
) -> None:
    """100 open PRs, --detach, no workers: one sweep enqueues every one (each run registered, logged
    and active), the next enqueues none. The wall time is printed (`pytest -s`), not asserted."""
    work = sample_repo
    repo = forge.github_repo("acme/sample")
    tree = git(work, "rev-parse", "feature^{tree}")
    heads = {n: git(work, "commit-tree", tree, "-p", "feature", "-m", f"pr {n}") for n in range(1, 101)}
    for n, sha in heads.items():
        repo.add(FakePR(n, f"pr {n}", sha))
    git(work, "push", "--quiet", str(remote), *(f"{sha}:refs/pull/{n}/head" for n, sha in heads.items()))
    env = forge_env(forge, tmp_path, shared_redis)
    args = ["sweep", "acme/sample", "--reviewer", "finder,quiet", "--judge", "judge", "--detach", "--json"]
    args += ["--config", str(standard_jury(write_config))]
    t0 = time.monotonic()
    r = jury(*args, env=env)
    wall = time.monotonic() - t0
    rows = swept(r)
    assert sorted(rows) == list(range(1, 101)) and {row["outcome"] for row in rows.values()} == {"enqueued"}
    assert all(row["head"] == heads[n] for n, row in rows.items())
    store = from_url(shared_redis)
    slugs = [row["slug"] for row in rows.values()]
    assert sorted(store.active_runs()) == sorted(slugs)
    assert all(len(store.read(slug)) == 2 for slug in slugs[::10])  # target and jury.config
    sweep_seconds = json.loads(r.out)["seconds"]
    print(f"\nsweep of 100 PRs: {sweep_seconds:.2f} s in the sweep, {wall:.2f} s for the whole command")
    again = swept(jury(*args, env=env))
    assert {row["outcome"] for row in again.values()} == {"skipped"}


def test_the_sweeps_options_reach_the_runs_it_starts(
    jury, shared_redis, forge, remote, sample_repo, write_config, tmp_path
) -> None:
    """No workers: each detached sweep's runs are read back from Redis. Drafts only with
    --include-drafts; --rounds, --budget, --publish, --push (or the operator's [jury] push, which
    --no-push overrides) and the refutation's options in each run's jury.config."""
    work = sample_repo
    repo = forge.github_repo("acme/sample")
    tree = git(work, "rev-parse", "feature^{tree}")
    heads = {n: git(work, "commit-tree", tree, "-p", "feature", "-m", f"pr {n}") for n in (1, 2)}
    git(work, "push", "--quiet", str(remote), *(f"{sha}:refs/pull/{n}/head" for n, sha in heads.items()))
    repo.add(FakePR(1, "ready", heads[1]))
    repo.add(FakePR(2, "a draft", heads[2], draft=True))
    env = forge_env(forge, tmp_path, shared_redis)
    config = write_config(
        fake_agent("finder", "find"), fake_agent("judge", "clean", "fix"), "[jury]\npush = true\n"
    )
    args = ["sweep", "acme/sample", "--reviewer", "finder", "--judge", "judge", "--config", str(config)]
    args += ["--detach", "--json"]
    store = from_url(shared_redis)

    def jury_config(slug: str) -> JuryConfig:
        (event,) = [e for e in store.read(slug) if isinstance(e, JuryConfigEvent)]
        return event.config

    first = swept(
        jury(*args, "--rounds", "3", "--budget", "1.5", "--publish", "--refute-rejections", env=env)
    )
    assert sorted(first) == [1]  # the draft is left out
    cfg = jury_config(first[1]["slug"])
    assert (cfg.rounds, cfg.budget, cfg.publish, cfg.push) == (3, 1.5, True, True)  # push: the file's
    assert (cfg.refute, cfg.refute_rejections) == (True, True)

    second = swept(jury(*args, "--include-drafts", "--rounds", "2", "--no-push", "--no-refute", env=env))
    assert {n: row["outcome"] for n, row in second.items()} == {1: "skipped", 2: "enqueued"}
    cfg = jury_config(second[2]["slug"])
    assert (cfg.rounds, cfg.budget, cfg.publish, cfg.push) == (2, None, False, False)
    assert (cfg.refute, cfg.refute_rejections) == (False, False)
    store.close()


@pytest.fixture
def git_worker(shared_redis, state_dir, fake_state, tmp_path, forge) -> Iterator[Path]:
    """One ``jury worker`` on the shared Redis that reaches github.com/acme/* as the local bare
    repositories (git's insteadOf, for its fetches and its pushes), with a token for the fake GitHub
    (a push asks it whether the PR's head is from the base repository); its log's path."""
    forge.user(PUSH_TOKEN, "jury-bot")
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://github.com/\n')
    env = outside_env()
    env.update(
        {
            "JURY_REDIS_URL": shared_redis,
            "JURY_DIR": str(state_dir),
            "FAKE_STATE": str(fake_state),
            "GIT_CONFIG_GLOBAL": str(gitconfig),
            "JURY_GITHUB_API": forge.github_api,
            "GITHUB_TOKEN": PUSH_TOKEN,
        }
    )
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        p = subprocess.Popen(
            [sys.executable, "-m", "jury_cli", "worker", "--concurrency", "2", "--loglevel", "WARNING"],
            env=env,
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    yield log
    stop_group(p)


def test_a_sweep_with_push_pushes_each_runs_branch_to_the_prs_repository(
    jury, shared_redis, git_worker, forge, remote, sample_repo, write_config, tmp_path
) -> None:
    """``jury sweep --push``: the run of PR 1 (the median bug, fixed by the judge) converges and its
    ``jury/<slug>`` branch is on the PR's repository at the fix; the PR's own ref is untouched."""
    buggy = git(sample_repo, "rev-parse", "feature")
    publish_pr(remote, sample_repo, 1, buggy)
    forge.github_repo("acme/sample").add(FakePR(1, "median", buggy))
    env = forge_env(forge, tmp_path, shared_redis)
    config = write_config(fake_agent("finder", "find"), fake_agent("judge", "clean", "fix"))
    args = ["sweep", "acme/sample", "--reviewer", "finder", "--judge", "judge", "--config", str(config)]
    rows = swept(jury(*args, "--push", "--detach", "--json", env=env))
    slug = rows[1]["slug"]
    store = from_url(shared_redis)
    ended = wait_for(
        f"{slug} ended",
        lambda: (s := fold(store.read(slug), slug)).state in TERMINAL_STATES and s,
        240,
    )
    assert ended.state == "converged", f"{ended.target.state_note}\n{git_worker.read_text()[-3000:]}"
    (fix,) = [c for c in ended.commits if not c.pushed]
    assert any(c.pushed and c.branch == f"jury/{slug}" for c in ended.commits)
    refs = git(remote, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/jury/")
    assert refs == f"refs/heads/jury/{slug} {fix.sha}"
    assert git(remote, "rev-parse", f"jury/{slug}~1") == buggy
    assert git(remote, "rev-parse", "refs/pull/1/head") == buggy  # never the PR's own branch
    store.close()


def test_a_json_sweep_that_enqueues_nothing_still_prints_its_report(
    jury, forge, write_config, tmp_path
) -> None:
    """Followed (no --detach, no --dry-run) with nothing to enqueue: the report is final at once, and a
    script reading ``--json`` gets it, never an empty output."""
    repo = forge.github_repo("acme/sample")
    repo.add(FakePR(1, "a draft", "d" * 40, draft=True))  # listed, skipped: no run
    env = {"JURY_GITHUB_API": forge.github_api}
    config = standard_jury(write_config)
    r = jury("sweep", "acme/sample", "--config", str(config), "--json", env=env)
    assert r.code == 0, r.out + r.err
    report = json.loads(r.out)
    assert report["rows"] == [] or all(row["outcome"] != "enqueued" for row in report["rows"])
