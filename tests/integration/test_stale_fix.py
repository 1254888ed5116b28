"""A fix that no longer applies to the run's tree is triaged again, twice at most, then deferred.

Real Redis, real git and the real coordinator (``workers.runtime.coordinator.coordinate``: fold, decide,
integrate the accepted patches, dispatch); the judge's triage tasks are played by appending the events the
triage job appends (its verdict with the patch stored as an artifact, then ``action.done``), and ``send`` only
records what was dispatched. Two findings are fixed on the same line: the first fix lands, so the
second one's patch, made against the PR head, no longer applies on the new tip.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import redis

from orchestrator.config import Settings
from orchestrator.domain import (
    ActionDispatched,
    ActionDone,
    AgentReport,
    Event,
    FindingRaised,
    FindingResolved,
    JuryConfigEvent,
    RoundStart,
    TargetEvent,
)
from orchestrator.fold import RunState
from orchestrator.spec import AgentSpec, JuryConfig, Target
from orchestrator.store.files import FileStore
from orchestrator.store.redis import RedisStore
from workers.runtime import coordinator
from workers.runtime.context import Runtime, jury_branch

SLUG = "sample-stale-1"
BUG = "    return ordered[middle]\n"
SPEC = AgentSpec(name="x", argv=["x", "{prompt}"], judge_argv=["x", "{prompt}"])


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def patch_of(repo: Path, tmp: Path, name: str, new_line: str) -> bytes:
    """A patch against the feature head replacing the buggy line with ``new_line`` (real ``git diff``)."""
    clone = tmp / f"clone-{name}"
    git(repo, "worktree", "add", "--quiet", "--detach", str(clone), "feature")
    stats = clone / "stats.py"
    stats.write_text(stats.read_text().replace(BUG, new_line))
    diff = subprocess.run(
        ["git", "-C", str(clone), "diff", "--binary"], capture_output=True, check=True
    ).stdout
    git(repo, "worktree", "remove", "--force", str(clone))
    assert diff, "the clone's edit made no patch"
    return diff


class Sent:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def __call__(self, kind: str, slug: str, key: str) -> None:
        self.keys.append(key)


@pytest.fixture
def rt(client: redis.Redis, prefix: str, tmp_path: Path) -> tuple[Runtime, Sent]:
    sent = Sent()
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    runtime = Runtime(
        settings=Settings(dir=state_dir),
        store=RedisStore(client, prefix=prefix),
        files=FileStore(state_dir),
        send=sent,
        kick=lambda _slug: None,
    )
    return runtime, sent


def reviewed(repo: Path) -> list[Event]:
    """The run up to the end of round 1's reviews: reviewer ``a`` raised f1 and f2 (two findings, not
    duplicates, whose fixes touch the same line)."""
    head = git(repo, "rev-parse", "feature").strip()
    base = git(repo, "merge-base", "main", "feature").strip()
    cfg = JuryConfig(reviewers=["a"], judge="j", agents={"a": SPEC, "j": SPEC}, verify=False)
    key = "review:r1:a"
    return [
        TargetEvent(
            eid="target:0",
            target=Target(
                repo="sample",
                path=str(repo),
                branch="feature",
                trunk="main",
                head=head,
                base=base,
                state="review",
            ),
        ),
        JuryConfigEvent(eid="config:0", config=cfg),
        RoundStart(eid="round.start:1", n=1, sha=head, prompt="review"),
        ActionDispatched(eid=f"dispatch:{key}", key=key, kind="review", round=1, agent="a", sha=head),
        AgentReport(eid=f"{key}:report", agent="a", round=1, verdict="found", seconds=1.0),
        FindingRaised(
            eid="raised:f1", id="f1", round=1, agent="a", claim="median of even lists", loc="stats.py:9"
        ),
        FindingRaised(
            eid="raised:f2", id="f2", round=1, agent="a", claim="an unexplained return", loc="stats.py:12"
        ),
        ActionDone(eid=f"{key}:done", key=key),
    ]


def judge_accepts(rt: Runtime, key: str, fid: str, patch: bytes) -> None:
    """What the triage job appends for an accepted, verified fix: the verdict with its stored patch."""
    name = f"patches/{fid}.{key.rsplit(':', 1)[1]}.patch"
    rt.store.put_artifact(SLUG, name, patch)
    rt.store.append(
        SLUG,
        [
            FindingResolved(
                eid=f"{key}:resolved",
                id=fid,
                verdict="accepted",
                reason="fixed",
                who="j",
                test="a regression test",
                test_command="python3 -m unittest tests.test_stats",
                patch=name,
            ),
            ActionDone(eid=f"{key}:done", key=key),
        ],
    )


def dispatched_sha(state: RunState, key: str) -> str | None:
    return state.actions[key].sha


def test_a_stale_fix_is_triaged_again_twice_then_deferred(
    rt: tuple[Runtime, Sent], sample_repo: Path, tmp_path: Path
) -> None:
    runtime, sent = rt
    fixed = patch_of(sample_repo, tmp_path, "f1", "    return ordered[middle]  # fixed by f1\n")
    stale = patch_of(sample_repo, tmp_path, "f2", "    return ordered[middle]  # fixed by f2\n")
    runtime.store.append(SLUG, reviewed(sample_repo))
    coordinator.coordinate(runtime, SLUG)
    assert sent.keys == ["triage:f1:1", "triage:f2:1"]

    judge_accepts(runtime, "triage:f1:1", "f1", fixed)
    judge_accepts(runtime, "triage:f2:1", "f2", stale)
    state = coordinator.coordinate(runtime, SLUG)
    # f1 landed; f2's patch no longer applies on the new tip: it is triaged again, against that tip
    assert [c.finding for c in state.commits] == ["f1"]
    assert sent.keys[-1] == "triage:f2:2" and dispatched_sha(state, "triage:f2:2") == state.tip
    assert state.findings["f2"].status == "open" and state.findings["f2"].stale == 1
    assert "no longer applies" in state.findings["f2"].reason

    judge_accepts(runtime, "triage:f2:2", "f2", stale)  # the judge hands in the same stale patch again
    state = coordinator.coordinate(runtime, SLUG)
    assert sent.keys[-1] == "triage:f2:3" and state.findings["f2"].stale == 2

    judge_accepts(runtime, "triage:f2:3", "f2", stale)
    state = coordinator.coordinate(runtime, SLUG)
    f2 = state.findings["f2"]
    assert f2.status == "deferred" and f2.who == "jury"
    assert f2.reason == "its fix did not apply to the run's tree 3 times (triaged again 2)"
    assert [k for k in sent.keys if k.startswith("triage:")] == [
        "triage:f1:1",
        "triage:f2:1",
        "triage:f2:2",
        "triage:f2:3",
    ]
    # nothing of f2 reached the jury branch: it holds f1's fix alone, on the PR head
    branch = jury_branch(SLUG)
    assert git(sample_repo, "rev-parse", branch).strip() == state.tip == state.commits[-1].sha
    assert git(sample_repo, "rev-parse", f"{branch}~1").strip() == state.target.head
    assert "# fixed by f1" in git(sample_repo, "show", f"{branch}:stats.py")
    assert "# fixed by f2" not in git(sample_repo, "show", f"{branch}:stats.py")


def test_a_fresh_patch_on_the_new_tip_lands_after_a_stale_one(
    rt: tuple[Runtime, Sent], sample_repo: Path, tmp_path: Path
) -> None:
    runtime, sent = rt
    fixed = patch_of(sample_repo, tmp_path, "f1", "    return ordered[middle]  # fixed by f1\n")
    stale = patch_of(sample_repo, tmp_path, "f2", "    return ordered[middle]  # fixed by f2\n")
    runtime.store.append(SLUG, reviewed(sample_repo))
    coordinator.coordinate(runtime, SLUG)
    judge_accepts(runtime, "triage:f1:1", "f1", fixed)
    judge_accepts(runtime, "triage:f2:1", "f2", stale)
    state = coordinator.coordinate(runtime, SLUG)
    assert sent.keys[-1] == "triage:f2:2"

    # re-triaged against the tip that has f1, the judge makes its patch there: it applies
    clone = tmp_path / "clone-fresh"
    git(sample_repo, "worktree", "add", "--quiet", "--detach", str(clone), state.tip or "")
    stats = clone / "stats.py"
    stats.write_text(stats.read_text().replace("# fixed by f1\n", "# fixed by f1, and by f2\n"))
    fresh = subprocess.run(
        ["git", "-C", str(clone), "diff", "--binary"], capture_output=True, check=True
    ).stdout
    git(sample_repo, "worktree", "remove", "--force", str(clone))
    judge_accepts(runtime, "triage:f2:2", "f2", fresh)
    state = coordinator.coordinate(runtime, SLUG)
    assert [c.finding for c in state.commits] == ["f1", "f2"]
    assert state.findings["f2"].status == "accepted" and state.findings["f2"].stale == 1
    assert "# fixed by f1, and by f2" in git(sample_repo, "show", f"{jury_branch(SLUG)}:stats.py")
