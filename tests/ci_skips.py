"""Under ``CI=true`` a skipped test fails the session (a pytest plugin, loaded by ``tests/conftest.py``).

Every skip in this suite stands for something the machine lacks: bubblewrap that can make namespaces, a
``redis-server`` built with TLS, ``openssl``, Chromium, the codex CLI, ruff beside the interpreter.
``.ci/run`` installs all of them, so a skip in CI is a check that did not run, and the sandbox's and the
hostile PR's tests are among them: a machine whose kernel refuses user namespaces would otherwise pass CI
with every sandbox test skipped. Off CI a skip stays a skip, with its reason, as pytest shows it.

Expected failures (``xfail``) are not skips and pass through. Under pytest-xdist the controller counts the
reports its workers send back; a worker itself changes nothing.
"""

from __future__ import annotations

import os

import pytest

SKIPPED = pytest.StashKey[list[str]]()


def enforced() -> bool:
    return os.environ.get("CI") == "true"


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason pytest gives for a skip (its long representation is ``(path, line, reason)``)."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SKIPPED] = []
    config.pluginmanager.register(_Recorder(config), "jury-ci-skips-recorder")


class _Recorder:
    """Notes each skip as its report comes in: a test's (any phase) and a module's at collection."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def note(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            self.config.stash[SKIPPED].append(f"{report.nodeid}: {skip_reason(report)}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.note(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self.note(report)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    skipped = config.stash.get(SKIPPED, [])
    if not enforced() or is_worker(config) or not skipped:
        return
    terminalreporter.write_sep(
        "=", f"{len(skipped)} skipped under CI=true: each is a check that did not run", red=True
    )
    for line in skipped:
        terminalreporter.write_line(line)
    terminalreporter.write_line("Install what each names (.ci/run installs all of it), or run outside CI.")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if enforced() and not is_worker(session.config) and session.config.stash.get(SKIPPED, []):
        if exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
