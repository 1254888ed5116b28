"""Usage errors are a message and exit 2, never a traceback."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("nosuch",), "No such command 'nosuch'"),
        (("review", "--nosuch"), "No such option: --nosuch"),
        (("show",), "Missing argument"),
    ],
)
def test_usage_error_is_a_message_and_exit_2(jury, args: tuple[str, ...], said: str) -> None:
    r = jury(*args)
    assert r.code == 2, r.out + r.err
    assert said in r.err
    assert "Traceback" not in r.err
    assert "Usage: jury" in r.err


def test_help_names_the_operator_tables_as_written(jury) -> None:
    """Help texts name TOML tables; read as console markup they vanished (``the operator's  settings``)."""
    r = jury("--help")
    assert r.code == 0, r.out + r.err
    assert "[[schedules]]" in r.out
    r = jury("doctor", "--help")
    assert "[sandbox]" in r.out, r.out
