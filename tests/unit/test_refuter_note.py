"""A run whose second opinion cannot be independent says so in its record from the start (a config
note: ``jury show``, the console and the PR's summary print them), naming any agent without a family and
why; a run with an independent refuter says nothing."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config import Settings, load_config
from orchestrator.spec import Target
from orchestrator.start import RunOptions, jury_config

LOCAL = Target(repo="app", path="/src/app", branch="feature")


def operator(tmp_path: Path, agents: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(agents)
    return path


def entry(name: str, model: str | None = None) -> str:
    model_line = f'model = "{model}"\n' if model else ""
    judge = f'judge_argv = ["{name}", "{{prompt}}"]\n'
    return f'[agents.{name}]\nargv = ["{name}", "{{prompt}}"]\n{judge}{model_line}'


def test_no_family_is_said_in_the_run_record(tmp_path: Path) -> None:
    cfg = load_config(None, operator(tmp_path, entry("mybot") + entry("judgebot", "anthropic/claude-x")))
    opts = RunOptions(reviewers="mybot", judge="judgebot")
    notes = jury_config(Settings(dir=tmp_path), cfg, LOCAL, opts).config_notes
    (note,) = [n for n in notes if n.startswith("second opinion:")]
    assert "nobody fits, it will be skipped" in note
    assert "mybot has no family: it has no model, and 'mybot' is no agent Jury knows" in note
    # --no-refute: nothing to say
    off = jury_config(
        Settings(dir=tmp_path), cfg, LOCAL, RunOptions(reviewers="mybot", judge="judgebot", refute=False)
    )
    assert not [n for n in off.config_notes if n.startswith("second opinion:")]


def test_an_independent_refuter_adds_no_note(tmp_path: Path) -> None:
    text = entry("mybot", "openai/gpt-x") + entry("judgebot", "anthropic/claude-x")
    cfg = load_config(None, operator(tmp_path, text))
    opts = RunOptions(reviewers="mybot", judge="judgebot")
    run = jury_config(Settings(dir=tmp_path), cfg, LOCAL, opts)
    assert run.refuter == "mybot"
    assert not [n for n in run.config_notes if n.startswith("second opinion:")]
