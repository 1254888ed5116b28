"""A root worker's jail under a uid of its own, against real bubblewrap, setpriv and processes: the attacks
that worked while the jail was uid 0 on the host (a fork bomb past ``max_procs``, a disk filled through
/tmp or HOME, the host's ``/etc/shadow``, another run's worktree) and what must keep working (the own
worktree written, given back to the worker afterwards; two jails at once, each with its own uid).

Jury must run as root for these (as it does on a server that never made a worker user); elsewhere they
are skipped, and ``test_sandbox.py`` covers the user-namespace sandbox."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.config import Settings
from orchestrator.errors import GitError
from orchestrator.git import git as plain_git
from orchestrator.spec import SandboxSettings
from orchestrator.store.files import private_dir
from workers import doctor
from workers.isolation import jailuid
from workers.isolation.sandbox import Jail, sandbox_problem
from workers.isolation.supervise import ProcResult, run_supervised
from workers.isolation.worktree import git as worktree_git
from workers.verification.verify import run_command

pytestmark = pytest.mark.skipif(
    sandbox_problem(SandboxSettings()) is not None or not jailuid.switches_uid(SandboxSettings()),
    reason="needs bubblewrap and a worker running as root",
)

PY = sys.executable
BOMB = 400  # children the bomb asks for: far above the cap below, and still harmless when all of them come
CAP = 32


@pytest.fixture
def wt(tmp_path: Path) -> Path:
    """A worktree as Jury makes one: root's, files 0644."""
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "a.py").write_text("x = 1\n")
    return tree


@pytest.fixture
def outside() -> Iterator[Path]:
    """Jury's state directory on a path no tmpfs of the sandbox hides (not under /tmp or HOME, and not
    named by JURY_DIR): only the jail's uid keeps another run's worktree there out of reach."""
    root = Path(tempfile.mkdtemp(prefix="jury-state-", dir="/var/tmp"))
    other = private_dir(root / "worktrees" / "other-run")  # 0700, as Jury makes them
    (other / "secret.txt").write_text("other-run-secret\n")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def run(tmp_path: Path, jail: Jail, code: str, *, timeout: float = 120.0) -> tuple[ProcResult, str]:
    out = tmp_path / f"out-{uuid.uuid4().hex[:6]}"
    res = run_supervised(
        [PY, "-c", textwrap.dedent(code)],
        cwd=jail.worktree,
        env=dict(os.environ),
        stdout_path=out / "stdout",
        stderr_path=out / "stderr",
        timeout=timeout,
        grace=0.5,
        jail=jail,
    )
    return res, (out / "stdout").read_text() + (out / "stderr").read_text()


def value(out: str, key: str) -> str:
    """The value of the first ``KEY value`` line of ``out``."""
    for line in out.splitlines():
        if line.startswith(key + " "):
            return line.removeprefix(key + " ")
    raise AssertionError(f"no {key} line in:\n{out}")


FORK_BOMB = f"""
    import os
    r, w = os.pipe()
    got = 0
    stopped = "no"
    for _ in range({BOMB}):
        try:
            pid = os.fork()
        except OSError as exc:
            stopped = str(exc.errno)
            break
        if pid == 0:  # a child waits for the parent to go, holding a process slot meanwhile
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        got += 1
    print("UID", os.getuid())
    print("FORKED", got)
    print("STOPPED", stopped)
"""


def test_a_fork_bomb_stops_at_max_procs(tmp_path: Path, wt: Path) -> None:
    """RLIMIT_NPROC holds because the jail is not root on the host: the bomb gets fewer than ``max_procs``
    children (its uid has no other process) and the run ends at once, leaving nothing of that uid."""
    settings = SandboxSettings(max_procs=CAP)
    started = time.monotonic()
    res, out = run(tmp_path, Jail(worktree=wt, settings=settings), FORK_BOMB)
    assert res.exit_code == 0, out
    uid = int(value(out, "UID"))
    assert uid in jailuid.uid_range(settings) and uid != 0
    assert int(value(out, "FORKED")) < CAP, out
    assert value(out, "STOPPED") == str(errno.EAGAIN), out
    assert time.monotonic() - started < 60  # bounded: the test finishes quickly
    assert jailuid.processes_of(uid) == []  # the host keeps nothing of the jail


DISK_FILL = """
    import os, sys
    where = os.environ["HOME"] if sys.argv[1] == "HOME" else sys.argv[1]
    written = 0
    with open(os.path.join(where, "fill"), "wb") as f:  # no handler: the run fails as any would
        for _ in range(64):
            f.write(b"x" * (1 << 20))
            f.flush()
            written += 1 << 20
"""


@pytest.mark.parametrize("where", ["/tmp", "HOME"])
def test_a_write_past_the_disk_cap_fails_with_enospc(tmp_path: Path, wt: Path, where: str) -> None:
    """/tmp and HOME are tmpfs mounts of ``tmp_mb``: a 64 MiB write into 8 MiB ends in ENOSPC inside, the
    verification run records the failure (exit code, the error in its output), and nothing lands on the
    host (the file never shows there)."""
    (wt / "fill.py").write_text(textwrap.dedent(DISK_FILL))
    host = Path(os.environ["HOME"] if where == "HOME" else "/tmp") / "fill"
    assert not host.exists()
    outcome = run_command(
        f"{PY} fill.py {where}", wt, timeout=120, out_dir=tmp_path / "out", sandbox=SandboxSettings(tmp_mb=8)
    )
    assert outcome.error is None, outcome
    assert outcome.exit_code not in (0, None), outcome
    assert "No space left on device" in outcome.output_tail, outcome.output_tail
    assert not host.exists()


def test_host_secrets_and_other_runs_stay_closed(tmp_path: Path, wt: Path, outside: Path) -> None:
    """As the jail's uid, the host's /etc/shadow and another run's worktree (Jury's 0700 state directory,
    on a path no tmpfs hides) cannot be read; the own worktree can be written."""
    other = outside / "worktrees" / "other-run" / "secret.txt"
    code = f"""
        import os
        for path in ("/etc/shadow", {str(other)!r}, {str(outside)!r}):
            try:
                with open(path) if os.path.isfile(path) or path == "/etc/shadow" else os.scandir(path) as f:
                    print("READ", path, f.read() if hasattr(f, "read") else [e.name for e in f])
            except OSError as exc:
                print("DENIED", path, exc.errno)
        open("fix.py", "w").write("y = 2\\n")
        print("WROTE")
    """
    res, out = run(tmp_path, Jail(worktree=wt), code)
    assert res.exit_code == 0, out
    assert "READ" not in out and "other-run-secret" not in out and "root:" not in out, out
    assert f"DENIED /etc/shadow {errno.EACCES}" in out
    assert f"DENIED {outside} {errno.EACCES}" in out
    assert f"DENIED {other} {errno.EACCES}" in out
    assert "WROTE" in out and (wt / "fix.py").read_text() == "y = 2\n"


def test_the_worktree_comes_back_to_the_worker_without_set_uid_bits(tmp_path: Path, wt: Path) -> None:
    """The jail's uid owns the worktree while it runs; afterwards every file is the worker's again, and a
    set-uid program the jail left there is one no longer."""
    code = """
        import os
        print("OWNER", os.stat(".").st_uid, os.getuid())
        open("prog", "w").write("#!/bin/sh\\n")
        os.chmod("prog", 0o6755)
        os.mkdir("made")
        open("made/f", "w").write("x")
    """
    res, out = run(tmp_path, Jail(worktree=wt), code)
    assert res.exit_code == 0, out
    owner, uid = value(out, "OWNER").split()
    assert owner == uid != "0"
    for path in (wt, wt / "a.py", wt / "prog", wt / "made", wt / "made" / "f"):
        st = path.stat()
        assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()), path
    assert not (wt / "prog").stat().st_mode & (stat.S_ISUID | stat.S_ISGID)


def test_two_jails_at_once_never_share_a_uid(tmp_path: Path) -> None:
    """Two jails that run at the same time (each waits until it sees the other's mark) have two uids."""
    marks = tmp_path / "marks"
    marks.mkdir(mode=0o777)
    marks.chmod(0o777)  # both jails' uids write their mark here (bound writable into each)
    code = f"""
        import os, time
        mine = os.path.join({str(marks)!r}, str(os.getuid()))
        open(mine, "w").close()
        deadline = time.monotonic() + 60
        while len(os.listdir({str(marks)!r})) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        print("UID", os.getuid(), "SAW", len(os.listdir({str(marks)!r})))
    """
    outs: dict[str, str] = {}

    def one(name: str) -> None:
        tree = tmp_path / name
        tree.mkdir()
        outs[name] = run(tmp_path, Jail(worktree=tree, rw_paths=(marks,)), code)[1]

    threads = [threading.Thread(target=one, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    uids = {value(outs[n], "UID").split()[0] for n in outs}
    assert all(value(outs[n], "UID").endswith("SAW 2") for n in outs), outs
    assert len(uids) == 2, outs


def test_no_free_uid_is_a_start_error_never_a_shared_uid(tmp_path: Path, wt: Path) -> None:
    free = next(u for u in range(61000, 62000) if not jailuid._has_account(u))
    settings = SandboxSettings(uids=f"{free}-{free}")
    held = jailuid.claim(settings)
    try:
        res, _out = run(tmp_path, Jail(worktree=wt, settings=settings), "print('ran')")
        assert res.exit_code is None and res.error is not None
        assert "every jail uid" in res.error and "[sandbox] uids" in res.error
    finally:
        held.release()
    res, out = run(tmp_path, Jail(worktree=wt, settings=settings), "import os; print('UID', os.getuid())")
    assert res.exit_code == 0 and value(out, "UID") == str(free), out


def test_doctor_names_the_jail_uid() -> None:
    report = doctor.diagnose(Settings(), SandboxSettings(uids="60000-60009"))
    check = next(c for c in report.checks if c.what == "jail uid")
    assert check.ok and "60000-60009" in check.text and "not root" in check.text
    report = doctor.diagnose(Settings(), SandboxSettings(uids=""))
    assert doctor.ROOT_NOTE in report.notes


def test_jurys_git_trusts_a_checkout_a_jail_owns_and_nothing_else(tmp_path: Path) -> None:
    """While a jail's uid owns a checkout (a judge writing it), Jury's own git there still works, through
    ``safe.directory`` for that path alone; plain git refuses it, as it refuses any tree another owns."""
    repo, tree = tmp_path / "repo", tmp_path / "tree"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    (repo / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "-C", str(repo), "add", "a.py"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "one"], check=True)
    subprocess.run([*git, "-C", str(repo), "worktree", "add", "-q", "--detach", str(tree)], check=True)
    claim = jailuid.claim(SandboxSettings())
    try:
        jailuid.hand_over([tree], claim.uid)
        (tree / "a.py").write_text("x = 2\n")
        with pytest.raises(GitError, match="dubious ownership"):
            plain_git(["status", "--porcelain"], tree)
        assert worktree_git(["status", "--porcelain"], tree).strip() == "M a.py"
        jailuid.take_back([tree], claim.uid)
        assert worktree_git(["status", "--porcelain"], tree).strip() == "M a.py"
    finally:
        claim.release()
