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


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # A negative concurrency started embedded workers that never took a task: the review hung.
        (("review", ".", "--concurrency", "-3"), "Invalid value for '--concurrency'"),
        (("review", ".", "--concurrency", "0"), "Invalid value for '--concurrency'"),
        (("sweep", "acme/widgets", "--concurrency", "0"), "Invalid value for '--concurrency'"),
        (("worker", "--concurrency", "0"), "Invalid value for '--concurrency'"),
        # 99999 was bound as 99999 mod 65536 = 34463, printed as the console's URL without a word.
        (("web", "--port", "99999"), "Invalid value for '--port'"),
        (("web", "--port", "-1"), "Invalid value for '--port'"),
        (("metrics", "--port", "70000"), "Invalid value for '--port'"),
        (("worker", "--metrics-port", "65536"), "Invalid value for '--metrics-port'"),
    ],
)
def test_numbers_out_of_range_are_refused_before_anything_starts(
    jury, args: tuple[str, ...], said: str
) -> None:
    r = jury(*args, timeout=60)
    assert r.code == 2, r.out + r.err
    assert said in r.err and "Traceback" not in r.err, r.err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("sweep", "acme/widgets", "--rounds", "0"), "--rounds must be at least 1, got 0"),
        # A negative timeout killed the test command at once and reported "no signal": nothing to check.
        (("refute", "--claim", "x", "--command", "true", "--timeout", "-1"), "--timeout must be a positive"),
        (("refute", "--claim", "x", "--command", "true", "--timeout", "0"), "--timeout must be a positive"),
        # Celery's traceback before: gevent is not installed; a level it does not know is a TypeError.
        (("worker", "--pool", "gevent"), "--pool 'gevent': use threads or prefork"),
        (("worker", "--loglevel", "LOUD"), "--loglevel 'LOUD': use one of DEBUG"),
        # An address that is not this machine's: the hint was "choose --port".
        (
            ("web", "--host", "192.0.2.1", "--token", "a-token-of-sixteen-chars"),
            "cannot listen on 192.0.2.1:3080: Cannot assign requested address (choose --host",
        ),
        # A slug that is none was a store failure's exit 1, as if the store had not answered.
        (("show", "../../etc"), "invalid run slug '../../etc'"),
        (("publish", "../x"), "invalid run slug '../x'"),
    ],
)
def test_a_wrong_value_of_a_command_is_its_message_and_exit_2(jury, args: tuple[str, ...], said: str) -> None:
    r = jury(*args, timeout=120)
    assert r.code == 2, r.out + r.err
    assert said in r.err and "Traceback" not in r.err, r.err
