"""A new run's slug is claimed in the state directory, atomically, before anything is written: processes
started together on one directory asking for the same slug each get a different one; a claim nothing was
written under is given back; and a run's checkouts are named by its unique run id, so two runs whose
slugs meet never take each other's checkout for a stale one."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from orchestrator.domain import JuryConfigEvent, TargetEvent
from orchestrator.fold import RunState, fold
from orchestrator.spec import JuryConfig, Target
from orchestrator.start import first_events
from orchestrator.store.files import FileStore
from workers.isolation.names import run_key

CLAIMERS = 4


def _claim(root: str, barrier: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue) -> None:
    barrier.wait(timeout=60)
    out.put(FileStore(Path(root)).claim("calc-feature-20261207-2106"))


def test_processes_claiming_one_slug_together_each_get_their_own(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(CLAIMERS), ctx.Queue()
    procs = [ctx.Process(target=_claim, args=(str(tmp_path), barrier, out)) for _ in range(CLAIMERS)]
    for p in procs:
        p.start()
    got = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert len(set(got)) == CLAIMERS, got
    assert set(got) == {
        "calc-feature-20261207-2106",
        *(f"calc-feature-20261207-2106-{i}" for i in range(2, 5)),
    }
    assert all((tmp_path / "runs" / slug / "events.ndjson").is_file() for slug in got)


def test_a_claim_nothing_was_written_under_is_given_back_and_a_run_never(tmp_path: Path) -> None:
    files = FileStore(tmp_path)
    empty, begun = files.claim("calc-feature-x"), files.claim("calc-feature-x")
    assert (empty, begun) == ("calc-feature-x", "calc-feature-x-2")
    files.append(begun, [TargetEvent(eid="target:0", target=Target(repo="calc"))])
    files.unclaim(empty)
    files.unclaim(begun)
    assert not (tmp_path / "runs" / empty).exists()
    assert [e.eid for e in files.read(begun)] == ["target:0"]
    assert files.claim("calc-feature-x") == "calc-feature-x"  # free again


def test_each_run_gets_a_unique_id_that_names_its_checkouts() -> None:
    jury = JuryConfig(reviewers=["a"], judge="b", rounds=1, agents={})
    ids = set()
    keys = set()
    for _ in range(50):
        events = first_events(Target(repo="calc", id="feature"), jury)
        state = fold([*events], "calc-feature-20261207-2106")
        assert isinstance(events[1], JuryConfigEvent)
        assert state.target.run_id
        ids.add(state.target.run_id)
        keys.add(run_key(state))
    assert len(ids) == 50 and len(keys) == 50
    assert all(k.startswith("calc-feature-20261207-2106.") for k in keys)
    assert run_key(RunState(slug="old-run")) == "old-run"  # a run recorded before run ids: its slug


class Host:
    """What ``agent_worktree`` asks of its runtime: the host's checkouts and the run's repository."""

    def __init__(self, state_dir: Path, repo: Path) -> None:
        from workers.isolation.worktree import Worktrees

        self.worktrees = Worktrees(state_dir / "worktrees")
        self.repo_path = repo

    def repo(self, slug: str, target: Target, shas: object = ()) -> Path:
        return self.repo_path


def test_two_runs_of_one_slug_never_take_each_others_checkout_for_a_stale_one(tmp_path: Path) -> None:
    """A run's checkout was named ``<slug>.<key>.<holder>``, and each new one removed the others of its
    ``<slug>.<key>`` as a dead holder's: a run of the same slug (another command's) lost its checkout
    while its agent worked in it. Named by the run id, the other run's checkout stays."""
    from orchestrator.demo import make_sample_repo
    from orchestrator.fold import DispatchedAction
    from workers.isolation.worktree import rev_parse
    from workers.runtime.context import Job, agent_worktree

    repo = make_sample_repo(tmp_path / "src")
    sha = rev_parse(repo, "feature")
    host = Host(tmp_path / "state", repo)
    action = DispatchedAction(key="review:r1:finder", kind="review", agent="finder", round=1, sha=sha)

    def job(run_id: str) -> Job:
        state = RunState(slug="calc-feature-20261207-2106")
        state.target = Target(repo="calc", path=str(repo), run_id=run_id)
        return Job(slug=state.slug, state=state, action=action)

    with agent_worktree(host, job("aaaaaaaaaaaa"), sha) as first:  # type: ignore[arg-type]
        assert (first / "stats.py").is_file()
        with agent_worktree(host, job("bbbbbbbbbbbb"), sha) as second:  # type: ignore[arg-type]
            assert second != first
            assert (first / "stats.py").is_file(), "the other run's checkout was removed as stale"
