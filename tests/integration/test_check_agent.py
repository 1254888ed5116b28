"""Check agents on a real git repository: real processes, real diffs, real ruff and pytest."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from orchestrator.parse import parse_review
from orchestrator.spec import AgentSpec, SandboxSettings
from workers.agents.check import run_check_agent

RUFF = Path(sys.executable).parent / "ruff"
GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}

# Line 1 (unchanged) and line 3 (added by the change) both import something unused.
BASE_MOD = "import sys\nx = 1\n"
HEAD_MOD = "import sys\nx = 1\nimport os\n"


def git(wt: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=wt, check=True, env=GIT_ENV, capture_output=True, text=True)
    return proc.stdout


def commit(wt: Path, message: str) -> str:
    git(wt, "add", "-A")
    git(wt, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return git(wt, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose HEAD adds ``import os`` on line 3 of pkg/mod.py; returns it and the base sha."""
    wt = tmp_path / "wt"
    (wt / "pkg").mkdir(parents=True)
    (wt / "pkg" / "mod.py").write_text(BASE_MOD, encoding="utf-8")
    (wt / "README.md").write_text("hi\n", encoding="utf-8")
    git(wt, "init", "-q", "-b", "main")
    base = commit(wt, "base")
    (wt / "pkg" / "mod.py").write_text(HEAD_MOD, encoding="utf-8")
    commit(wt, "change")
    return wt, base


def script(tmp_path: Path, body: str) -> str:
    """A command running a small python script (outside the worktree) with this interpreter."""
    path = tmp_path / f"tool{len(list(tmp_path.glob('tool*.py')))}.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return f"{sys.executable} {path}"


RUFF_STYLE = """\
    import sys
    print("pkg/mod.py:1:8: F401 [*] `sys` imported but unused")
    print("pkg/mod.py:3:8: F401 [*] `os` imported but unused")
    print("Found 2 errors.")
    sys.exit(1)
"""


def check(command: str, **over: Any) -> AgentSpec:
    return AgentSpec.model_validate({"name": "lint", "kind": "check", "command": command, **over})


def run(spec: AgentSpec, wt: Path, base: str, out: Path, **kw: Any):
    kw.setdefault("role", "reviewer")
    # the tool scripts live beside the worktree, in the test's tmp dir, which the sandbox hides otherwise
    kw.setdefault("sandbox", SandboxSettings(ro_paths=[str(out.parent)]))
    out.parent.chmod(0o755)  # pytest makes it 0700: a root worker's jail runs as a uid of its own
    return run_check_agent(
        spec, prompt="ignored", worktree=wt, out_dir=out, name="round-1.lint", timeout=30, base=base, **kw
    )


def locs(report: str) -> list[str]:
    return [f.loc for f in parse_review(report).findings]


def test_only_changed_lines_become_findings(repo: tuple[Path, str], tmp_path: Path) -> None:
    wt, base = repo
    result = run(check(script(tmp_path, RUFF_STYLE), parser="ruff"), wt, base, tmp_path / "out")
    assert result.proc.exit_code == 0 and result.proc.error is None
    (finding,) = parse_review(result.report).findings
    assert finding.loc == "pkg/mod.py:3"
    assert finding.claim == "ruff F401: `os` imported but unused"
    assert (tmp_path / "out" / "round-1.lint.stdout.txt").read_text() == result.report
    assert result.cost_usd == 0.0
    assert result.usage == {"diagnostics": 2, "kept": 1}


def test_scope_all_keeps_every_diagnostic(repo: tuple[Path, str], tmp_path: Path) -> None:
    wt, base = repo
    result = run(check(script(tmp_path, RUFF_STYLE), parser="ruff", scope="all"), wt, base, tmp_path / "out")
    assert locs(result.report) == ["pkg/mod.py:1", "pkg/mod.py:3"]


def test_auto_parser_reads_ruff_style_output(repo: tuple[Path, str], tmp_path: Path) -> None:
    wt, base = repo
    result = run(check(script(tmp_path, RUFF_STYLE)), wt, base, tmp_path / "out")
    assert locs(result.report) == ["pkg/mod.py:3"]


def test_nothing_on_changed_lines_is_clean(repo: tuple[Path, str], tmp_path: Path) -> None:
    wt, base = repo
    only_old = 'import sys\nprint("pkg/mod.py:1:8: F401 `sys` imported but unused")\nsys.exit(1)\n'
    result = run(check(script(tmp_path, only_old), parser="ruff"), wt, base, tmp_path / "out")
    assert result.proc.exit_code == 0
    assert parse_review(result.report).verdict == "clean"


@pytest.mark.skipif(not RUFF.exists(), reason="ruff is not installed next to the interpreter")
def test_real_ruff_concise(repo: tuple[Path, str], tmp_path: Path) -> None:
    wt, base = repo
    spec = check(f"{RUFF} check --isolated --no-cache --select F401 --output-format concise pkg")
    result = run(spec, wt, base, tmp_path / "out")
    (finding,) = parse_review(result.report).findings
    assert finding.loc == "pkg/mod.py:3"
    assert finding.claim.startswith("ruff F401: ") and "`os`" in finding.claim
    assert git(wt, "status", "--porcelain") == ""


@pytest.mark.skipif(not RUFF.exists(), reason="ruff is not installed next to the interpreter")
def test_real_ruff_json_paths_are_made_relative(repo: tuple[Path, str], tmp_path: Path) -> None:
    wt, base = repo
    spec = check(f"{RUFF} check --isolated --no-cache --select F401 --output-format json .", scope="all")
    result = run(spec, wt, base, tmp_path / "out")
    assert locs(result.report) == ["pkg/mod.py:1", "pkg/mod.py:3"]


def test_real_pytest_failure_in_an_untouched_test_is_kept(repo: tuple[Path, str], tmp_path: Path) -> None:
    wt, base = repo
    (wt / "tests").mkdir()
    (wt / "tests" / "test_mod.py").write_text(
        "import pkg.mod\n\ndef test_x():\n    assert pkg.mod.x == 2\n", encoding="utf-8"
    )
    (wt / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    commit(wt, "test")  # the test file is part of the change here, but its failing line is not
    base_sha = base
    spec = check(f"{sys.executable} -m pytest -q -p no:cacheprovider tests")
    result = run(spec, wt, base_sha, tmp_path / "out")
    (finding,) = parse_review(result.report).findings
    assert finding.loc == "tests/test_mod.py:4"
    assert finding.claim.startswith("pytest FAILED: tests/test_mod.py::test_x failed")
    assert git(wt, "status", "--porcelain") == ""  # no bytecode or cache left in the worktree


def test_failing_command_without_diagnostics_gives_one_finding(
    repo: tuple[Path, str], tmp_path: Path
) -> None:
    wt, base = repo
    crash = (
        'import sys\nprint("starting")\nprint("Traceback: config is broken", file=sys.stderr)\nsys.exit(2)\n'
    )
    result = run(check(script(tmp_path, crash)), wt, base, tmp_path / "out")
    assert result.proc.exit_code == 0
    (finding,) = parse_review(result.report).findings
    assert finding.loc == "pkg/mod.py:3"  # the first changed file, at its first changed line
    assert finding.claim.startswith("lint exit 2: ") and "config is broken" in finding.claim
    assert "starting" in finding.body and "config is broken" in finding.body


def test_parser_none_turns_a_failure_into_one_finding(repo: tuple[Path, str], tmp_path: Path) -> None:
    wt, base = repo
    result = run(check(script(tmp_path, RUFF_STYLE), parser="none"), wt, base, tmp_path / "out")
    (finding,) = parse_review(result.report).findings
    assert finding.claim.startswith("lint exit 1: ")


def test_passing_command_is_clean(repo: tuple[Path, str], tmp_path: Path) -> None:
    wt, base = repo
    result = run(check(f"{sys.executable} -c pass"), wt, base, tmp_path / "out")
    assert result.proc.exit_code == 0 and parse_review(result.report).verdict == "clean"


def test_reply_seat_answers_no_contest_without_running(repo: tuple[Path, str], tmp_path: Path) -> None:
    wt, base = repo
    marker = tmp_path / "ran"
    cmd = script(tmp_path, f"open({str(marker)!r}, 'w').write('x')\n")
    result = run(check(cmd), wt, base, tmp_path / "out", role="reply")
    assert result.report.strip() == "NO CONTEST" and result.proc.exit_code == 0
    assert not marker.exists()


@pytest.mark.parametrize(
    ("command", "role", "base_ok", "error"),
    [
        ("no-such-checker-xyz .", "reviewer", True, "command not found: no-such-checker-xyz"),
        (f"{sys.executable} -c pass", "judge", True, "a check agent cannot act as judge"),
        (f"{sys.executable} -c pass", "reviewer", False, "cannot diff against base"),
    ],
)
def test_check_errors(
    repo: tuple[Path, str], tmp_path: Path, command: str, role: str, base_ok: bool, error: str
) -> None:
    wt, base = repo
    result = run(check(command), wt, base if base_ok else "0" * 40, tmp_path / "out", role=role)
    assert result.proc.exit_code == 1
    assert error in (result.proc.error or "")
    assert result.report == ""


def test_check_timeout(repo: tuple[Path, str], tmp_path: Path) -> None:
    wt, base = repo
    spec = check(f'{sys.executable} -c "import time; time.sleep(20)"')
    result = run_check_agent(
        spec,
        role="reviewer",
        prompt="",
        worktree=wt,
        out_dir=tmp_path / "out",
        name="n",
        timeout=0.5,
        base=base,
    )
    assert result.proc.timed_out and result.proc.exit_code == 1
