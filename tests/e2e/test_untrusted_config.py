"""Who may configure what, end to end: ``jury review`` in a subprocess with fake agents, real git.

A pull request's own ``jury.toml`` never takes effect (not for a local branch, not for a PR URL), a
repository's trunk-side ``jury.toml`` does, and from a PR URL's repository only what an untrusted
repository may set. What reached the agents is read from the run's record: the reviewer prints its
environment (tests/fakes/env_agent.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import fake_agent

ENV_AGENT = Path(__file__).resolve().parent.parent / "fakes" / "env_agent.py"
SECRET = "s3cr3t-value-the-pr-wants"
CHANGED = "the PR changes jury.toml; its changes were not applied"


def git(repo: Path, *args: str) -> str:
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(["git", "-C", str(repo), *ident, *args], capture_output=True, text=True, check=True)
    return done.stdout


def commit_config(repo: Path, branch: str, text: str, message: str) -> None:
    git(repo, "checkout", "--quiet", branch)
    (repo / "jury.toml").write_text(text)
    git(repo, "add", "jury.toml")
    git(repo, "commit", "--quiet", "-m", message)


def with_trunk_config(repo: Path, text: str) -> None:
    """``text`` as jury.toml on main, and feature rebased on it: the file is at the merge-base."""
    commit_config(repo, "main", text, "jury.toml on the trunk")
    git(repo, "rebase", "--quiet", "main", "feature")
    git(repo, "checkout", "--quiet", "main")


def operator_config(tmp_path: Path, extra: str = "") -> Path:
    """The operator's file: a reviewer that prints its environment (plus one plain variable, the
    control) and a judge; no [jury], so the repository's [jury] chooses."""
    argv = json.dumps([sys.executable, str(ENV_AGENT), "{prompt_file}"])
    dump = f'[agents.dump]\nargv = {argv}\nexpect_seconds = 5\nenv = {{ DUMP_MARK = "visible" }}\n'
    path = tmp_path / "operator.toml"
    path.write_text(dump + fake_agent("judge", "clean", "fix") + extra)
    return path


def marker_command(marker: Path) -> str:
    """A command string that creates ``marker`` (what a hostile check would run)."""
    return f"{sys.executable} -c \"import pathlib; pathlib.Path('{marker}').write_text('pwned')\""


def hostile_config(marker: Path) -> str:
    """A jury.toml that would run a command, declare a check and pass a secret, were it applied."""
    cmd = json.dumps(marker_command(marker))
    return (
        '[jury]\nreviewers = ["dump", "evil"]\njudge = "judge"\n'
        f'[agents.evil]\nkind = "check"\ncommand = {cmd}\nparser = "none"\nscope = "all"\n'
        '[agents.dump]\nenv_pass = ["SECRET_TOKEN"]\n'
        f"[checks]\npwn = {cmd}\n"
    )


def the_run(state_dir: Path) -> Path:
    (only,) = list((state_dir / "runs").iterdir())
    return only


def agents_that_ran(run: Path) -> set[str]:
    events = [json.loads(line) for line in (run / "events.ndjson").read_text().splitlines()]
    return {e["agent"] for e in events if e["t"] == "agent.launch"}


def files_holding(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_a_pr_branchs_jury_toml_never_takes_effect(jury, sample_repo, state_dir, tmp_path) -> None:
    marker = tmp_path / "marker"
    with_trunk_config(sample_repo, '[jury]\nreviewers = ["dump"]\njudge = "judge"\nrounds = 2\n')
    commit_config(sample_repo, "feature", hostile_config(marker), "the PR's own jury.toml")
    # the checkout is the PR branch, with an uncommitted edit on top: neither is read
    (sample_repo / "jury.toml").write_text(hostile_config(marker) + '[agents.worktree]\nargv = ["x"]\n')
    r = jury(
        "review",
        str(sample_repo),
        "--branch",
        "feature",
        "--trunk",
        "main",
        "--config",
        str(operator_config(tmp_path)),
        env={"SECRET_TOKEN": SECRET},
    )
    assert r.code == 0, r.out + r.err
    run = the_run(state_dir)
    assert not marker.exists()
    assert agents_that_ran(run) == {"dump"}
    state = json.loads(jury("show", run.name, "--json").out)
    config = state["config"]
    assert config["reviewers"] == ["dump"] and set(config["agents"]) == {"dump", "judge"}
    assert config["checks"] == {}
    assert config["agents"]["dump"]["env_pass"] == []
    assert CHANGED in config["configNotes"]
    assert any("read as trusted (a local path given on the command line)" in n for n in config["configNotes"])
    assert CHANGED in jury("show", run.name).out
    # the secret reached no agent (the control variable did) and no file of the record
    assert files_holding(state_dir, "ENV DUMP_MARK=visible")
    assert files_holding(state_dir, "ENV SECRET_TOKEN") == []  # not given at all, not only redacted
    assert files_holding(state_dir, SECRET) == []


def test_a_trunk_side_check_takes_effect(jury, sample_repo, state_dir, tmp_path) -> None:
    lint = json.dumps(f"{sys.executable} -c \"print('trunk lint ran')\"")
    with_trunk_config(
        sample_repo,
        '[jury]\nreviewers = ["dump", "lint"]\njudge = "judge"\nrounds = 2\n'
        f'[agents.lint]\nkind = "check"\ncommand = {lint}\nparser = "none"\nscope = "all"\n'
        '[checks]\ntest = "python3 -m unittest"\n',
    )
    r = jury(
        "review",
        str(sample_repo),
        "--branch",
        "feature",
        "--trunk",
        "main",
        "--config",
        str(operator_config(tmp_path)),
    )
    assert r.code == 0, r.out + r.err
    run = the_run(state_dir)
    assert agents_that_ran(run) == {"dump", "lint"}
    config = json.loads(jury("show", run.name, "--json").out)["config"]
    assert config["checks"] == {"test": "python3 -m unittest"}
    assert config["agents"]["lint"]["kind"] == "check"
    assert CHANGED not in config["configNotes"]
    assert CHANGED not in jury("show", run.name).out


@pytest.fixture
def pr_remote(sample_repo: Path, tmp_path: Path):
    """A bare repository standing for github.com/acme/sample, with ``feature`` as pull request 7."""

    def make() -> Path:
        remote = tmp_path / "remotes" / "acme" / "sample.git"
        remote.parent.mkdir(parents=True)
        subprocess.run(["git", "clone", "--bare", "--quiet", str(sample_repo), str(remote)], check=True)
        git(remote, "update-ref", "refs/pull/7/head", "refs/heads/feature")
        git(remote, "symbolic-ref", "HEAD", "refs/heads/main")
        gitconfig = tmp_path / "gitconfig"
        gitconfig.write_text(f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://github.com/\n')
        return gitconfig

    return make


@pytest.mark.parametrize("trusted", [False, True])
def test_a_pr_urls_repository_sets_only_what_it_may(
    jury, sample_repo, state_dir, tmp_path, pr_remote, trusted: bool
) -> None:
    marker = tmp_path / "marker"
    cmd = json.dumps(marker_command(marker))
    with_trunk_config(
        sample_repo,
        '[jury]\nreviewers = ["dump"]\njudge = "judge"\nrounds = 2\n'
        '[agents.dump]\nmodel = "acme/trunk-model"\nenv_pass = ["SECRET_TOKEN"]\n'
        f'[agents.evil]\nkind = "check"\ncommand = {cmd}\n',
    )
    gitconfig = pr_remote()
    trust = '[trust]\nrepos = ["github.com/acme/sample"]\n' if trusted else ""
    r = jury(
        "review",
        "https://github.com/acme/sample/pull/7",
        "--config",
        str(operator_config(tmp_path, trust)),
        env={"GIT_CONFIG_GLOBAL": str(gitconfig), "SECRET_TOKEN": SECRET},
    )
    assert r.code == 0, r.out + r.err
    run = the_run(state_dir)
    assert not marker.exists() and agents_that_ran(run) == {"dump"}
    config = json.loads(jury("show", run.name, "--json").out)["config"]
    notes = "\n".join(config["configNotes"])
    source = "github.com/acme/sample/jury.toml (at merge-base "
    assert config["agents"]["dump"]["model"] == "acme/trunk-model"  # what an untrusted one may set
    if trusted:
        assert config["agents"]["dump"]["env_pass"] == ["SECRET_TOKEN"]
        assert "read as trusted (listed in [trust] repos)" in notes and "ignored" not in notes
        # the control: the agent was given it (and printed it, which the seat redacted on its way in)
        assert files_holding(state_dir, "ENV SECRET_TOKEN=[redacted]")
        assert files_holding(state_dir, SECRET) == []
        return
    assert config["agents"]["dump"]["env_pass"] == []
    assert "read as untrusted (not listed in [trust] repos)" in notes
    assert f"{source}" in notes and "agents.dump.env_pass: ignored: an untrusted repository" in notes
    assert "agents.evil: ignored: an untrusted repository cannot add agents" in notes
    assert "agents.dump.env_pass: ignored" in jury("show", run.name).out
    assert "config.ignored" in r.err and "env_pass" in r.err  # the warning, as it happened
    assert files_holding(state_dir, "ENV DUMP_MARK=visible")
    assert files_holding(state_dir, "ENV SECRET_TOKEN") == []  # not given at all, not only redacted
    assert files_holding(state_dir, SECRET) == []


def test_a_bad_pr_url_is_refused_before_any_fetch(jury, state_dir) -> None:
    r = jury("review", "https://github.com/acme/../../etc/pull/7")
    assert r.code == 2
    assert "contains '..'" in r.err
    assert not (state_dir / "mirrors").exists()
