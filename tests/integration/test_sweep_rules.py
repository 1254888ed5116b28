"""The sweep's rules, in-process (``workers.fleet.sweep.sweep``) on the memory store: a GitLab project of the
fake forge (tests/fakes/forge_server.py) whose repository is a local bare one (git's ``insteadOf``), real
git; what is kicked is recorded. The fleet-wide path (real Redis, workers) is tests/e2e/test_sweep.py."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from orchestrator.config import load_settings
from orchestrator.decide import Emit, carry_over, decide, settled_items
from orchestrator.domain import (
    FindingRaised,
    FindingResolved,
    RunCancel,
    RunCarried,
    RunResumed,
    TargetEvent,
)
from orchestrator.fold import fold
from orchestrator.forge import ForgeSettings
from orchestrator.spec import Target
from orchestrator.start import RunOptions
from orchestrator.store.memory import MemoryStore
from tests.conftest import fake_agent
from tests.fakes.forge_server import FakePR, ForgeServer
from workers.fleet.sweep import SweepFilters, SweepOptions, SweepReport, sweep

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
    return sweep_with(server, store, kicked, opts, SweepFilters(labels=("jury",)), dry_run=dry_run)


def sweep_with(
    server: ForgeServer,
    store: MemoryStore,
    kicked: list[str],
    opts: SweepOptions,
    filters: SweepFilters,
    *,
    dry_run: bool = False,
) -> SweepReport:
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
        filters,
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


def test_a_moved_head_supersedes_the_run_still_in_flight(
    setup: tuple[ForgeServer, Path, str], sample_repo: Path, tmp_path: Path
) -> None:
    """PR 1's run is still queued when its head moves: the next sweep starts the new head's run and
    cancels the old one (the cancel flag, a run.cancel saying why, its coordinator kicked), and the old
    run ends with that reason. A sweep that cannot start the new head's run leaves the old one going."""
    server, config, feature = setup
    bare = tmp_path / "remotes" / f"{PROJECT}.git"
    store, kicked = MemoryStore(), list[str]()
    first = run(server, config, store, kicked)
    old = first.rows[0].slug
    assert old is not None and first.rows[0].superseded == []

    # the head moves on the forge, but its ref cannot be fetched: no new run, so the old one goes on
    identity = ["-c", "user.name=T", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    git = ["git", "-C", str(sample_repo), *identity]
    subprocess.run([*git, "checkout", "--quiet", "--detach", feature], check=True)
    (sample_repo / "more.md").write_text("more\n")
    subprocess.run([*git, "add", "more.md"], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "more"], check=True)
    moved = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    server.gitlab[PROJECT].prs[1].push(moved)
    subprocess.run(["git", "-C", str(bare), "update-ref", "-d", "refs/merge-requests/1/head"], check=True)
    failed = run(server, config, store, kicked)
    assert failed.rows[0].outcome == "error" and failed.rows[0].superseded == []
    assert not store.cancel_flagged(old) and not any(isinstance(e, RunCancel) for e in store.read(old))

    # a dry run says what it would cancel, and cancels nothing
    subprocess.run([*git, "push", "--quiet", str(bare), f"{moved}:refs/merge-requests/1/head"], check=True)
    dry = run(server, config, store, kicked, dry_run=True)
    assert dry.rows[0].outcome == "would enqueue" and dry.rows[0].superseded == [old]
    assert f"would cancel run {old}, in flight for an earlier head" in dry.rows[0].reason
    assert "would cancel 1" in dry.summary() and not store.cancel_flagged(old)

    before = list(kicked)
    second = run(server, config, store, kicked)
    row = second.rows[0]
    new = row.slug
    assert row.outcome == "enqueued" and row.head == moved and new not in (None, old)
    assert row.superseded == [old] and f"cancelled run {old}, in flight for an earlier head" in row.reason
    assert "cancelled 1" in second.summary()
    assert kicked == [*before, new, old]  # the new run's coordinator, then the old one's, to end it
    assert store.cancel_flagged(old) and not store.cancel_flagged(new)
    (cancel,) = [e for e in store.read(old) if isinstance(e, RunCancel)]
    reason = f"superseded by {new}: the PR's head moved to {moved}"
    assert (cancel.who, cancel.reason) == ("sweep", reason)
    (end,) = decide(fold(store.read(old), old))  # the old run's coordinator ends it, saying why
    assert isinstance(end, Emit) and isinstance(end.event, TargetEvent)
    assert (end.event.target.state, end.event.target.state_note) == ("cancelled", reason)

    # the next sweep finds the new head in flight and the old run ending: nothing more to do
    third = run(server, config, store, kicked)
    assert third.rows[0].outcome == "skipped" and third.rows[0].slug == new
    assert (
        third.rows[0].superseded == [] and len([e for e in store.read(old) if isinstance(e, RunCancel)]) == 1
    )

    # somebody resumes the superseded run (its flag comes down, a new epoch): the next sweep cancels it
    # again, with an event of that epoch (the first one's id would be dropped as a duplicate)
    resumed = Target(state="review", state_note=None)  # what `jury resume` appends (resume_events)
    store.append(
        old, [end.event, RunResumed(eid="resume:1", epoch=1), TargetEvent(eid="r:e1", target=resumed)]
    )
    store.clear_cancel_flag(old)
    fourth = run(server, config, store, kicked)
    assert fourth.rows[0].outcome == "skipped" and fourth.rows[0].superseded == [old]
    assert [e.eid for e in store.read(old) if isinstance(e, RunCancel)] == [
        f"cancel:superseded:{new}",
        f"cancel:superseded:{new}:e1",
    ]
    assert store.cancel_flagged(old)
    (again,) = decide(fold(store.read(old), old))
    assert isinstance(again, Emit) and isinstance(again.event, TargetEvent)
    assert (again.event.target.state, again.event.target.state_note) == ("cancelled", reason)


def test_two_sweeps_at_once_start_one_run_and_supersede_once(
    setup: tuple[ForgeServer, Path, str], sample_repo: Path, tmp_path: Path
) -> None:
    """Whatever their interleaving: the new head's claim is atomic, so one sweep starts its run and the
    other finds it; both name that run as the one that supersedes, so the old run gets one run.cancel."""
    server, config, feature = setup
    store, kicked = MemoryStore(), list[str]()
    old = run(server, config, store, kicked).rows[0].slug
    assert old is not None
    identity = ["-c", "user.name=T", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    git = ["git", "-C", str(sample_repo), *identity]
    moved = subprocess.run(
        [*git, "commit-tree", f"{feature}^{{tree}}", "-p", feature, "-m", "moved"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    bare = tmp_path / "remotes" / f"{PROJECT}.git"
    subprocess.run([*git, "push", "--quiet", str(bare), f"{moved}:refs/merge-requests/1/head"], check=True)
    server.gitlab[PROJECT].prs[1].push(moved)

    reports: list[SweepReport] = []
    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(run, server, config, store, list[str]()) for _ in range(2)]:
            reports.append(done.result(timeout=120))
    rows = [r.rows[0] for r in reports]
    assert sorted(r.outcome for r in rows) == ["enqueued", "skipped"]
    (new,) = {r.slug for r in rows}
    assert new is not None and new != old and [s for s in store.runs() if s not in (old, new)] == []
    (cancel,) = [e for e in store.read(old) if isinstance(e, RunCancel)]
    assert cancel.reason == f"superseded by {new}: the PR's head moved to {moved}"
    assert store.cancel_flagged(old) and not store.cancel_flagged(new)
    assert [s for r in rows for s in r.superseded] in ([old], [old, old])  # each one names it, at most


def test_sweeps_with_private_stores_on_one_dir_claim_their_slugs_in_it(
    setup: tuple[ForgeServer, Path, str], tmp_path: Path
) -> None:
    """Two embedded sweeps (each its own private store, so neither sees the other's runs) on one state
    directory: each slug is claimed in the directory, so the second sweep's run of the same head gets a
    slug of its own instead of writing into the first's record; a claim whose run did not start is
    given back."""
    from orchestrator.store.files import FileStore

    server, config, _ = setup
    files = FileStore(tmp_path / "state")
    opts = SweepOptions(run=RunOptions(reviewers="finder", judge="judge", config=config))
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
    slugs = []
    for _ in range(2):
        report = sweep(
            load_settings(),
            [f"gitlab:{PROJECT}"],
            SweepFilters(labels=("jury",)),
            opts,
            store=MemoryStore(),
            kick=lambda _: None,
            forge_settings=fs,
            claim_in=files,
        )
        (row,) = [r for r in report.rows if r.outcome == "enqueued"]
        slugs.append(row.slug)
    first, second = slugs
    assert first is not None and second == f"{first}-2", slugs
    assert sorted(files.runs()) == sorted([first, second])
