"""A command is split only up to ``MAX_COMMAND`` characters: the standard library's shell-like tokenizer
is quadratic in a token's length, and a judge's ``test_command`` is whatever its answer says. Over the cap
a command has no signal kind and is not run; under it nothing changes."""

from __future__ import annotations

import shlex

import pytest

from orchestrator.refute.commands import MAX_COMMAND, classify_command, commands_in_task, split_command


def test_a_command_over_the_cap_is_not_split_and_has_no_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_split(*_: object, **__: object) -> None:
        raise AssertionError("shlex was handed a command over the cap")

    # The cap answers before the tokenizer (seconds of CPU over a 1 MB word) is ever reached.
    monkeypatch.setattr(shlex, "shlex", no_split)
    monkeypatch.setattr(shlex, "split", no_split)
    huge = "pytest -q tests/test_" + "x" * 1_000_000
    assert classify_command(huge) is None
    refusal = split_command(huge)
    assert isinstance(refusal, str) and "1,000,021 characters, over 8,192" in refusal
    assert commands_in_task(f"run `{huge}`") == []


def test_a_command_at_the_cap_is_split_as_before() -> None:
    command = "pytest -q tests/test_a.py::" + "t" * (MAX_COMMAND - len("pytest -q tests/test_a.py::"))
    assert len(command) == MAX_COMMAND
    assert classify_command(command) == "test"
    argv, env = split_command(command)  # type: ignore[misc]
    assert argv[:2] == ["pytest", "-q"] and env == {}
