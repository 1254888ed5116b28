"""A broken seat is not a clean review: fake agents whose transcripts report only failed commands, and
the real codex CLI (npm ``@openai/codex@0.171.0``, installed by ``tests/fakes/install_codex.sh``) against a
local Responses-API server (``tests/fakes/responses_server.py``), through the whole ``jury review``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.demo import STATS_FEATURE
from tests.conftest import FAKE, SANDBOX_RO_PATHS, fake_agent
from tests.fakes.chat_server import ChatServer, answer, tool_call
from tests.fakes.responses_server import (
    Event,
    Recorded,
    ResponsesServer,
    completed,
    created,
    message,
    shell_call,
    write_codex_home,
)

ROOT = Path(__file__).resolve().parents[2]
CODEX_VERSION = "0.171.0"
SANDBOX_ERROR = "bwrap: execvp codex-linux-sandbox: No such file or directory"
BUG = "    return ordered[middle]"
LISTING = "--- HOME ---"


def run_dir(state_dir: Path) -> Path:
    (only,) = list((state_dir / "runs").iterdir())
    return only


def reports(d: Path) -> list[dict]:
    events = [json.loads(line) for line in (d / "events.ndjson").read_text().splitlines()]
    return [e for e in events if e["t"] == "agent.report"]


def review(repo: Path, config: Path, reviewers: str, judge: str = "judge") -> list[str]:
    return [
        "review", str(repo), "--branch", "feature", "--trunk", "main",
        "--reviewer", reviewers, "--judge", judge, "--config", str(config),
    ]  # fmt: skip


# --- fake agents whose transcripts report only failed commands -------------------------------------


@pytest.mark.parametrize(
    ("mode", "report"), [("broken-codex", "codex-json"), ("broken-stream", "stream-json")]
)
def test_a_reviewer_whose_every_command_failed_is_not_clean(
    jury, sample_repo, write_config, state_dir, mode: str, report: str
) -> None:
    argv = json.dumps([sys.executable, str(FAKE), mode, "{prompt_file}"])
    broken = f'[agents.broken]\nargv = {argv}\nreport = "{report}"\nexpect_seconds = 5\n'
    config = write_config(broken, fake_agent("quiet", "clean"), fake_agent("judge", "clean", "fix"))
    r = jury(*review(sample_repo, config, "broken,quiet"))
    assert r.code == 1, r.out + r.err
    d = run_dir(state_dir)
    doc = json.loads((d / "run.json").read_text())
    why = (
        f"reviewer broken could not run in round 1: every command broken ran failed (2 of 2): {SANDBOX_ERROR}"
    )
    assert doc["target"]["state"] == "human"
    assert doc["target"]["stateNote"] == why
    (report_event,) = [e for e in reports(d) if e["agent"] == "broken"]
    assert report_event["verdict"] == "error"
    assert report_event["report"] == "NO NEW FINDINGS"  # the answer is kept; it just does not count
    shown = jury("show", d.name)
    assert "every command broken ran failed" in shown.out, shown.out + shown.err


def test_a_judge_whose_every_command_failed_cannot_reject(jury, sample_repo, write_config, state_dir) -> None:
    argv = json.dumps([sys.executable, str(FAKE), "broken-codex", "{prompt_file}"])
    judge = f'[agents.judge]\nargv = {argv}\njudge_argv = {argv}\nreport = "codex-json"\nexpect_seconds = 5\n'
    config = write_config(fake_agent("finder", "find"), judge)
    r = jury(*review(sample_repo, config, "finder"))
    assert r.code == 1, r.out + r.err
    doc = json.loads((run_dir(state_dir) / "run.json").read_text())
    assert doc["target"]["state"] == "human"
    note = doc["target"]["stateNote"]
    assert "is still open after" in note, note
    assert f"the judge could not run: every command judge ran failed (2 of 2): {SANDBOX_ERROR}" in note


def test_an_http_reviewer_whose_every_tool_call_was_refused_is_not_clean(
    jury, sample_repo, write_config, state_dir
) -> None:
    with ChatServer() as server:
        server.script(
            "vendor/m-1",
            tool_call("write_file", {"path": "stats.py", "content": "x"}, call_id="c1"),
            tool_call("run_command", {"command": "curl http://example.com"}, call_id="c2"),
            answer("NO NEW FINDINGS"),
        )
        entry = (
            f'[agents.h]\nkind = "http"\nbase_url = "{server.url}"\nmodel = "vendor/m-1"\nmax_rounds = 5\n'
        )
        config = write_config(entry, fake_agent("judge", "clean", "fix"))
        r = jury(*review(sample_repo, config, "h"))
    assert r.code == 1, r.out + r.err
    doc = json.loads((run_dir(state_dir) / "run.json").read_text())
    assert doc["target"]["state"] == "human"
    assert doc["target"]["stateNote"].startswith(
        "reviewer h could not run in round 1: every command h ran failed (2 of 2): refused: "
    ), doc["target"]


def test_one_good_command_is_enough_for_a_clean_review(jury, sample_repo, write_config, state_dir) -> None:
    argv = json.dumps([sys.executable, str(FAKE), "ok-codex", "{prompt_file}"])
    entry = f'[agents.half]\nargv = {argv}\nreport = "codex-json"\nexpect_seconds = 5\n'
    config = write_config(entry, fake_agent("judge", "clean", "fix"))
    r = jury(*review(sample_repo, config, "half"))
    assert r.code == 0, r.out + r.err
    (report_event,) = reports(run_dir(state_dir))
    assert (
        report_event["verdict"] == "clean"
        and report_event["sessionId"] == "0199aaaa-fake-4000-8000-000000000001"
    )


# --- the real codex CLI --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    """The codex CLI installed in the checkout (``tests/fakes/install_codex.sh``), else one on PATH."""
    local = ROOT / ".tools" / "codex" / "node_modules" / ".bin" / "codex"
    found = local if local.exists() else (Path(p) if (p := shutil.which("codex")) else None)
    if found is None:
        pytest.skip("the codex CLI is not installed: run tests/fakes/install_codex.sh (needs npm)")
    version = subprocess.run([str(found), "--version"], capture_output=True, text=True, timeout=60).stdout
    if CODEX_VERSION not in version:
        pytest.skip(f"codex {CODEX_VERSION} is needed, found {version.strip() or 'nothing'} at {found}")
    return found


@pytest.fixture
def home_outside_tmp() -> Iterator[Path]:
    """A HOME whose ``.codex`` is outside /tmp: codex refuses to create its sandbox helpers under /tmp."""
    temp = Path(tempfile.gettempdir()).resolve()
    # The checkout itself may sit under /tmp (a CI clone): then /var/tmp, which codex does not refuse.
    base = (
        ROOT / ".tools" / "homes" if not ROOT.resolve().is_relative_to(temp) else Path("/var/tmp/jury-homes")
    )
    base.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="home-", dir=base))
    yield home
    shutil.rmtree(home, ignore_errors=True)


def last_prompt(request: Recorded) -> str:
    users = [i for i in request.items if i.get("type") == "message" and i.get("role") == "user"]
    content = users[-1].get("content") if users else None
    parts = content if isinstance(content, list) else []
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict))


def reviewer_brain(request: Recorded, index: int) -> list[Event]:
    """A reviewer that reads stats.py through codex's own shell tool, then reports the median bug while
    it is there; a reply contests nothing. Without the file's text it says so (no verdict)."""
    rid = f"resp-{index}"
    prompt = last_prompt(request)
    if prompt.startswith("# Jury reply"):
        return [created(rid), message("NO CONTEST"), completed(rid)]
    outputs = request.outputs()
    if not outputs:
        return [
            created(rid),
            shell_call(request, f"cat stats.py; echo {LISTING}; ls -A ~", "call-1"),
            completed(rid),
        ]
    seen = outputs[-1]
    if "def median" not in seen:
        text = "NO NEW FINDINGS"  # what a model says when it could see nothing wrong (nor anything)
    elif BUG in seen and "ordered[middle - 1]" not in seen:
        line = STATS_FEATURE.splitlines().index(BUG) + 1
        text = (
            f"FINDING: median() of an even-length list returns the upper middle value\nWHERE: stats.py:{line}"
        )
    else:
        text = "NO NEW FINDINGS"
    return [created(rid), message(text), completed(rid)]


def codex_env(
    codex_bin: Path, home: Path, server: ResponsesServer, *, codex_home: bool = True
) -> dict[str, str]:
    """The environment ``jury`` runs with: codex on PATH, its configuration in ``home/.codex`` (named by
    CODEX_HOME, or found there as codex's default when ``codex_home`` is False), a made-up key."""
    where = write_codex_home(home / ".codex", server.url)
    env = {
        "PATH": f"{codex_bin.parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "OPENAI_API_KEY": "sk-jury-test",
        # the checkout (and so .tools/codex) may sit under /tmp or HOME, which the sandbox hides
        "JURY_SANDBOX_RO_PATHS": os.pathsep.join(
            [SANDBOX_RO_PATHS["JURY_SANDBOX_RO_PATHS"], str(codex_bin.resolve().parents[3])]
        ),
    }
    return {**env, "CODEX_HOME": str(where)} if codex_home else env


def codex_egress(server: ResponsesServer) -> str:
    """The codex entry's ``egress``: its model server on the host's loopback, its only way out of the
    sandbox (``workers.isolation.egress``); without it codex cannot reach its model at all."""
    host, port = server.httpd.server_address[:2]
    return f'[agents.codex]\negress = ["{host}:{port}"]\n'


def test_codex_reviews_through_its_own_sandbox_and_its_review_counts(
    jury, codex_bin, home_outside_tmp, sample_repo, write_config, state_dir
) -> None:
    (home_outside_tmp / "not-for-agents.txt").write_text("a secret in the worker's HOME\n")
    with ResponsesServer(reviewer_brain) as server:
        config = write_config(fake_agent("judge", "clean", "fix"), codex_egress(server))
        r = jury(*review(sample_repo, config, "codex"), env=codex_env(codex_bin, home_outside_tmp, server))
        asked = server.model_requests()
    assert r.code == 0, r.out + r.err
    d = run_dir(state_dir)
    doc = json.loads((d / "run.json").read_text())
    assert doc["target"]["state"] == "converged", doc["target"]
    # round 1: codex read the buggy file through its sandbox and found the bug; the judge fixed it; the
    # reply resumed codex's session; round 2: codex read the fixed file and found nothing more
    verdicts = [(e["round"], e["verdict"]) for e in reports(d) if e["agent"] == "codex"]
    assert verdicts == [(1, "found"), (2, "clean")]
    outputs = [o for req in asked for o in req.outputs()]
    assert any(BUG in o for o in outputs) and any("ordered[middle - 1]" in o for o in outputs)
    assert all(SANDBOX_ERROR not in o for o in outputs)
    # codex ran inside Jury's sandbox: of HOME it saw only its state directory, and its own bubblewrap
    # (the command above ran through it) kept working in there
    listings = [o.split(LISTING, 1)[1].split() for o in outputs if LISTING in o]
    assert listings and all(listing == [".codex"] for listing in listings), listings
    sessions = {e["sessionId"] for e in reports(d) if e["agent"] == "codex"}
    assert len(sessions) == 2 and all(re.fullmatch(r"[0-9a-f-]{36}", s) for s in sessions)
    assert any(last_prompt(req).startswith("# Jury reply") for req in asked)  # the reply resumed codex


def test_codex_whose_sandbox_helpers_are_missing_is_not_a_clean_review(
    jury, codex_bin, sample_repo, write_config, state_dir, tmp_path
) -> None:
    # CODEX_HOME under /tmp: codex refuses to create its helper binaries there, so with Debian's
    # bubblewrap installed every command it runs fails; it still answers NO NEW FINDINGS and exits 0.
    if shutil.which("bwrap") is None:
        pytest.skip("codex only needs its helpers with a system bubblewrap: apt-get install bubblewrap")
    home = tmp_path / "home"
    assert str(home).startswith(tempfile.gettempdir())
    with ResponsesServer(reviewer_brain) as server:
        config = write_config(fake_agent("judge", "clean", "fix"), codex_egress(server))
        # no CODEX_HOME: codex's default, ~/.codex, where Jury also looks for its session file
        env = codex_env(codex_bin, home, server, codex_home=False)
        r = jury(*review(sample_repo, config, "codex"), env=env)
        outputs = [o for req in server.model_requests() for o in req.outputs()]
    assert any(SANDBOX_ERROR in o for o in outputs), outputs  # the model saw nothing but the failure
    assert r.code == 1, r.out + r.err
    d = run_dir(state_dir)
    doc = json.loads((d / "run.json").read_text())
    assert doc["target"]["state"] == "human"
    assert doc["target"]["stateNote"] == (
        f"reviewer codex could not run in round 1: every command codex ran failed (1 of 1): {SANDBOX_ERROR}"
    )
    (report_event,) = reports(d)
    assert report_event["verdict"] == "error" and report_event["report"] == "NO NEW FINDINGS"


def test_codex_whose_model_fails_says_why(
    jury, codex_bin, home_outside_tmp, sample_repo, write_config, state_dir
):
    def down(request: Recorded, index: int) -> list[Event]:
        raise RuntimeError("the model is down")  # the server answers 500

    with ResponsesServer(down) as server:
        config = write_config(fake_agent("judge", "clean", "fix"), codex_egress(server))
        r = jury(*review(sample_repo, config, "codex"), env=codex_env(codex_bin, home_outside_tmp, server))
    assert r.code == 1, r.out + r.err
    doc = json.loads((run_dir(state_dir) / "run.json").read_text())
    assert doc["target"]["state"] == "human"
    # codex --json says why on stdout (a "turn.failed" event); its stderr has nothing useful
    note = doc["target"]["stateNote"]
    assert note.startswith("reviewer codex could not run in round 1: exited 1: "), note
    assert "Reading additional input" not in note and "demand" in note, note
