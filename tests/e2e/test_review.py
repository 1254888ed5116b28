"""The CLI in a subprocess, end to end: embedded Redis and local workers, or a shared Redis and
``jury worker`` processes; real git, fake agent scripts (tests/fakes/agent.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.domain import parse_event
from orchestrator.fold import apply, fold, restore, snapshot
from orchestrator.run_json import run_json
from tests.conftest import fake_agent, outside_env

CODEJURY_VOCABULARY = {
    "target",
    "round.start",
    "agent.launch",
    "agent.alive",
    "agent.chunk",
    "agent.report",
    "finding.raised",
    "finding.reproduced",
    "finding.resolved",
    "finding.turn",
    "judge.session",
    "commit.pushed",
    "reply.sent",
    "reply.answered",
    "round.end",
}
JURY_ADDITIONS = {
    "jury.config",
    "action.dispatched",
    "action.done",
    "finding.refused",
    "finding.reopened",
    "agent.wrote",
    "run.resumed",
    "run.cancel",
    "verify.ran",
    "verify.table",
    "refute.verdict",
    "refute.skipped",
    "budget.reserved",
    "budget.spent",
    "budget.refused",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def run_dir(state_dir: Path) -> Path:
    (only,) = list((state_dir / "runs").iterdir())
    return only


def events_of(d: Path) -> list[dict]:
    return [json.loads(line) for line in (d / "events.ndjson").read_text().splitlines()]


def standard_jury(write_config, judge_mode: str = "fix", finder: str = "find"):
    return write_config(
        fake_agent("finder", finder), fake_agent("quiet", "clean"), fake_agent("judge", "clean", judge_mode)
    )


def review_args(repo: Path, config: Path, *extra: str) -> list[str]:
    return [
        "review",
        str(repo),
        "--branch",
        "feature",
        "--trunk",
        "main",
        "--reviewer",
        "finder,quiet",
        "--judge",
        "judge",
        "--config",
        str(config),
        *extra,
    ]


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def marked(marker: str) -> list[int]:
    """Live host pids whose command line holds ``marker`` (pids inside a sandbox mean nothing here)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and marker.encode() in (entry / "cmdline").read_bytes()
                and alive(int(entry.name))
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_demo_converges(jury, state_dir: Path) -> None:
    r = jury("demo")
    assert r.code == 0, r.out + r.err
    assert "SCRIPTED" in r.out
    doc = json.loads((run_dir(state_dir) / "run.json").read_text())
    assert doc["target"]["state"] == "converged"


def test_review_converges_with_a_fix_on_the_jury_branch(jury, sample_repo, write_config, state_dir) -> None:
    before = git(sample_repo, "rev-parse", "feature")
    r = jury(*review_args(sample_repo, standard_jury(write_config)))
    assert r.code == 0, r.out + r.err
    d = run_dir(state_dir)
    slug = d.name
    # the judge's fix and its regression test are committed on jury/<slug>
    files = git(sample_repo, "show", "--name-only", "--format=", f"jury/{slug}").split()
    assert sorted(files) == ["stats.py", "tests/test_median.py"]
    assert "ordered[middle - 1]" in git(sample_repo, "show", f"jury/{slug}:stats.py")
    assert git(sample_repo, "rev-parse", "feature") == before  # without --push the reviewed branch stays
    # the log speaks codejury's vocabulary (plus Jury's few additions), and run.json is its fold
    events = events_of(d)
    kinds = {e["t"] for e in events}
    assert kinds <= CODEJURY_VOCABULARY | JURY_ADDITIONS
    assert {
        "round.start",
        "agent.report",
        "finding.raised",
        "finding.resolved",
        "reply.sent",
        "round.end",
        "commit.pushed",
    } <= kinds
    assert all("ts" in e and "t" in e for e in events)
    parsed = [parse_event(e) for e in events]
    assert None not in parsed
    assert json.loads((d / "run.json").read_text()) == json.loads(json.dumps(run_json(fold(parsed, slug))))
    # a snapshot of the fold at any point of this real log, plus the events after it, folds to the whole log
    real = [e for e in parsed if e is not None]
    whole = fold(real, slug).model_dump(mode="json")
    for cut in range(len(real) + 1):
        doc = json.loads(json.dumps(snapshot(fold(real[:cut], slug), str(cut), "log")))
        restored = restore(doc, "log")
        assert restored is not None
        for e in real[cut:]:
            apply(restored[0], e)
        assert restored[0].model_dump(mode="json") == whole, f"cut at {cut}"
    assert (d / "round-1.finder.stdout.txt").exists()
    # no worktree is left behind
    assert len(git(sample_repo, "worktree", "list").splitlines()) == 1
    shown = jury("show", slug)
    assert "converged" in shown.out and "accepted" in shown.out
    listed = jury("runs")
    assert f"{slug}  converged  rounds=2  findings=1  open=0" in listed.out


def test_push_moves_the_reviewed_branch(jury, sample_repo, write_config) -> None:
    before = git(sample_repo, "rev-parse", "feature").strip()
    r = jury(*review_args(sample_repo, standard_jury(write_config), "--push"))
    assert r.code == 0, r.out + r.err
    after = git(sample_repo, "rev-parse", "feature").strip()
    assert after != before
    assert git(sample_repo, "merge-base", "--is-ancestor", before, after) == ""


def test_timeout_kills_the_group_ends_human_and_resume_converges(
    jury, sample_repo, write_config, state_dir, fake_state
) -> None:
    config = write_config(
        fake_agent("finder", "find"), fake_agent("quiet", "hang-once"), fake_agent("judge", "clean", "fix")
    )
    r = jury(*review_args(sample_repo, config, "--timeout", "3"))
    assert r.code == 1, r.out + r.err
    slug = run_dir(state_dir).name
    shown = jury("show", slug)
    assert "human" in shown.out and "reviewer quiet could not run in round 1: timed out" in shown.out
    marker = (fake_state / "marker").read_text()
    assert not marked(marker), "the hung agent or its child survived"

    resumed = jury("review", "--resume", slug)
    assert resumed.code == 0, resumed.out + resumed.err
    state = json.loads(jury("show", slug, "--json").out)
    assert state["target"]["state"] == "converged"
    assert state["epoch"] == 1


@pytest.mark.parametrize(
    ("judge_mode", "why"),
    [
        ("garbage", "no JSON object with a verdict key"),
        ("noproof", "accepted without a reproduction"),
    ],
)
def test_a_judge_answer_jury_cannot_take_leaves_the_finding_open(
    jury, sample_repo, write_config, state_dir, judge_mode, why
) -> None:
    r = jury(*review_args(sample_repo, standard_jury(write_config, judge_mode=judge_mode)))
    assert r.code == 1, r.out + r.err
    slug = run_dir(state_dir).name
    shown = jury("show", slug)
    assert "human" in shown.out and "open" in shown.out and why in shown.out
    state = json.loads(jury("show", slug, "--json").out)
    (finding,) = state["findings"].values()
    assert finding["status"] == "open"
    assert len(finding["refusals"]) == 2 and why in finding["refusals"][0]
    assert state["commits"] == []
    assert git(sample_repo, "branch", "--list", f"jury/{slug}") == ""


def test_contested_three_times_is_deferred(jury, sample_repo, write_config, state_dir) -> None:
    config = write_config(
        fake_agent("finder", "contest"), fake_agent("quiet", "clean"), fake_agent("judge", "clean", "reject")
    )
    r = jury(*review_args(sample_repo, config, "--rounds", "1"))
    state = json.loads(jury("show", run_dir(state_dir).name, "--json").out)
    (finding,) = state["findings"].values()
    assert finding["status"] == "deferred"
    assert finding["contests"] == 3
    assert "contested 3 times" in finding["reason"]
    assert r.code == 1  # one round only, and the finder still finds the bug: the round cap ends it


def test_config_error_names_file_agent_and_key(jury, sample_repo, tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[agents.finder]\nargv = ["x", "{prompt}"]\nreportt = "whole"\n')
    r = jury("review", str(sample_repo), "--branch", "feature", "--config", str(bad))
    assert r.code == 2
    assert "bad.toml" in r.err and "agents.finder" in r.err and "reportt" in r.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["review"], "name what to review"),
        (["review", "/nonexistent/repo"], "no such directory"),
        (["review", "{repo}", "--branch", "nope"], "branch 'nope' not found"),
        (["review", "{repo}", "--branch", "main", "--trunk", "main"], "nothing to review"),
        (["review", "--resume", "no-such-run"], "no run named no-such-run"),
        (["show", "no-such-run"], "no run named no-such-run"),
        (["review", "https://example.com/not-a-pr"], "not a pull/merge request URL"),
    ],
)
def test_usage_errors_exit_2(jury, sample_repo, args, message) -> None:
    r = jury(*[a.replace("{repo}", str(sample_repo)) for a in args])
    assert r.code == 2, r.out + r.err
    assert message in r.err


def test_runs_lists_an_unreadable_run_as_skipped(jury, sample_repo, write_config, state_dir) -> None:
    assert jury(*review_args(sample_repo, standard_jury(write_config))).code == 0
    broken = state_dir / "runs" / "broken-run"
    broken.mkdir()
    (broken / "events.ndjson").write_text("{not json\n")
    out = jury("runs").out
    assert "broken-run  skipped" in out
    assert "converged" in out


def test_agents_lists_the_catalog(jury) -> None:
    r = jury("agents")
    assert r.code == 0
    for name in (
        "codex",
        "claude",
        "gemini",
        "opencode",
        "qwen",
        "copilot",
        "cursor",
        "amp",
        "grok",
        "kimi",
        "droid",
    ):
        assert name in r.out


@pytest.fixture
def workers(shared_redis: str, state_dir: Path, fake_state: Path, tmp_path: Path) -> Iterator[str]:
    """Two ``jury worker`` processes on the shared Redis, stopped after the test."""
    env = outside_env()
    env.update({"JURY_REDIS_URL": shared_redis, "JURY_DIR": str(state_dir), "FAKE_STATE": str(fake_state)})
    procs = []
    for i in range(2):
        log = open(tmp_path / f"worker-{i}.log", "wb")
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "jury_cli",
                    "worker",
                    "--concurrency",
                    "2",
                    "--loglevel",
                    "WARNING",
                ],
                env=env,
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        log.close()
    yield shared_redis
    for p in procs:
        os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def test_shared_redis_with_separate_workers(jury, workers, sample_repo, write_config, state_dir) -> None:
    env = {"JURY_REDIS_URL": workers}
    r = jury(*review_args(sample_repo, standard_jury(write_config)), env=env)
    assert r.code == 0, r.out + r.err
    assert "embedded" not in r.out
    slug = run_dir(state_dir).name
    assert f"{slug}  converged" in jury("runs", env=env).out
    assert json.loads(jury("show", slug, "--json", env=env).out)["target"]["state"] == "converged"
    # --detach returns at once with the slug; the workers finish the run
    sample = sample_repo
    subprocess.run(["git", "-C", str(sample), "branch", "-f", "feature2", "feature"], check=True)
    d = jury(
        "review",
        str(sample),
        "--branch",
        "feature2",
        "--trunk",
        "main",
        "--reviewer",
        "finder,quiet",
        "--judge",
        "judge",
        "--config",
        str(standard_jury(write_config)),
        "--detach",
        env=env,
    )
    assert d.code == 0, d.err
    slug2 = d.out.strip()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        state = json.loads(jury("show", slug2, "--json", env=env).out)
        if state["target"].get("state") == "converged":
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"detached run did not converge: {state['target']}")


def remote_head(repo: Path, ref: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "rev-parse", ref], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_pr_url_is_fetched_with_git(jury, sample_repo, write_config, tmp_path) -> None:
    remote = tmp_path / "remotes" / "acme" / "sample.git"
    remote.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "--bare", "--quiet", str(sample_repo), str(remote)], check=True)
    subprocess.run(
        ["git", "-C", str(remote), "update-ref", "refs/pull/7/head", "refs/heads/feature"], check=True
    )
    subprocess.run(["git", "-C", str(remote), "symbolic-ref", "HEAD", "refs/heads/main"], check=True)
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://github.com/\n')
    r = jury(
        "review",
        "https://github.com/acme/sample/pull/7",
        "--reviewer",
        "finder,quiet",
        "--judge",
        "judge",
        "--config",
        str(standard_jury(write_config)),
        env={"GIT_CONFIG_GLOBAL": str(gitconfig)},
    )
    assert r.code == 0, r.out + r.err
    assert "sample-7-" in r.out
    # its fixes, in a fresh clone, from this host's record and mirror (the embedded Redis is gone)
    slug = next(w for w in r.out.split() if w.startswith("sample-7-"))
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(remote), str(clone)], check=True)
    f = jury("fetch", slug, "--into", str(clone), env={"GIT_CONFIG_GLOBAL": str(gitconfig)})
    assert f.code == 0, f.out + f.err
    tip = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", f"jury/{slug}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert f"jury/{slug} at {tip[:12]}" in f.out and tip != remote_head(remote, "refs/pull/7/head")
