"""The sandbox against real bubblewrap, real git and real processes: what hostile code run by Jury can
reach (HOME, the host's /tmp, the repository's git config, the network, the worker's environment), and
that nothing it starts outlives its timeout."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrator.spec import SandboxSettings
from tests.integration.jump_clock import JumpClock
from workers.isolation.jailuid import SAFE_DIRECTORY_ENV, switches_uid
from workers.isolation.sandbox import (
    ALLOWED_ENV,
    INSTALL_HINT,
    Jail,
    SandboxUnavailable,
    git_dirs_of,
    require_sandbox,
    sandbox_problem,
)
from workers.isolation.supervise import ProcResult, run_supervised

pytestmark = pytest.mark.skipif(sandbox_problem(SandboxSettings()) is not None, reason="no bubblewrap here")

PY = sys.executable


@pytest.fixture
def home() -> Iterator[Path]:
    """A worker HOME holding a secret an agent must never read. Not under /tmp, which the sandbox hides
    anyway: only the private HOME may hide this one."""
    h = Path(tempfile.mkdtemp(prefix="jury-test-home-", dir="/var/tmp"))
    (h / ".ssh").mkdir(parents=True)
    (h / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    yield h
    shutil.rmtree(h, ignore_errors=True)


@pytest.fixture
def worker_env(home: Path) -> dict[str, str]:
    """The worker's environment: a temporary HOME, secrets and Jury's own settings among the rest."""
    env = dict(os.environ)
    env.update(
        {
            "HOME": str(home),
            "SECRET_THING": "hunter2",
            "JURY_REDIS_URL": "redis://:pw@127.0.0.1:6379/0",
            "LC_ALL": "C.UTF-8",
            "PASSED_KEY": "sk-passed",
        }
    )
    return env


@pytest.fixture
def repo_wt(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(repository, linked worktree of it): the worktree's ``.git`` is a file pointing into the repo's."""
    repo, wt = tmp_path / "repo", tmp_path / "wt"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    (repo / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "-C", str(repo), "add", "a.py"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "one"], check=True)
    subprocess.run([*git, "-C", str(repo), "worktree", "add", "-q", "--detach", str(wt)], check=True)
    yield repo, wt


def run(
    tmp_path: Path,
    jail: Jail | None,
    code: str,
    env: dict[str, str],
    *,
    timeout: float = 30.0,
    interrupted: Callable[[], bool] | None = None,
) -> tuple[ProcResult, str]:
    """Run python ``code`` in the jail's worktree; (how it ended, its stdout)."""
    cwd = jail.worktree if jail is not None else tmp_path
    out = tmp_path / f"out-{uuid.uuid4().hex[:6]}"
    res = run_supervised(
        [PY, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=env,
        stdout_path=out / "stdout",
        stderr_path=out / "stderr",
        timeout=timeout,
        grace=0.5,
        interrupted=interrupted,
        max_output=1_000_000,
        jail=jail,
    )
    return res, (out / "stdout").read_text() + (out / "stderr").read_text()


TRY_WRITE = """
    import sys
    path = sys.argv[1] if len(sys.argv) > 1 else {path!r}
    try:
        with open(path, {mode!r}) as f:
            f.write({text!r})
        print("WROTE")
    except OSError as exc:
        print("ERRNO", exc.errno)
"""


def denied(out: str) -> bool:
    """Whether a ``try_write`` was refused by the kernel: a read-only mount (EROFS), or, in a root
    worker's jail under a uid of its own, first the file's owner (EACCES: root's file, mode 0644)."""
    refusals = {errno.EROFS, errno.EACCES} if switches_uid(SandboxSettings()) else {errno.EROFS}
    return any(f"ERRNO {e}\n" in out for e in refusals)


def try_write(path: Path | str, text: str = "planted\n", mode: str = "a") -> str:
    return TRY_WRITE.format(path=str(path), mode=mode, text=text)


def test_home_and_host_tmp_writes_land_nowhere(
    tmp_path: Path, home: Path, worker_env: dict[str, str]
) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    host_tmp = Path("/tmp") / f"jury-sandbox-test-{uuid.uuid4().hex}"
    code = f"""
        import os, pathlib
        print("HOME", os.environ["HOME"], sorted(os.listdir(os.environ["HOME"])))
        pathlib.Path(os.environ["HOME"], "planted").write_text("x")
        pathlib.Path({str(host_tmp)!r}).write_text("x")
    """
    res, out = run(tmp_path, Jail(worktree=wt), code, worker_env)
    assert res.exit_code == 0, out
    assert f"HOME {home} []" in out  # an empty private HOME at the worker's HOME path
    assert not (home / "planted").exists() and not host_tmp.exists()


def test_state_dir_is_writable_and_the_rest_of_home_is_hidden(
    tmp_path: Path, home: Path, worker_env: dict[str, str]
) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    code = """
        import os, pathlib
        home = pathlib.Path(os.environ["HOME"])
        (home / ".agent" / "session").write_text("kept")
        try:
            print("READ", (home / ".ssh" / "id_rsa").read_text())
        except OSError as exc:
            print("ERRNO", exc.errno)
    """
    jail = Jail(worktree=wt, state_dirs=("~/.agent",), network=True, limits=False)
    res, out = run(tmp_path, jail, code, worker_env)
    assert res.exit_code == 0, out
    assert f"ERRNO {errno.ENOENT}" in out and "PRIVATE KEY" not in out
    assert (home / ".agent" / "session").read_text() == "kept"  # created on the host, bound read-write


def test_jury_state_dir_is_hidden_but_the_own_worktree_shows(
    tmp_path: Path, worker_env: dict[str, str]
) -> None:
    """Other runs' worktrees, the records and the embedded Redis socket live in JURY_DIR: hidden."""
    state = Path(tempfile.mkdtemp(prefix="jury-test-state-", dir="/var/tmp"))
    try:
        other = state / "worktrees" / "other-run"
        other.mkdir(parents=True)
        (other / "secret.py").write_text("TOKEN = 'other-run-secret'\n")
        wt = state / "worktrees" / "this-run"
        wt.mkdir(parents=True)
        (wt / "mine.py").write_text("x = 1\n")
        code = f"""
            import os
            print("MINE", open("mine.py").read().strip())
            try:
                print("OTHER", open({str(other / "secret.py")!r}).read())
            except OSError as exc:
                print("ERRNO", exc.errno)
            print("STATE", sorted(os.listdir({str(state)!r})))
        """
        res, out = run(tmp_path, Jail(worktree=wt), code, {**worker_env, "JURY_DIR": str(state)})
        assert res.exit_code == 0, out
        assert "MINE x = 1" in out
        assert f"ERRNO {errno.ENOENT}" in out and "other-run-secret" not in out
        assert "STATE ['worktrees']" in out  # only the mount point of the own worktree
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_git_common_dir_is_read_only(
    tmp_path: Path, repo_wt: tuple[Path, Path], worker_env: dict[str, str]
) -> None:
    """A conftest.py that plants a filter in the repository's config (which Jury's git would run)."""
    repo, wt = repo_wt
    config = repo / ".git" / "config"
    before = config.read_bytes()
    dirs = git_dirs_of(wt)
    assert (repo / ".git").resolve() in dirs and any("worktrees" in str(d) for d in dirs)
    plant = '[filter "x"]\n\tclean = touch /tmp/pwned\n'
    res, out = run(tmp_path, Jail(worktree=wt, git_dirs=dirs), try_write(config, plant), worker_env)
    assert res.exit_code == 0, out
    assert denied(out), out
    assert config.read_bytes() == before
    # git itself still reads the repository inside
    res, out = run(
        tmp_path,
        Jail(worktree=wt, git_dirs=dirs),
        "import subprocess; print(subprocess.run(['git', 'log', '--oneline'], capture_output=True,"
        " text=True).stdout)",
        worker_env,
    )
    assert res.exit_code == 0 and " one" in out, out


def test_worktree_writable_for_the_judge_read_only_for_a_reviewer(
    tmp_path: Path, repo_wt: tuple[Path, Path], worker_env: dict[str, str]
) -> None:
    _repo, wt = repo_wt
    dirs = git_dirs_of(wt)
    res, out = run(
        tmp_path, Jail(worktree=wt, git_dirs=dirs), try_write(wt / "fix.py", "y = 2\n"), worker_env
    )
    assert "WROTE" in out and (wt / "fix.py").read_text() == "y = 2\n"
    reviewer = Jail(worktree=wt, git_dirs=dirs, writable=False, network=True, limits=False)
    res, out = run(tmp_path, reviewer, try_write(wt / "a.py", "evil\n"), worker_env)
    assert denied(out), out  # the kernel says no, not a check afterwards
    assert (wt / "a.py").read_text() == "x = 1\n"


def test_tree_read_only_is_what_the_kernel_enforces(
    tmp_path: Path, repo_wt: tuple[Path, Path], worker_env: dict[str, str]
) -> None:
    """A reviewer's job skips asking git what changed in its tree when ``tree_read_only`` says nothing
    could: each jail's answer must match what a write into its tree actually does."""
    _repo, wt = repo_wt
    dirs = git_dirs_of(wt)
    (wt / "reports").mkdir()
    reviewer = Jail(worktree=wt, git_dirs=dirs, writable=False, network=True, limits=False)
    jails = {
        "reviewer": (reviewer, wt / "a.py"),
        "judge": (Jail(worktree=wt, git_dirs=dirs), wt / "a.py"),
        "reviewer with a writable path in its tree": (
            Jail(worktree=wt, git_dirs=dirs, writable=False, rw_paths=(wt / "reports",)),
            wt / "reports" / "r.txt",
        ),
        "reviewer unconfined": (
            Jail(worktree=wt, settings=SandboxSettings(mode="none"), writable=False),
            wt / "a.py",
        ),
    }
    for what, (jail, target) in jails.items():
        _res, out = run(tmp_path, jail, try_write(target), worker_env)
        assert ("WROTE" not in out) == jail.tree_read_only, (what, out)
    assert reviewer.tree_read_only


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    yield s
    s.close()


CONNECT = """
    import socket
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=5).sendall(b"hello")
        print("CONNECTED")
    except OSError as exc:
        print("REFUSED", exc)
"""


def test_network_off_for_code_runs(
    tmp_path: Path, listener: socket.socket, worker_env: dict[str, str]
) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    port = listener.getsockname()[1]
    res, out = run(tmp_path, Jail(worktree=wt), CONNECT.format(port=port), worker_env)
    assert res.exit_code == 0 and "REFUSED" in out, out
    listener.setblocking(False)
    with pytest.raises(BlockingIOError):
        listener.accept()  # the listener saw nothing


def test_network_on_when_the_jail_has_it(
    tmp_path: Path, listener: socket.socket, worker_env: dict[str, str]
) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    port = listener.getsockname()[1]
    res, out = run(tmp_path, Jail(worktree=wt, network=True), CONNECT.format(port=port), worker_env)
    assert res.exit_code == 0 and "CONNECTED" in out, out
    listener.settimeout(5)
    conn, _ = listener.accept()
    assert conn.recv(5) == b"hello"
    conn.close()


def test_environment_is_the_allow_list(tmp_path: Path, home: Path, worker_env: dict[str, str]) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    jail = Jail(worktree=wt, env={"JAIL_SET": "1"}, env_pass=("PASSED_KEY", "NOT_IN_WORKER_ENV"))
    res, out = run(tmp_path, jail, "import json, os; print(json.dumps(dict(os.environ)))", worker_env)
    assert res.exit_code == 0, out
    inside = json.loads(out.splitlines()[0])
    allowed = {*ALLOWED_ENV, "HOME", "JAIL_SET", "PASSED_KEY", "PWD"}  # bwrap sets PWD for --chdir
    allowed |= set(SAFE_DIRECTORY_ENV)  # git's safe.directory, in a jail under a uid of its own
    assert {k for k in inside if not k.startswith("LC_")} <= allowed, inside
    assert "SECRET_THING" not in inside and "JURY_REDIS_URL" not in inside
    assert inside["PASSED_KEY"] == "sk-passed" and inside["JAIL_SET"] == "1" and inside["LC_ALL"] == "C.UTF-8"
    assert inside["HOME"] == str(home)
    assert "hunter2" not in out


def test_mode_none_runs_unconfined_with_the_allow_list(
    tmp_path: Path, home: Path, worker_env: dict[str, str]
) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    jail = Jail(worktree=wt, settings=SandboxSettings(mode="none"))
    code = "import json, os; open(os.environ['HOME'] + '/seen', 'w'); print(json.dumps(dict(os.environ)))"
    res, out = run(tmp_path, jail, code, worker_env)
    inside = json.loads(out.splitlines()[0])
    assert "SECRET_THING" not in inside and "JURY_REDIS_URL" not in inside
    assert (home / "seen").exists()  # unconfined: the real HOME


def _marked(marker: str) -> list[int]:
    """Host pids whose command line holds ``marker`` (the sandbox's own pids mean nothing out here)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state not in ("Z", "X"):
            pids.append(int(entry.name))
    return pids


def test_setsid_grandchild_dies_with_the_timeout(
    tmp_path: Path, worker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    marker = f"jury-escapee-{uuid.uuid4().hex}"
    code = f"""
        import os, subprocess, sys, time
        escape = "import os, time; os.setsid(); time.sleep(10**6)"
        subprocess.Popen([sys.executable, "-c", escape, {marker!r}])
        open("started", "w").write(str(os.getpid()))
        time.sleep(10**6)
    """
    seen: list[int] = []
    clock = JumpClock.install(monkeypatch)
    timeout = 600.0

    def watch() -> bool:
        # The timeout fires once the escaped grandchild runs, however long the sandbox took to start it.
        if not seen:
            seen.extend(_marked(marker))
            if seen:
                clock.jump(timeout)
        return False

    res, out = run(tmp_path, Jail(worktree=wt), code, worker_env, timeout=timeout, interrupted=watch)
    assert res.timed_out, out
    assert seen, "the grandchild never started"
    deadline = time.monotonic() + 60
    while _marked(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _marked(marker) == []  # gone, or a zombie: it cannot run (PID 1 here may never reap it)


def test_file_size_limit_bites(tmp_path: Path, worker_env: dict[str, str]) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    jail = Jail(worktree=wt, settings=SandboxSettings(max_file_mb=1))
    code = """
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death, to say what happened
        try:
            with open("big", "wb") as f:
                f.write(b"x" * (3 * 1024 * 1024))
            print("WROTE")
        except OSError as exc:
            print("ERRNO", exc.errno)
    """
    res, out = run(tmp_path, jail, code, worker_env)
    assert f"ERRNO {errno.EFBIG}" in out, out
    assert (wt / "big").stat().st_size <= 1024 * 1024


def test_every_limit_holds_inside_the_sandbox_and_the_worker_forks_nothing_for_it(
    tmp_path: Path, worker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The jail's three limits are what the sandboxed process reads of itself, and the worker started it
    with no preexec_fn (prlimit set them, bwrap's --die-with-parent stands in for PDEATHSIG), so Popen
    could vfork instead of forking the whole worker."""
    wt = tmp_path / "wt"
    wt.mkdir()
    jail = Jail(worktree=wt, settings=SandboxSettings(memory_mb=3000, max_procs=77, max_file_mb=5))
    seen: list[object] = []
    real_popen = subprocess.Popen

    def popen(*args: object, **kwargs: object) -> object:
        seen.append(kwargs.get("preexec_fn"))
        return real_popen(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "Popen", popen)
    code = """
        import resource
        for name in ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_FSIZE"):
            print(name, *resource.getrlimit(getattr(resource, name)))
    """
    res, out = run(tmp_path, jail, code, worker_env)
    assert res.exit_code == 0, out
    mib = 1024 * 1024
    assert f"RLIMIT_AS {3000 * mib} {3000 * mib}" in out
    assert "RLIMIT_NPROC 77 77" in out
    assert f"RLIMIT_FSIZE {5 * mib} {5 * mib}" in out
    assert seen and all(fn is None for fn in seen)  # the sandbox probe (once a process) and the run


def test_without_prlimit_the_limits_still_hold_set_before_exec(
    tmp_path: Path, worker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine without util-linux's prlimit: the limits are set in the child before exec, as before."""
    import workers.isolation.rlimits as rlimits
    import workers.isolation.sandbox as sandbox

    monkeypatch.setattr(rlimits, "prlimit_binary", lambda: None)
    wt = tmp_path / "wt"
    wt.mkdir()
    jail = Jail(worktree=wt, settings=SandboxSettings(max_procs=66, max_file_mb=3))
    confined = sandbox.confine(jail, ["true"], wt, worker_env)
    assert "prlimit" not in confined.argv[0] and confined.limits  # left for the preexec_fn
    code = """
        import resource
        print("NPROC", *resource.getrlimit(resource.RLIMIT_NPROC))
        print("FSIZE", *resource.getrlimit(resource.RLIMIT_FSIZE))
    """
    res, out = run(tmp_path, jail, code, worker_env)
    assert res.exit_code == 0, out
    assert "NPROC 66 66" in out and f"FSIZE {3 * 1024 * 1024} {3 * 1024 * 1024}" in out


def test_output_is_capped(tmp_path: Path, worker_env: dict[str, str]) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    res, _ = run(tmp_path, Jail(worktree=wt), "print('y' * 5_000_000)", worker_env)
    assert res.exit_code == 0 and res.stdout_dropped > 0 and res.stdout_bytes < 1_100_000


def test_missing_bwrap_refuses_to_run(
    tmp_path: Path, worker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JURY_BWRAP", "/nonexistent")
    problem = sandbox_problem(SandboxSettings())
    assert problem is not None and problem.startswith(INSTALL_HINT)
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        require_sandbox(SandboxSettings())
    assert sandbox_problem(SandboxSettings(mode="none")) is None
    wt = tmp_path / "wt"
    wt.mkdir()
    res, _ = run(tmp_path, Jail(worktree=wt), "open('ran', 'w')", worker_env)
    assert res.exit_code is None and res.error is not None and "not installed" in res.error
    assert not (wt / "ran").exists()  # never unconfined instead


def test_missing_program_is_a_start_error(tmp_path: Path, worker_env: dict[str, str]) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    res = run_supervised(
        ["no-such-program-xyz"],
        cwd=wt,
        env=worker_env,
        stdout_path=tmp_path / "o",
        stderr_path=tmp_path / "e",
        timeout=10,
        jail=Jail(worktree=wt),
    )
    assert res.error == "command not found: no-such-program-xyz"
