"""A jury of HTTP models and a check agent, end to end through ``jury review`` (embedded Redis, local
workers, real git): the models are scripted brains (``tests/fakes/scripted_models.py``) behind a real
local chat-completions server (``tests/fakes/chat_server.py``) that decide every turn from the tool
results they get back, like real models do."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import RepoFile, config_dir, load_config, resolve_jury
from orchestrator.demo import IDENTITY
from tests.fakes.chat_server import ChatServer, status
from tests.fakes.scripted_models import ScriptedModel, always, with_key
from workers.agents.tools import call_tool

KEY_ENV = "SCRIPTED_MODEL_KEY"
SECRET = "sk-scripted-" + secrets.token_hex(12)
RUFF = Path(sys.executable).parent / "ruff"
CHECK = "python3 -m unittest discover"  # the [checks] command the models run
SCOUT, ARBITER = "acme/scout-1", "judgeco/arbiter-1"
CONFIGURATION_PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


# --- helpers ------------------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def commit_on_feature(repo: Path, message: str, change: Any) -> None:
    """Commit ``change(repo)`` on top of ``feature`` and go back to ``main``."""
    git(repo, "checkout", "--quiet", "feature")
    change(repo)
    git(repo, *IDENTITY, "add", "-A")
    git(repo, *IDENTITY, "commit", "--quiet", "-m", message)
    git(repo, "checkout", "--quiet", "main")


def add_unused_import(repo: Path) -> None:
    def change(r: Path) -> None:
        stats = r / "stats.py"
        text = stats.read_text()
        stats.write_text(
            text.replace(
                '"""Small statistics helpers."""\n', '"""Small statistics helpers."""\n\nimport os\n', 1
            )
        )

    commit_on_feature(repo, "stats: import os", change)


def http_agent(name: str, url: str, model: str, **extra: Any) -> str:
    lines = [
        f"[agents.{name}]",
        'kind = "http"',
        f"base_url = {json.dumps(url)}",
        f"model = {json.dumps(model)}",
        f"api_key_env = {json.dumps(KEY_ENV)}",
        "timeout = 20",
        "max_rounds = 12",
        "expect_seconds = 5",
    ]
    for key, value in extra.items():
        if isinstance(value, dict):
            lines.append(f"{key} = {{ " + ", ".join(f"{k} = {v}" for k, v in value.items()) + " }")
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def ruff_agent(name: str = "lint") -> str:
    command = f"{RUFF} check --no-cache --output-format concise ."
    return (
        f'[agents.{name}]\nkind = "check"\ncommand = {json.dumps(command)}\n'
        'parser = "ruff"\nscope = "changed"\n'
    )


CHECKS = f"[checks]\ntest = {json.dumps(CHECK)}\n"


def review(jury, repo: Path, config: Path, reviewers: str, judge: str, *extra: str):
    return jury(
        "review",
        str(repo),
        "--branch",
        "feature",
        "--trunk",
        "main",
        "--reviewer",
        reviewers,
        "--judge",
        judge,
        "--config",
        str(config),
        *extra,
        env={KEY_ENV: SECRET},
        timeout=90,
    )


def the_run(state_dir: Path) -> Path:
    (only,) = list((state_dir / "runs").iterdir())
    return only


def events_of(d: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (d / "events.ndjson").read_text().splitlines()]


def of_kind(events: list[dict[str, Any]], t: str, **match: Any) -> list[dict[str, Any]]:
    return [e for e in events if e["t"] == t and all(e.get(k) == v for k, v in match.items())]


def transcript(d: Path, name: str) -> list[dict[str, Any]]:
    """The http runner's JSON-lines log of one agent run (``<name>.stderr.txt``)."""
    return [json.loads(line) for line in (d / f"{name}.stderr.txt").read_text().splitlines()]


def assert_secret_nowhere(server: ChatServer, state_dir: Path) -> None:
    """The key went to the endpoint in the Authorization header and nowhere else."""
    assert server.requests
    assert all(r.headers.get("Authorization") == f"Bearer {SECRET}" for r in server.requests)
    assert not any(SECRET in json.dumps(r.body) for r in server.requests), "the key reached a model prompt"
    leaked = [p for p in state_dir.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == [], f"the API key was written to {leaked}"


def run_tests_at(repo: Path, rev: str, where: Path) -> int:
    """The exit code of the repository's whole unittest suite on ``rev``'s tree (extracted with git
    archive, nothing checked out in ``repo``)."""
    where.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return subprocess.run(
        ["python3", "-m", "unittest", "discover"],
        cwd=where,
        capture_output=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    ).returncode


# --- 1. a mixed jury converges --------------------------------------------------------------------


def test_http_models_and_a_ruff_check_converge_with_fixes_and_tests(
    jury, sample_repo: Path, write_config, state_dir: Path
) -> None:
    add_unused_import(sample_repo)  # the PR now also has something for the check agent
    feature_before = git(sample_repo, "rev-parse", "feature")
    with ChatServer() as server:
        server.think(SCOUT, with_key(SECRET, ScriptedModel(check=CHECK)))
        server.think(ARBITER, with_key(SECRET, ScriptedModel(check=CHECK)))
        config = write_config(
            http_agent("scout", server.url + "/v1", SCOUT, price={"input": 0.5, "output": 1.5}),
            http_agent("arbiter", server.url, ARBITER),
            ruff_agent("lint"),
            CHECKS,
        )
        r = review(jury, sample_repo, config, "scout,lint", "arbiter")
    assert r.code == 0, r.out + r.err
    d = the_run(state_dir)
    slug, events = d.name, events_of(d)
    state = json.loads((d / "run.json").read_text())
    assert state["target"]["state"] == "converged"

    # both reviewers found their problem in round 1 and nothing in round 2
    reports = {
        (e["agent"], e["round"]): e["verdict"] for e in of_kind(events, "agent.report", role="reviewer")
    }
    assert reports == {
        ("scout", 1): "found",
        ("lint", 1): "found",
        ("scout", 2): "clean",
        ("lint", 2): "clean",
    }
    raised = {e["agent"]: e for e in of_kind(events, "finding.raised")}
    assert set(raised) == {"scout", "lint"}
    median_line = 1 + git(sample_repo, "show", "feature:stats.py").splitlines().index(
        "    return ordered[middle]"
    )
    assert raised["scout"]["loc"] == f"stats.py:{median_line}"  # read from the read_file tool result
    assert "median()" in raised["scout"]["claim"]
    assert raised["lint"]["loc"] == "stats.py:3" and "F401" in raised["lint"]["claim"]

    # the judge accepted both, each with its own test, and Jury verified each mechanically
    resolved = {e["id"]: e for e in of_kind(events, "finding.resolved")}
    assert {f["verdict"] for f in resolved.values()} == {"accepted"}
    commands = {resolved[raised[a]["id"]]["testCommand"] for a in ("scout", "lint")}
    assert commands == {"python3 -m unittest tests.test_median", "python3 -m unittest tests.test_imports"}
    for fid in resolved:
        runs = {e["tree"].split()[0]: e["exitCode"] for e in of_kind(events, "verify.ran", id=fid)}
        assert runs.get("fixed") == 0 and runs.get("reverted") not in (0, None), (fid, runs)
    assert of_kind(events, "finding.refused") == [] and of_kind(events, "finding.reopened") == []

    # the judge got there through its tools: read, write a test, see it fail, edit, see it pass
    judge_tools = [
        rec["tool"] for rec in transcript(d, f"triage.{raised['scout']['id']}.1") if rec["t"] == "tool"
    ]
    assert judge_tools == ["read_file", "write_file", "run_command", "edit_file", "run_command"]
    offered = {t["function"]["name"] for t in server.requests_for(ARBITER)[0].body["tools"]}
    assert {"write_file", "edit_file"} <= offered
    scout_first = server.requests_for(SCOUT)[0].body
    assert "write_file" not in {t["function"]["name"] for t in scout_first["tools"]}
    assert scout_first["messages"][1]["content"].startswith("# Jury review — round 1")

    # the fixes and their tests are committed on jury/<slug>; the PR branch is untouched
    changed = git(sample_repo, "diff", "--name-only", "feature", f"jury/{slug}").split()
    assert sorted(changed) == ["stats.py", "tests/test_imports.py", "tests/test_median.py"]
    fixed = git(sample_repo, "show", f"jury/{slug}:stats.py")
    assert "ordered[middle - 1]" in fixed and "import os" not in fixed
    assert git(sample_repo, "rev-parse", "feature") == feature_before
    assert run_tests_at(sample_repo, f"jury/{slug}", state_dir.parent / "final") == 0

    # every reviewer was told and did not contest (the check agent answers for itself)
    answered = {e["agent"]: e["verdict"] for e in of_kind(events, "reply.answered")}
    assert answered == {"scout": "clean", "lint": "clean"}
    # the second opinion came from the other family and ran the declared check
    verdicts = of_kind(events, "refute.verdict", source="refuter")
    assert len(verdicts) == 3  # one per accepted fix, one on the converged tree
    assert {(v["outcome"], v["agent"], v["independent"]) for v in verdicts} == {
        ("not_refuted", "scout", True)
    }

    # money: priced calls have a cost; the unpriced judge's is unknown, never zero
    spent = of_kind(events, "budget.spent")
    assert {e["agent"] for e in spent} == {"scout", "arbiter", "lint"}
    assert all(e.get("amount", 0) > 0 for e in spent if e["agent"] == "scout")
    assert all("amount" not in e for e in spent if e["agent"] == "arbiter")
    assert len(of_kind(events, "budget.reserved")) == len(spent)

    # a well-behaved jury is never refused a tool, and the key is nowhere but in the header
    assert of_kind(events, "tool.refused") == [] and of_kind(events, "agent.wrote") == []
    assert_secret_nowhere(server, state_dir)


# --- 2. a reviewer that writes (or reads out of its worktree) is refused, and that is on record ------


def test_a_reviewer_model_that_writes_is_refused_and_the_refusal_is_logged(
    jury, sample_repo: Path, write_config, state_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("TOPSECRET outside the worktree\n")
    # the PR itself carries a symlink pointing out of any checkout of it
    commit_on_feature(sample_repo, "notes", lambda r: (r / "notes.txt").symlink_to(outside))
    stats_before = git(sample_repo, "show", "feature:stats.py")
    mischief = [
        ("write_file", {"path": "stats.py", "content": "pwned = True\n"}),
        ("edit_file", {"path": "stats.py", "old": "    return ordered[middle]\n", "new": "    return 0\n"}),
        ("read_file", {"path": "../../etc/passwd"}),
        ("read_file", {"path": "notes.txt"}),
    ]
    with ChatServer() as server:
        server.think(SCOUT, with_key(SECRET, ScriptedModel(check=CHECK, mischief=mischief)))
        server.think(ARBITER, with_key(SECRET, ScriptedModel(check=CHECK)))
        config = write_config(
            http_agent("vandal", server.url, SCOUT), http_agent("arbiter", server.url, ARBITER), CHECKS
        )
        r = review(jury, sample_repo, config, "vandal", "arbiter", "--no-refute")
    assert r.code == 0, r.out + r.err
    d = the_run(state_dir)
    events = events_of(d)

    # every attempt was refused when called and recorded, in each of the two review rounds
    refused = of_kind(events, "tool.refused")
    assert {e["key"] for e in refused} == {"review:r1:vandal", "review:r2:vandal"}
    for key in ("review:r1:vandal", "review:r2:vandal"):
        mine = [e for e in refused if e["key"] == key]
        assert [e["tool"] for e in mine] == ["write_file", "edit_file", "read_file", "read_file"]
        assert {(e["agent"], e["role"]) for e in mine} == {("vandal", "reviewer")}
        write, edit, passwd, link = (e["reason"] for e in mine)
        assert "not allowed for the reviewer role" in write and "not allowed for the reviewer role" in edit
        assert "outside the worktree" in passwd and "outside the worktree" in link
    # ...and the model was told so, and nothing from outside the worktree reached it
    bodies = json.dumps([req.body for req in server.requests_for(SCOUT)])
    assert "REFUSED: tool 'write_file' is not allowed for the reviewer role" in bodies
    assert "TOPSECRET" not in bodies and "root:x:0:0" not in bodies

    # nothing the reviewer tried changed anything: its worktree still had the bug when it read it (so it
    # raised the finding), no write is on record, the user's repo and the file outside are untouched
    assert [e["agent"] for e in of_kind(events, "finding.raised")] == ["vandal"]
    assert of_kind(events, "agent.wrote") == []
    assert git(sample_repo, "show", "feature:stats.py") == stats_before
    assert git(sample_repo, "status", "--porcelain") == ""
    assert outside.read_text() == "TOPSECRET outside the worktree\n"
    # the judge's fix is the only change on the jury branch
    slug = d.name
    changed = git(sample_repo, "diff", "--name-only", "feature", f"jury/{slug}").split()
    assert sorted(changed) == ["stats.py", "tests/test_median.py"]
    fixed = git(sample_repo, "show", f"jury/{slug}:stats.py")
    assert "pwned" not in fixed and "return 0" not in fixed and "ordered[middle - 1]" in fixed
    assert of_kind(events, "tool.refused", agent="arbiter") == []


# --- 3. retries, fallback and the budget, at run level ------------------------------------------------


def test_retry_after_is_honoured_and_a_failing_model_falls_back(
    jury, sample_repo: Path, write_config, state_dir: Path
) -> None:
    down, backup = "acme/down", "acme/backup"
    with ChatServer() as server:
        server.think(down, always(lambda: status(503, retry_after="0")))  # keeps failing, retry at once
        server.think(backup, with_key(SECRET, ScriptedModel(check=CHECK)))
        server.script(ARBITER, status(429, retry_after="2"))  # the judge's first request is rate limited
        server.think(ARBITER, with_key(SECRET, ScriptedModel(check=CHECK)))
        config = write_config(
            http_agent("scout", server.url, down, fallback=[backup]),
            http_agent("arbiter", server.url, ARBITER),
            CHECKS,
        )
        r = review(jury, sample_repo, config, "scout", "arbiter", "--no-refute")
    assert r.code == 0, r.out + r.err
    d = the_run(state_dir)
    events = events_of(d)
    assert json.loads((d / "run.json").read_text())["target"]["state"] == "converged"

    # every run of the scout tried its model four times, then its fallback answered (and found the bug)
    scout_runs = of_kind(events, "agent.launch", agent="scout")
    assert [e["role"] for e in scout_runs] == ["reviewer", "reply", "reviewer"]
    assert len(server.requests_for(down)) == 4 * len(scout_runs)
    assert of_kind(events, "finding.raised", agent="scout")
    # which model answered is on record in the agent's transcript (not in the event log)
    responses = [
        (rec["model"], rec["status"]) for rec in transcript(d, "round-1.scout") if rec["t"] == "response"
    ]
    assert responses[:4] == [(down, 503)] * 4
    assert responses[4:] and set(responses[4:]) == {(backup, 200)}

    # the judge's 429 was retried after the Retry-After delay, not the default backoff (1s)
    first, second = server.requests_for(ARBITER)[:2]
    assert first.body == second.body
    assert 1.9 <= second.at - first.at < 10
    judge_log = transcript(
        d,
        next(e["rawFile"] for e in of_kind(events, "agent.report", role="judge")).removesuffix(".stdout.txt"),
    )
    failed = [rec for rec in judge_log if rec["t"] == "request.failed"]
    assert len(failed) == 1 and failed[0]["error"].startswith("HTTP 429")
    assert of_kind(events, "finding.resolved", verdict="accepted")
    assert_secret_nowhere(server, state_dir)


def test_a_call_that_would_cross_the_budget_is_not_made(
    jury, sample_repo: Path, write_config, state_dir: Path
) -> None:
    # each call is projected at a full answer's price, 4096 tokens x $1000/M = $4.096; each call that is
    # made costs 500 x $1000/M = $0.50. Budget $5: calls 1 and 2 fit ($0 and $0.50 spent + $4.096),
    # call 3 would cross it ($1.00 + $4.096 > $5) and must never reach the server.
    price = {"input": 0, "output": 1000}
    usage = {"prompt_tokens": 100, "completion_tokens": 500}
    with ChatServer() as server:
        for model in (SCOUT, ARBITER):
            server.think(model, with_key(SECRET, ScriptedModel(check=CHECK, usage=usage)))
        config = write_config(
            http_agent("scout", server.url, SCOUT, price=price),
            http_agent("arbiter", server.url, ARBITER, price=price),
            CHECKS,
        )
        r = review(jury, sample_repo, config, "scout", "arbiter", "--no-refute", "--budget", "5")
    assert r.code == 1, r.out + r.err
    d = the_run(state_dir)
    events = events_of(d)
    target = json.loads((d / "run.json").read_text())["target"]
    assert target["state"] == "human" and "budget exhausted" in target["stateNote"]

    # the reviewer's two calls were made (read, then the finding); the judge's first call was refused
    assert [req.model for req in server.requests] == [SCOUT, SCOUT]
    reserved = of_kind(events, "budget.reserved")
    assert [(e["key"], e["amount"]) for e in reserved] == [
        ("review:r1:scout:call1", pytest.approx(4.096)),
        ("review:r1:scout:call2", pytest.approx(4.096)),
    ]
    assert [e["amount"] for e in of_kind(events, "budget.spent")] == [pytest.approx(0.5)] * 2
    (refused,) = of_kind(events, "budget.refused")
    assert (
        refused["agent"] == "arbiter"
        and refused["key"].startswith("triage:")
        and refused["key"].endswith(":call1")
    )
    assert "ceiling" in refused["reason"]
    assert of_kind(events, "finding.resolved") == []
    assert "budget exhausted" in r.out


# --- 4. path escapes the integration tests do not cover -----------------------------------------------
# tests/integration/test_http_agent.py covers: ../../etc/passwd, /etc/passwd, src/../../x and .git/config
# (resolve_in), ../../etc/passwd through the tool loop, a symlink to a file and into a directory out of
# the worktree (resolve_in), and read_file / search_text / a judge's write_file through a symlink out.
# Test 2 above adds a symlink committed in the PR, read through the whole stack. Here: the other tools.


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": "../escaped.txt", "content": "x"}),
        ("write_file", {"path": "linkdir/new.txt", "content": "x"}),
        ("edit_file", {"path": "link.txt", "old": "TOPSECRET", "new": "changed"}),
        ("list_dir", {"path": "linkdir"}),
        ("search_text", {"pattern": "TOPSECRET", "path": "linkdir"}),
    ],
)
def test_judge_tools_refuse_paths_out_of_the_worktree(
    tmp_path: Path, tool: str, args: dict[str, Any]
) -> None:
    wt, outside = tmp_path / "wt", tmp_path / "outside"
    wt.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET\n")
    (wt / "link.txt").symlink_to(outside / "secret.txt")
    (wt / "linkdir").symlink_to(outside)
    result = call_tool(tool, args, role="judge", worktree=wt)
    assert result.refused and "outside the worktree" in result.refused
    assert "TOPSECRET" not in result.text
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOPSECRET\n"
    assert not (tmp_path / "escaped.txt").exists()


# --- 5. the documented configurations load ------------------------------------------------------------


def documented_toml(section: str) -> str:
    text = CONFIGURATION_PAGE.read_text()
    start = text.index(f"## {section}\n")
    end = text.find("\n## ", start + 1)
    found = re.search(r"```toml\n(.*?)```", text[start : end if end != -1 else None], re.DOTALL)
    assert found, f"no toml block in the section {section!r} of docs/configuration.md"
    return found.group(1)


def test_the_documented_mixed_jury_loads(tmp_path: Path) -> None:
    # a trusted repository's jury.toml (a local path): every key applies
    cfg = load_config(
        RepoFile(source="jury.toml", identity=str(tmp_path), local=True, text=documented_toml("A mixed jury"))
    )
    reviewers, judge, rounds = resolve_jury(cfg, None, None, None)
    kinds = {cfg.agents[name].kind for name in [*reviewers, judge]}
    assert kinds == {"cli", "http", "check"}
    assert cfg.agents[judge].can_judge and rounds == 5
    (http,) = [cfg.agents[n] for n in reviewers if cfg.agents[n].kind == "http"]
    assert http.base_url and http.model and http.api_key_env and http.price and http.fallback
    assert http.family == "qwen"
    (check,) = [cfg.agents[n] for n in reviewers if cfg.agents[n].kind == "check"]
    assert check.command and check.parser == "ruff" and check.scope == "changed" and not check.can_judge
    assert cfg.checks == {"test": "python -m pytest -q"}


def test_the_template_documents_every_kind(tmp_path: Path) -> None:
    text = (config_dir() / "jury.toml").read_text()
    example = tomllib.loads("\n".join(line[2:] for line in text.splitlines() if line.startswith("# ")))
    uncommented = "\n".join(line[2:] for line in text.splitlines() if line.startswith("# "))
    cfg = load_config(RepoFile(source="jury.toml", identity=str(tmp_path), local=True, text=uncommented))
    assert {a["kind"] for a in example["agents"].values() if "kind" in a} == {"http", "check"}
    assert cfg.checks and cfg.agents["myapi"].kind == "http" and cfg.agents["lint"].kind == "check"
