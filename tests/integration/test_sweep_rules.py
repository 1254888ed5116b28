"""The sweep's rules, in-process (``workers.sweep.sweep``) on the memory store: a GitLab project of the
fake forge (tests/fakes/forge_server.py) whose repository is a local bare one (git's ``insteadOf``), real
git; what is kicked is recorded. The fleet-wide path (real Redis, workers) is tests/e2e/test_sweep.py."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.config import load_settings
from orchestrator.decide import carry_over, settled_items
from orchestrator.domain import FindingRaised, FindingResolved, RunCarried
from orchestrator.fold import fold
from orchestrator.forge import ForgeSettings
from orchestrator.start import RunOptions
from orchestrator.store.memory import MemoryStore
from tests.conftest import fake_agent
from tests.fakes.forge_server import FakePR, ForgeServer
from workers.sweep import SweepFilters, SweepOptions, SweepReport, sweep

PROJECT = "acme/sub/app"


@pytest.fixture
def setup(
    sample_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ForgeServer, Path, str]]:
    bare = tmp_path / "remotes" / f"{PROJECT}.git"
    bare.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "--bare", "--quiet", str(sample_repo), str(bare)], check=True)
    feature = subprocess.run(
        ["git", "-C", str(sample_repo), "rev-parse", "feature"], capture_output=True, text=True, check=True
    ).stdout.strip()
    for n in (1, 2):
        subprocess.run(
            ["git", "-C", str(bare), "update-ref", f"refs/merge-requests/{n}/head", feature], check=True
        )
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://gitlab.com/\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("JURY_DIR", str(tmp_path / "state"))
    config = tmp_path / "jury.toml"
    config.write_text("\n".join([fake_agent("finder", "find"), fake_agent("judge", "clean", "fix")]))
    with ForgeServer() as server:
        project = server.gitlab_project(PROJECT)
        project.add(FakePR(1, "labelled", feature, labels=["jury"]))
        project.add(FakePR(2, "not labelled", feature))
        project.add(FakePR(3, "closed meanwhile: its ref is gone", "e" * 40, labels=["jury"]))
        yield server, config, feature


def run(
    server: ForgeServer,
    config: Path,
    store: MemoryStore,
    kicked: list[str],
    *,
    dry_run: bool = False,
    retry: bool = False,
) -> SweepReport:
    opts = SweepOptions(run=RunOptions(reviewers="finder", judge="judge", config=config), retry=retry)
    fs = ForgeSettings.model_construct(
        github_api="http://127.0.0.1:9/none",
        gitlab_api=server.gitlab_api,
        github_token=None,
        gitlab_token=None,
        github_login=None,
        github_checks="auto",
        gitlab_auth="private-token",
        max_wait=0,
        retries=0,
    )
    return sweep(
        load_settings(),
        [f"gitlab:{PROJECT}"],
        SweepFilters(labels=("jury",)),
        opts,
        store=store,
        kick=kicked.extend,
        forge_settings=fs,
        dry_run=dry_run,
    )


def test_gitlab_labels_dry_run_and_retry(setup: tuple[ForgeServer, Path, str]) -> None:
    server, config, feature = setup
    store, kicked = MemoryStore(), list[str]()
    dry = run(server, config, store, kicked, dry_run=True)
    assert [(r.number, r.outcome) for r in dry.rows] == [(1, "would enqueue"), (3, "would enqueue")]
    assert store.runs() == [] and kicked == []  # a dry run changes nothing

    first = run(server, config, store, kicked)
    row, gone = first.rows
    # the PR whose ref cannot be fetched fails alone, saying why; the other is enqueued
    assert (gone.number, gone.outcome, gone.slug) == (3, "error", None) and "cannot fetch" in gone.reason
    assert (row.repo, row.number, row.outcome, row.head) == (f"gitlab:{PROJECT}", 1, "enqueued", feature)
    slug = row.slug
    assert slug is not None and kicked == [slug] and store.active_runs() == [slug]
    state = fold(store.read(slug))
    assert (
        state.target.url == f"https://gitlab.com/{PROJECT}/-/merge_requests/1"
        and state.target.trunk == "main"
    )

    # the run ended human: not run again, unless asked
    store.write_state(slug, {"target": {"state": "human"}})
    again = run(server, config, store, kicked)
    assert again.rows[0].outcome == "skipped" and "--retry" in again.rows[0].reason
    retried = run(server, config, store, kicked, retry=True)
    retry_slug = retried.rows[0].slug
    assert retried.rows[0].outcome == "enqueued" and f"retries run {slug}" in retried.rows[0].reason
    assert retry_slug is not None and retry_slug != slug and len(kicked) == 2
    # a converged run is never retried
    store.write_state(retry_slug, {"target": {"state": "converged"}})
    last = run(server, config, store, kicked, retry=True)
    assert last.rows[0].outcome == "skipped" and last.rows[0].reason.startswith("converged")


def test_carry_over_chains_and_names_the_run() -> None:
    earlier = fold(
        [
            RunCarried(eid="carried:0", from_run="run-0", items=[]),
            FindingRaised(eid="r1", id="r1-a-1", round=1, agent="a", claim="off by one", loc="x.py:3"),
            FindingRaised(eid="r2", id="r1-a-2", round=1, agent="a", claim="still open", loc="x.py:9"),
            FindingResolved(eid="v1", id="r1-a-1", verdict="rejected", reason="not a bug", who="judge"),
        ],
        "run-1",
    )
    items = carry_over(earlier)
    assert [(i.id, i.verdict) for i in items] == [("run-1:r1-a-1", "rejected")]  # open findings stay behind
    later = fold([RunCarried(eid="carried:0", from_run="run-1", items=items)], "run-2")
    assert later.carried_from == "run-1"
    assert [s.id for s in settled_items(later)] == ["run-1:r1-a-1"]
    assert [i.id for i in carry_over(later)] == ["run-1:r1-a-1"]  # carried on by the next run
