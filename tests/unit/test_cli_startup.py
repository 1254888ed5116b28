"""Start-up: ``jury --help``, ``jury version`` and ``jury runs --help`` import none of the broker, Redis,
httpx or the domain models. Every command used to import the whole project first (0.76-0.9 s for
``jury --help`` against 0.01 s for a bare Python); the commands are now loaded when run (``jury_cli.app``).
The times are in the benchmark: ``python -m bench.startup``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from jury_cli.app import COMMANDS, load_command
from tests.conftest import outside_env

# Runs ``jury ARGS`` in this interpreter through ``jury_cli.app.main``, then prints the names of every
# module loaded, as JSON, on the last line of stderr.
LOADED_AFTER = (
    "import json, sys\n"
    "from jury_cli.app import main\n"
    "sys.argv = ['jury', *sys.argv[1:]]\n"
    "try:\n"
    "    main()\n"
    "except SystemExit as exc:\n"
    "    code = exc.code\n"
    "sys.stderr.write('\\n' + json.dumps({'code': code, 'modules': sorted(sys.modules)}) + '\\n')\n"
)
HEAVY = ("celery", "kombu", "redis", "httpx", "orchestrator.domain")
# Not forbidden as such, but most of what is left of the start-up when imported: rich (the consoles of
# jury_cli.context are made when first used), and pydantic: typer coerces an unset
# --help (None) through pydantic unless it is False (``jury_cli.app.UnsetHelpIsFalse``).
ALSO_HEAVY = ("pydantic", "rich")


def loaded_by(*args: str) -> tuple[str, set[str]]:
    """``jury ARGS``'s output and the modules it loaded (it must exit 0)."""
    p = subprocess.run(
        [sys.executable, "-c", LOADED_AFTER, *args],
        capture_output=True,
        text=True,
        env=outside_env(),
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    report = json.loads(p.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None), p.stdout + p.stderr
    return p.stdout, set(report["modules"])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--help",), "Commands:"),
        (("version",), "jury "),
        (("runs", "--help"), "List runs: slug, state, rounds, findings, open."),
    ],
)
def test_light_commands_import_no_broker_store_client_or_domain(args: tuple[str, ...], says: str) -> None:
    out, modules = loaded_by(*args)
    assert says in out, out
    heavy = sorted(m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY))
    assert not heavy, f"jury {' '.join(args)} imported {heavy}"
    assert "jury_cli.review" not in modules and "workers" not in modules  # no other command's module
    also = sorted({m.split(".")[0] for m in modules} & set(ALSO_HEAVY))
    assert not also, f"jury {' '.join(args)} imported {also}"


def test_help_lists_every_command_with_its_own_docstring_without_importing_it() -> None:
    out, modules = loaded_by("--help")
    for name in COMMANDS:
        assert f"\n  {name} " in out, (name, out)
    assert not any(m.startswith("jury_cli.") and m != "jury_cli.app" for m in modules), sorted(modules)
    for name, (_, _, line) in COMMANDS.items():  # the table's line is the command's docstring's
        assert load_command(name).get_short_help_str(10**6) == line, name


def test_version_says_the_installed_version() -> None:
    from importlib.metadata import version

    out, _ = loaded_by("version")
    assert out.strip() == f"jury {version('jury-review')}"


def test_every_command_starts_writing_privately() -> None:
    """``main`` sets the private umask (``orchestrator.private_files.write_privately``) before any
    command runs, a light one such as ``jury version`` included."""
    code = (
        "import os, sys\n"
        "from jury_cli.app import main\n"
        "sys.argv = ['jury', 'version']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(oct(os.umask(0)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(done.stdout.split()[-1], 8) == 0o077
