"""No sandbox, no run: ``jury doctor`` says why, a review ends ``human`` with that reason without running
any agent, and ``[sandbox] mode = "none"`` is said in the summary and the record."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import fake_agent
from tests.e2e.test_review import review_args, run_dir, standard_jury

NO_BWRAP = {"JURY_BWRAP": "/nonexistent"}
MISSING = "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"


def test_doctor_says_the_sandbox_works(jury) -> None:
    r = jury("doctor")
    assert r.code == 0, r.out + r.err
    assert "sandbox    ok" in r.out and "bwrap      ok" in r.out


def test_doctor_without_bubblewrap_says_so(jury) -> None:
    r = jury("doctor", env=NO_BWRAP)
    assert r.code == 1, r.out + r.err
    assert "bwrap      FAIL  not installed" in r.out
    assert MISSING in r.err


def test_review_without_bubblewrap_ends_human_with_the_reason(
    jury, sample_repo: Path, write_config, state_dir: Path, fake_state: Path
) -> None:
    r = jury(*review_args(sample_repo, standard_jury(write_config)), env=NO_BWRAP)
    assert r.code == 1, r.out + r.err
    assert MISSING in r.out
    doc = json.loads((run_dir(state_dir) / "run.json").read_text())
    assert doc["target"]["state"] == "human"
    assert doc["target"]["stateNote"].startswith(f"sandbox unavailable: {MISSING}")
    events = [json.loads(x) for x in (run_dir(state_dir) / "events.ndjson").read_text().splitlines()]
    assert not [e for e in events if e["t"] == "agent.launch"]  # nothing ran, confined or not
    assert list(fake_state.iterdir()) == []


def test_sandbox_off_is_said_in_the_summary_and_the_record(
    jury, sample_repo: Path, tmp_path: Path, state_dir: Path
) -> None:
    config = tmp_path / "operator.toml"
    config.write_text(
        '[sandbox]\nmode = "none"\n'
        + "\n".join(
            [fake_agent("finder", "clean"), fake_agent("quiet", "clean"), fake_agent("judge", "clean", "fix")]
        )
    )
    r = jury(*review_args(sample_repo, config), env=NO_BWRAP)  # mode none needs no bubblewrap
    assert r.code == 0, r.out + r.err
    assert "sandbox off: the reviewed code ran unconfined" in r.out
    events = [json.loads(x) for x in (run_dir(state_dir) / "events.ndjson").read_text().splitlines()]
    (cfg,) = [e for e in events if e["t"] == "jury.config"]
    assert "sandbox off: the reviewed code ran unconfined" in cfg["config"]["configNotes"]
