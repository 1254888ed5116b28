"""A hostile PR, end to end: its ``conftest.py`` runs whenever pytest does (the declared check, the
verification of the judge's fix) and tries to reach what it must not — the worker's HOME, the host's
/tmp, the reviewed repository's ``.git/config`` (a planted ``filter`` that Jury's own ``git add`` would
then run), the worktree's ``.git`` link (a repository of its own, with that filter) and the network. The
sandbox confines it, and the run still converges."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

from orchestrator.spec import SandboxSettings
from tests.conftest import fake_agent
from workers.isolation.sandbox import sandbox_problem

pytestmark = pytest.mark.skipif(sandbox_problem(SandboxSettings()) is not None, reason="no bubblewrap here")

IDENTITY = ["-c", "user.name=pr", "-c", "user.email=pr@example.com"]

HOSTILE_CONFTEST = """
import os, pathlib, socket, subprocess

# Runs at every pytest start inside the repository: try everything, never fail the tests.
def _try(what, fn):
    try:
        fn()
        print("HOSTILE", what, "worked")
    except Exception as exc:
        print("HOSTILE", what, "refused:", type(exc).__name__)

_try("home", lambda: (pathlib.Path(os.environ.get("HOME", "/root")) / "jury-pwned-{tag}").write_text("x"))
_try("host tmp", lambda: pathlib.Path("{host_marker}").write_text("x"))
_try("git config", lambda: subprocess.run(
    ["git", "config", "filter.pwn.clean", "touch {filter_marker}"], check=True, capture_output=True))
_try("network", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2).close())

def _own_repository():
    # The worktree is writable: replace its .git link with a repository of its own that borrows the
    # real one's objects, index and HEAD and whose config names the filter, so the worker's next
    # checkout-index or git add in this checkout would run it.
    admin = pathlib.Path(pathlib.Path(".git").read_text().split("gitdir:", 1)[1].strip())
    common = (admin / (admin / "commondir").read_text().strip()).resolve()
    index, head = (admin / "index").read_bytes(), (admin / "HEAD").read_text()
    os.remove(".git")
    subprocess.run(["git", "init", "-q", "."], check=True, capture_output=True)
    pathlib.Path(".git/objects/info/alternates").write_text(str(common / "objects") + "\\n")
    pathlib.Path(".git/index").write_bytes(index)
    pathlib.Path(".git/HEAD").write_text(head)
    subprocess.run(["git", "config", "filter.pwn.clean", "touch {filter_marker}"], check=True)
    subprocess.run(["git", "config", "filter.pwn.smudge", "touch {filter_marker}"], check=True)

_try("git link", _own_repository)
"""


def test_a_hostile_conftest_reaches_nothing_and_the_run_converges(
    jury, sample_repo: Path, write_config, state_dir: Path, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    # the worker's HOME: not under pytest's /tmp root, which the fake agents keep as their state dir
    home = Path(tempfile.mkdtemp(prefix="jury-hostile-home-", dir="/var/tmp"))
    host_marker = Path("/tmp") / f"jury-hostile-{tag}"
    filter_marker = Path("/tmp") / f"jury-filter-ran-{tag}"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]

    # The PR adds the conftest on its branch (with the buggy median), and a .gitattributes using the filter.
    subprocess.run(["git", "-C", str(sample_repo), "checkout", "-q", "feature"], check=True)
    (sample_repo / "conftest.py").write_text(
        textwrap.dedent(HOSTILE_CONFTEST).format(
            tag=tag, host_marker=host_marker, filter_marker=filter_marker, port=port
        )
    )
    (sample_repo / ".gitattributes").write_text("*.py filter=pwn\n")
    subprocess.run(["git", "-C", str(sample_repo), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(sample_repo), *IDENTITY, "commit", "-qm", "tests: a conftest"], check=True
    )
    subprocess.run(["git", "-C", str(sample_repo), "checkout", "-q", "main"], check=True)
    git_config = (sample_repo / ".git" / "config").read_bytes()

    config = write_config(
        fake_agent("finder", "find"),
        fake_agent("quiet", "clean"),
        fake_agent("judge", "clean", "fix"),
        '[checks]\ntest = "python -m pytest -q"\n',
    )
    try:
        r = jury(
            "review",
            str(sample_repo),
            "--branch",
            "feature",
            "--trunk",
            "main",
            "--reviewer",
            "finder,quiet",
            "--judge",
            "judge",
            "--config",
            str(config),
            env={"HOME": str(home)},
            timeout=300,
        )
        try:
            connection, _ = listener.accept()
            connection.close()
            connected = True
        except BlockingIOError:
            connected = False
    finally:
        listener.close()
        planted = sorted(p.name for p in home.iterdir())
        shutil.rmtree(home, ignore_errors=True)

    assert r.code == 0, r.out + r.err  # the fix was verified under pytest (and the conftest) and integrated
    runs = list((state_dir / "runs").iterdir())
    verified = [line for line in (runs[0] / "events.ndjson").read_text().splitlines() if "verify.ran" in line]
    assert verified, "pytest never ran: the conftest was never put to the test"
    assert not connected, "the conftest reached a loopback listener"
    assert (sample_repo / ".git" / "config").read_bytes() == git_config
    assert not host_marker.exists() and not filter_marker.exists()
    assert planted == []
    assert not list(Path.home().glob(f"jury-pwned-{tag}"))
