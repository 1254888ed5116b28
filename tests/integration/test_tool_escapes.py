"""The http agent's tools against a hostile model and a hostile repository (issue #8, part 4, and the
key that a model echoes back).

Every escape in the table is refused before anything runs: a sentinel file outside the worktree never
shows in any output, a planted program never leaves its marker, and no process starts at all (the real
``run_supervised`` is wrapped to count, not replaced). A repository whose own config and attributes name
programs for git is read by the git tools without any of them running. A catastrophic pattern costs
``search_text`` a tool error within its limit while a heartbeat thread keeps ticking. A model that echoes
its API key everywhere leaves it in no file of the run and in no log line.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import regex
import structlog

from orchestrator import logs
from orchestrator.spec import AgentSpec
from tests.fakes.chat_server import Brain, ChatServer, Recorded, Reply, answer, status, tool_call
from tests.fakes.scripted_models import Conversation, ScriptedModel, with_key
from workers.agents import toolbase
from workers.agents.http import run_http_agent
from workers.agents.tools import call_tool

SENTINEL = "SENTINEL-" + secrets.token_hex(8)
DECLARED = f'{sys.executable} -c "print(1)"'


@dataclass
class Hostile:
    """A worktree whose repository plants programs for git, with a secret and a trap outside it."""

    wt: Path
    outside: Path  # a directory next to the worktree: the sentinel file, the planted program
    sentinel: Path
    marker: Path  # the planted program creates it when anything runs it
    head: str  # the last commit's sha

    def untouched(self) -> None:
        assert not self.marker.exists(), "a planted program ran"
        assert self.sentinel.read_text() == SENTINEL + "\n"
        assert sorted(p.name for p in self.outside.iterdir()) == ["evil.config", "evil.sh", "secret.txt"]


def git(wt: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=wt,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    ).stdout


def plant(wt: Path, program: Path, include: Path) -> None:
    """Name ``program`` everywhere git could be told to run one, in the repository's own config (and a
    file it includes) and in its ``.gitattributes``."""
    for key, value in (
        ("diff.external", str(program)),
        ("filter.evil.clean", str(program)),
        ("filter.evil.smudge", str(program)),
        ("filter.evil.process", str(program)),
        ("filter.evil.required", "true"),
        ("diff.evil.textconv", str(program)),
        ("diff.evil.command", str(program)),
        ("core.fsmonitor", str(program)),
        ("core.pager", str(program)),
        ("pager.log", str(program)),
        ("log.showSignature", "true"),
        ("gpg.program", str(program)),
        ("core.hooksPath", str(program.parent)),
        ("include.path", str(include)),
    ):
        git(wt, "config", key, value)
    include.write_text(f'[filter "inc"]\n\tclean = {program}\n[diff "inc"]\n\ttextconv = {program}\n')


@pytest.fixture
def hostile(tmp_path: Path) -> Hostile:
    wt, outside = tmp_path / "wt", tmp_path / "outside"
    (wt / "src").mkdir(parents=True)
    outside.mkdir()
    sentinel = outside / "secret.txt"
    sentinel.write_text(SENTINEL + "\n")
    marker = tmp_path / "marker"
    program = outside / "evil.sh"
    program.write_text(f"#!/bin/sh\necho ran >> {marker}\ncat\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    (wt / "src" / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (wt / "notes.md").write_text("notes\n")
    (wt / ".gitattributes").write_text("*.py filter=evil diff=evil\n*.md filter=inc diff=inc\n")
    git(wt, "init", "-q", "-b", "main")
    git(wt, "add", "-A")
    git(wt, "commit", "-qm", "first")
    (wt / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    git(wt, "commit", "-qam", "second")
    head = git(wt, "rev-parse", "HEAD").strip()
    plant(wt, program, outside / "evil.config")
    # an uncommitted change with an old mtime: git must read the file again (and would filter it)
    (wt / "src" / "app.py").write_text("def add(a, b):\n    return b + a\n")
    (wt / "notes.md").write_text("notes, changed\n")
    os.utime(wt / "src" / "app.py", (1_000_000_000, 1_000_000_000))
    (wt / "link_out").symlink_to(sentinel)
    (wt / "linkdir").symlink_to(outside)
    return Hostile(wt, outside, sentinel, marker, head)


@pytest.fixture
def processes(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every argv a tool starts (the real ``run_supervised`` still runs it)."""
    started: list[list[str]] = []
    real = toolbase.run_supervised

    def counting(argv: list[str], **kw: Any) -> Any:
        started.append(list(argv))
        return real(argv, **kw)

    monkeypatch.setattr(toolbase, "run_supervised", counting)
    return started


# --- the table of escapes -------------------------------------------------------------------------

SENT = "{sentinel}"  # replaced by the sentinel's absolute path
GIT_OPTIONS = [
    f"--no-index {SENT} /dev/null",
    f"{SENT} /dev/null",
    "--conten=" + SENT,
    "--outp=/tmp/x",
    "--output=x",
    "--ext-d",
    "--ext-diff",
    "--textc",
    "--textconv",
    "--open-files-in-pager=sh",
    "-O/tmp/x",
    "-o/tmp/x",
    "-c",
    "-cdiff.external=sh",
    "-c core.pager=sh",
    "--exec=sh",
    "-p",
]
BAD_REVS = [
    "HEAD --output=x",
    "HEAD..--output=x",
    "--output=x..HEAD",
    "HEAD...-p",
    "-HEAD",
    "HEAD@{1}",
    "HEAD^{/x}",
    ":/first",
    "HEAD:../outside/secret.txt",
    f"HEAD:{SENT}",
    "a\n--output=x",
    "HEAD;touch x",
    "$(touch x)",
    "..",
    "main.lock",
    "refs/../x",
]
BAD_PATHS = [
    SENT,
    "/etc/passwd",
    "../outside/secret.txt",
    "src/../../outside/secret.txt",
    "link_out",
    "linkdir/secret.txt",
    ".git/config",
    "src/../.git/config",
    "--output=x",
]

ESCAPES: list[tuple[str, dict[str, Any]]] = [
    *[("git_diff", {"rev_range": opt}) for opt in GIT_OPTIONS + BAD_REVS],
    *[("git_log", {"rev_range": opt}) for opt in GIT_OPTIONS + BAD_REVS],
    *[("git_show", {"rev": opt}) for opt in GIT_OPTIONS + BAD_REVS],
    *[("git_diff", {"paths": [p]}) for p in BAD_PATHS if not p.startswith("--")],
    *[("git_log", {"paths": ["src", p]}) for p in BAD_PATHS if not p.startswith("--")],
    *[("git_show", {"rev": "HEAD", "path": p}) for p in BAD_PATHS if not p.startswith("--")],
    ("git_diff", {"paths": [SENT, "/dev/null"]}),
    ("git_show", {"rev": "HEAD:src/app.py", "path": "notes.md"}),
    *[("read_file", {"path": p}) for p in BAD_PATHS if not p.startswith("--")],
    *[("list_dir", {"path": p}) for p in [SENT, "..", "linkdir", ".git", "/"]],
    *[("search_text", {"pattern": "SENTINEL", "path": p}) for p in [SENT, "..", "linkdir", ".git", "/"]],
    ("search_text", {"pattern": "x" * 2000}),
    ("run_command", {"command": f"git diff {SENT} /dev/null"}),
    ("run_command", {"command": "git diff --no-index /etc/passwd /dev/null"}),
    ("run_command", {"command": "git status"}),
    ("run_command", {"command": "{program}"}),
    ("run_command", {"command": "sh -c '{program}'"}),
    ("run_command", {"command": DECLARED + " --extra"}),
    ("run_command", {"command": DECLARED + "; {program}"}),
    ("run_command", {"check": "test --x"}),
    ("run_command", {"check": "nope"}),
    ("run_command", {}),
    ("write_file", {"path": SENT, "content": "x"}),
    ("write_file", {"path": "../outside/new.txt", "content": "x"}),
    ("write_file", {"path": "linkdir/new.txt", "content": "x"}),
    ("write_file", {"path": ".git/hooks/post-commit", "content": "#!/bin/sh\n"}),
    ("edit_file", {"path": "link_out", "old": "SENTINEL", "new": "x"}),
    ("edit_file", {"path": ".git/config", "old": "evil", "new": "x"}),
]


def _fill(value: Any, h: Hostile) -> Any:
    if isinstance(value, str):
        return value.replace(SENT, str(h.sentinel)).replace("{program}", str(h.outside / "evil.sh"))
    if isinstance(value, list):
        return [_fill(v, h) for v in value]
    return {k: _fill(v, h) for k, v in value.items()}


@pytest.mark.parametrize(("tool", "args"), ESCAPES, ids=[f"{t}-{json.dumps(a)[:60]}" for t, a in ESCAPES])
def test_every_escape_is_refused_and_nothing_is_read_or_run(
    hostile: Hostile, processes: list[list[str]], tool: str, args: dict[str, Any]
) -> None:
    config_before = (hostile.wt / ".git" / "config").read_bytes()
    result = call_tool(
        tool, _fill(args, hostile), role="judge", worktree=hostile.wt, checks={"test": DECLARED}
    )
    assert not result.ok and result.refused, result.text
    assert SENTINEL not in result.text and "SENTINEL-" not in result.refused
    assert processes == [], f"a refused call started {processes}"
    hostile.untouched()
    assert (hostile.wt / ".git" / "config").read_bytes() == config_before


# --- the same repository, read the way a reviewer should read it ------------------------------------


def test_the_hostile_repository_is_readable_without_running_its_programs(hostile: Hostile) -> None:
    def call(tool: str, args: dict[str, Any]) -> str:
        result = call_tool(tool, args, role="reviewer", worktree=hostile.wt)
        assert result.ok, (tool, args, result.text)
        return result.text

    diff = call("git_diff", {})
    assert "+    return b + a" in diff and "+notes, changed" in diff
    assert "+notes, changed" not in call("git_diff", {"paths": ["src"]})
    assert "src/app.py" in call("git_diff", {"stat": True})
    assert "+    return a + b" in call("git_diff", {"rev_range": "HEAD~1..HEAD"})
    assert "+    return a + b" in call("git_diff", {"rev_range": "HEAD~1...HEAD", "paths": ["src/app.py"]})
    assert "second" in call("git_log", {"rev_range": "HEAD", "paths": ["src/app.py"]})
    assert "first" in call("git_log", {"rev_range": "main~1", "max_count": 1})
    head = hostile.head
    assert "+    return a + b" in call("git_show", {"rev": head})
    assert call("git_show", {"rev": "HEAD^", "path": "src/app.py"}) == "def add(a, b):\n    return a - b\n"
    assert "return a + b" in call("git_show", {"rev": "HEAD:src/./app.py"})
    assert "notes" in call("git_show", {"rev": head[:12], "path": "src/../notes.md"})
    hostile.untouched()
    # the plant is live: a plain git diff, as a shell command would run it, runs the program
    subprocess.run(["git", "diff"], cwd=hostile.wt, capture_output=True, stdin=subprocess.DEVNULL)
    assert hostile.marker.exists()


def test_a_planted_worktree_location_does_not_move_git(hostile: Hostile, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "src").mkdir(parents=True)
    (elsewhere / "src" / "app.py").write_text(SENTINEL + "\n")
    git(hostile.wt, "config", "core.worktree", str(elsewhere))
    result = call_tool("git_diff", {}, role="reviewer", worktree=hostile.wt)
    assert result.ok and "+    return b + a" in result.text and SENTINEL not in result.text


def test_a_promisor_remote_cannot_make_git_fetch_through_a_program(tmp_path: Path) -> None:
    """A partial clone fetches a missing object lazily from its promisor remote; an ``ext::`` remote
    the repository allows (``protocol.ext.allow``) would run a program for it."""
    src, wt, marker = tmp_path / "src", tmp_path / "wt", tmp_path / "marker"
    src.mkdir()
    (src / "f.txt").write_text("hi\n")
    git(src, "init", "-q", "-b", "main")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "one")
    git(src, "config", "uploadpack.allowFilter", "true")
    git(tmp_path, "clone", "-q", "--filter=blob:none", "--no-checkout", f"file://{src}", str(wt))
    git(wt, "config", "remote.origin.url", f"ext::sh -c touch% {marker}")
    git(wt, "config", "protocol.ext.allow", "always")
    result = call_tool("git_show", {"rev": "HEAD:f.txt"}, role="reviewer", worktree=wt)
    assert not result.ok and "hi" not in result.text, result.text  # "transport 'ext' not allowed"
    assert not marker.exists()
    # the plant is live: git told to show the file fetches it through the program
    subprocess.run(["git", "show", "HEAD:f.txt"], cwd=wt, capture_output=True, stdin=subprocess.DEVNULL)
    assert marker.exists()


# --- run_command: declared checks only, exactly, in the sandbox ---------------------------------------


def test_a_declared_check_runs_by_name_or_exact_text_and_nothing_else(
    hostile: Hostile, processes: list[list[str]]
) -> None:
    probe = (
        f"{sys.executable} -c \"import os, sys; print('pid', os.getpid()); "
        f'print(open(sys.argv[1]).read())" {hostile.sentinel}'
    )
    checks = {"test": DECLARED, "probe": probe}
    by_name = call_tool("run_command", {"check": "test"}, role="reviewer", worktree=hostile.wt, checks=checks)
    assert by_name.ok and "exit code 0" in by_name.text and "\n1\n" in by_name.text
    by_text = call_tool(
        "run_command", {"command": DECLARED}, role="reviewer", worktree=hostile.wt, checks=checks
    )
    assert by_text.ok and by_text.text == by_name.text
    assert processes == [[sys.executable, "-c", "print(1)"]] * 2
    # even a declared check sees only the sandbox: no file outside the worktree, no worker processes
    jailed = call_tool("run_command", {"check": "probe"}, role="reviewer", worktree=hostile.wt, checks=checks)
    assert SENTINEL not in jailed.text and "No such file" in jailed.text, jailed.text
    hostile.untouched()


# --- search_text cannot stall the worker ----------------------------------------------------------


class Heartbeat:
    """A thread that ticks every 50 ms, like a lease heartbeat; ``ticks`` counts them."""

    def __init__(self) -> None:
        self.ticks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.ticks += 1

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        (r"(a|a)*$", "pattern took too long; simplify it"),  # exponential backtracking while matching
        # compiles that would take minutes and gigabytes: stopped by the memory or the time limit
        (r"((a{1000}){1000}){1000}", "; simplify it"),
        (r"(?:x{60000}){60000}", "; simplify it"),
    ],
    ids=["backtracking", "compile-nested", "compile-wide"],
)
def test_a_catastrophic_pattern_is_an_error_within_its_limit_while_the_worker_ticks(
    hostile: Hostile, pattern: str, error: str
) -> None:
    (hostile.wt / "long.txt").write_text("a" * 40 + "b\n")
    limit = 2.0
    with Heartbeat() as beat:
        started = time.monotonic()
        result = call_tool(
            "search_text",
            {"pattern": pattern, "path": "long.txt"},
            role="reviewer",
            worktree=hostile.wt,
            timeout=limit,
        )
        seconds = time.monotonic() - started
    assert not result.ok and result.refused is None
    assert result.text.startswith("ERROR: ") and result.text.endswith(error), result.text
    assert seconds < limit + 3.0, seconds
    assert beat.ticks >= 0.5 * seconds / 0.05, (beat.ticks, seconds)  # the worker's threads kept running


def test_search_text_still_finds_and_refuses_a_bad_pattern(hostile: Hostile) -> None:
    (hostile.wt / "long.txt").write_text("a" * 40 + "b\n")
    slow_but_fine = call_tool(
        "search_text", {"pattern": r"(a+)+$", "path": "long.txt"}, role="reviewer", worktree=hostile.wt
    )
    assert slow_but_fine.ok and slow_but_fine.text == "(no matches)"
    found = call_tool("search_text", {"pattern": r"return [ab] \+"}, role="reviewer", worktree=hostile.wt)
    assert found.ok and found.text == "src/app.py:2:     return b + a"
    bad = call_tool("search_text", {"pattern": "("}, role="reviewer", worktree=hostile.wt)
    assert bad.refused and "bad regular expression" in bad.refused
    hostile.untouched()


def test_the_regex_package_releases_the_gil_while_matching() -> None:
    """Why matching may use ``timeout=`` at all; compiling holds the GIL, hence the separate process."""
    compiled = regex.compile(r"(a|a)*$")
    with Heartbeat() as beat:
        with pytest.raises(TimeoutError):
            compiled.search("a" * 40 + "b", timeout=1.0)
    assert beat.ticks >= 10


# --- a model that echoes its key ------------------------------------------------------------------

KEY_ENV = "ECHO_MODEL_KEY"
KEY = "sk-echo-" + secrets.token_hex(16)


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The process's real log configuration (``orchestrator.logs.configure``) at its most verbose: what
    it would print on the worker's stderr."""
    saved = structlog.get_config()
    stderr = io.StringIO()
    with monkeypatch.context() as patch:
        patch.setattr(sys, "stderr", stderr)
        logs.configure("DEBUG", json=True)
    yield stderr
    structlog.configure(**saved)


def _echo_turns(secret: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("read_file", {"path": secret}),  # "not a file: <key>", the line the issue found in the log
        ("search_text", {"pattern": secret, "path": secret}),
        ("run_command", {"check": secret}),
        ("git_show", {"rev": secret}),
        ("git_diff", {"paths": [secret]}),
        ("write_file", {"path": f"{secret}.txt", "content": secret}),
        ("edit_file", {"path": "src/app.py", "old": "b + a", "new": secret}),
    ]


def test_a_model_echoing_its_key_leaves_it_in_no_file_and_no_log_line(
    hostile: Hostile, tmp_path: Path, logged: io.StringIO
) -> None:
    calls = [
        tool_call(n, a, call_id=f"c{i}", content=f"my key is {KEY}")
        for i, (n, a) in enumerate(_echo_turns(KEY))
    ]
    with ChatServer() as server:
        server.script(
            "acme/echo",
            status(500, body=json.dumps({"error": f"upstream refused key {KEY}"})),
            status(400, body=json.dumps({"error": {"message": f"invalid key {KEY}"}})),
        )
        server.script(
            "acme/echo-2", *calls, answer(f"FINDING: the key {KEY} leaks\nWHERE: src/app.py:2\n{KEY}")
        )
        spec = AgentSpec.model_validate(
            {
                "name": "echo",
                "kind": "http",
                "base_url": server.url,
                "model": "acme/echo",
                "fallback": ["acme/echo-2"],
                "api_key_env": KEY_ENV,
                "max_rounds": 20,
            }
        )
        events: list[tuple[str, dict[str, Any]]] = []
        state = tmp_path / "state"
        result = run_http_agent(
            spec,
            role="judge",
            prompt="Judge the finding.",
            worktree=hostile.wt,
            out_dir=state / "runs" / "r1",
            name="triage.f1.1",
            timeout=60,
            env={KEY_ENV: KEY, "PATH": os.environ["PATH"]},
            on_event=lambda name, fields: events.append((name, fields)),
            sleep=lambda _s: None,
            checks={"test": DECLARED},
        )
        requests = server.requests
    assert result.proc.exit_code == 0, result.proc.error
    assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in requests)
    # the model did echo it, and every echo was redacted on the way in
    assert "[redacted]" in result.report and "[redacted]" in result.stderr
    assert (hostile.wt / "[redacted].txt").read_text() == "[redacted]"
    assert (hostile.wt / "src" / "app.py").read_text() == "def add(a, b):\n    return [redacted]\n"
    written = [p for p in tmp_path.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert written == [], f"the key was written to {written}"
    assert KEY not in json.dumps(events) and KEY not in result.report and KEY not in result.stderr
    out = logged.getvalue()
    assert "tool.failed" in out and "not a file: [redacted]" in out  # the log did record the echoes ...
    assert KEY not in out  # ... without the key
    hostile.untouched()


def test_every_log_line_is_redacted_whatever_logged_it(logged: io.StringIO) -> None:
    secret = "sk-log-" + secrets.token_hex(16)
    logs.add_secret(secret)
    log = structlog.get_logger()
    log.info(f"event {secret}", nested={"deep": [secret, {"k": secret}]}, **{secret: 1})
    try:
        raise RuntimeError(f"boom {secret}")
    except RuntimeError:
        log.exception("failed")
    out = logged.getvalue()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["event"] for line in lines] == ["event [redacted]", "failed"]
    assert lines[0]["nested"] == {"deep": ["[redacted]", {"k": "[redacted]"}]} and lines[0]["[redacted]"] == 1
    assert "boom [redacted]" in lines[1]["exception"]
    assert secret not in out


# --- the same model in a whole review: no file under the state directory, no output -------------------


def echoing(brain: Brain) -> Brain:
    """``brain`` as a model that echoes the key: its first answer ever is an error body carrying it; each
    conversation starts with tool calls carrying it in their arguments (and in the turn's text; a write
    only where it is refused); its findings end with it."""
    first = [True]

    def think(request: Recorded) -> Reply:
        if first[0]:
            first[0] = False
            return status(500, body=json.dumps({"error": f"upstream refused key {KEY}"}))
        convo = Conversation.of(request.body)
        echoes = [
            (name, args)
            for name, args in _echo_turns(KEY)
            if name != "edit_file" and (name != "write_file" or name not in convo.offered)
        ]
        if len(convo.turns) < len(echoes):
            name, args = echoes[len(convo.turns)]
            return tool_call(name, args, call_id=f"echo_{len(convo.turns)}", content=f"my key is {KEY}")
        reply = brain(request)
        data = json.loads(reply.body)
        message = data["choices"][0]["message"]
        if isinstance(message.get("content"), str) and message["content"].startswith("FINDING"):
            message["content"] += f"\nMy key, for the record: {KEY}"
        return Reply(status=reply.status, body=json.dumps(data).encode(), headers=reply.headers)

    return think


def http_entry(name: str, url: str, model: str) -> str:
    return (
        f'[agents.{name}]\nkind = "http"\nbase_url = {json.dumps(url)}\nmodel = {json.dumps(model)}\n'
        f'api_key_env = "{KEY_ENV}"\ntimeout = 20\nmax_rounds = 20\nexpect_seconds = 5\n'
    )


def test_a_whole_review_with_key_echoing_models_writes_the_key_nowhere(
    jury, sample_repo: Path, write_config, state_dir: Path
) -> None:
    check = "python3 -m unittest discover"
    with ChatServer() as server:
        server.think("acme/scout-1", with_key(KEY, echoing(ScriptedModel(check=check))))
        server.think("judgeco/arbiter-1", with_key(KEY, echoing(ScriptedModel(check=check))))
        config = write_config(
            http_entry("scout", server.url, "acme/scout-1"),
            http_entry("arbiter", server.url, "judgeco/arbiter-1"),
            f"[checks]\ntest = {json.dumps(check)}\n",
        )
        r = jury(
            "review",
            str(sample_repo),
            "--branch",
            "feature",
            "--trunk",
            "main",
            "--reviewer",
            "scout",
            "--judge",
            "arbiter",
            "--config",
            str(config),
            env={KEY_ENV: KEY, "JURY_LOG_LEVEL": "DEBUG"},
            timeout=240,
        )
        requests = server.requests
    assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in requests)
    assert list((state_dir / "logs").glob("worker-*.log")), "the workers' logs are part of the check"
    leaked = [p for p in state_dir.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaked == [], f"the API key was written to {leaked}"
    assert KEY not in r.out and KEY not in r.err
    # and the models did echo it, through every door: answers, tool arguments, error bodies
    (run,) = (state_dir / "runs").iterdir()
    events = [json.loads(line) for line in (run / "events.ndjson").read_text().splitlines()]
    raised = [e for e in events if e["t"] == "finding.raised"]
    assert raised and "[redacted]" in json.dumps(raised), r.out + r.err
    refused = [e for e in events if e["t"] == "tool.refused"]
    assert any("[redacted]" in e["reason"] for e in refused)
    assert any(e["t"] == "finding.resolved" for e in events), r.out + r.err  # the judge ran too
    branches = subprocess.run(
        ["git", "-C", str(sample_repo), "log", "--all", "-p"], capture_output=True, text=True, check=True
    ).stdout
    assert KEY not in branches
