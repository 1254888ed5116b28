"""run_supervised against real processes.

No test here depends on how fast the machine is: a child that must still be running while the test looks
waits for a file the test writes once it has seen what it needs (``GO_CHILD``), a timeout is driven by a
clock the test moves (``jump_clock``), and every deadline is one to wait for a condition, far above a
scheduler stall, never a duration the test sleeps through.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.integration.jump_clock import JumpClock
from workers.isolation.supervise import ProcResult, run_supervised

# A deadline for what a passing test waits on (a condition, never a duration): far above any stall of a
# loaded machine, reached only by a test that fails.
PATIENCE = 60.0


def _state(pid: int) -> str | None:
    """The /proc state letter of ``pid``, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _alive(pid: int) -> bool:
    """Running in any sense but a zombie (a zombie cannot run and PID 1 here may never reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return _state(pid) not in (None, "Z", "X")


def _group_members(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes in process group ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def _run(tmp_path: Path, code: str, **kw: object) -> ProcResult:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    kw.setdefault("timeout", PATIENCE)
    kw.setdefault("grace", 0.5)
    return run_supervised(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=dict(os.environ),
        stdout_path=tmp_path / "out" / "stdout.txt",
        stderr_path=tmp_path / "out" / "stderr.txt",
        **kw,  # type: ignore[arg-type]
    )


def _gone(pids: list[int], pgid: int, seconds: float = PATIENCE) -> bool:
    """True once none of ``pids`` and no member of ``pgid`` runs (SIGKILL is delivered asynchronously)."""
    deadline = time.monotonic() + seconds
    while True:
        if not any(_alive(p) for p in pids) and not _group_members(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def _wait_for_pids(path: Path, n: int, seconds: float = PATIENCE) -> list[int]:
    """The pids written to ``path`` once there are ``n`` (looked at least once, however short ``seconds``)."""
    deadline = time.monotonic() + seconds
    while True:
        if path.exists():
            pids = [int(x) for x in path.read_text().split()]
            if len(pids) >= n:
                return pids
        if time.monotonic() >= deadline:
            raise AssertionError(f"pids not written to {path}")
        time.sleep(0.02)


STUBBORN_TREE = """
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pids = {pids!r}
    with open(pids, "a") as f:
        f.write(f"{{os.getpid()}}\\n")
    grandchild = (
        "import os, signal, time\\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
        f"open({{pids!r}}, 'a').write(f'{{{{os.getpid()}}}}\\\\n')\\n"
        "time.sleep(120)\\n"
    )
    subprocess.Popen([sys.executable, "-c", grandchild])
    deadline = time.monotonic() + {patience}
    while len(open(pids).read().split()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    print("started", flush=True)
    {tail}
"""


def _stubborn_tree(pids: Path, tail: str) -> str:
    """A leader and a grandchild that both ignore SIGTERM; "started" once both pids are in ``pids``."""
    return STUBBORN_TREE.format(pids=str(pids), tail=tail, patience=PATIENCE)


def _tree_started(pids: Path) -> bool:
    """Both pids of the stubborn tree are written (so "started" is, or is about to be, printed)."""
    return pids.exists() and len(pids.read_text().split()) >= 2


# A child that waits for the test's go-ahead: the file ``GO`` (its path substituted), or a deadline.
GO_CHILD = """
    import os, sys, time
    {before}
    deadline = time.monotonic() + {patience}
    while not os.path.exists({go!r}):
        if time.monotonic() >= deadline:
            sys.exit(7)
        time.sleep(0.01)
    {after}
"""


def _go_child(go: Path, before: str, after: str = "") -> str:
    return GO_CHILD.format(before=before, after=after, go=str(go), patience=PATIENCE)


def test_timeout_kills_stubborn_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pids_file = tmp_path / "pids"
    out = tmp_path / "out" / "stdout.txt"
    clock = JumpClock.install(monkeypatch)
    timeout = 600.0

    def jump_once_started(seconds: float, quiet: float) -> None:
        if not clock.jumped and b"started" in out.read_bytes():
            clock.jump(timeout)

    code = _stubborn_tree(pids_file, tail="time.sleep(120)")
    res = _run(tmp_path, code, timeout=timeout, grace=0.5, tick_every=0.01, on_tick=jump_once_started)
    assert res.timed_out and not res.cancelled
    assert res.error is None
    assert res.seconds < timeout + PATIENCE  # SIGKILL ended it after the grace, not its own 120 s sleep
    assert res.exit_code == -9  # it ignored SIGTERM, so SIGKILL ended it
    leader, grandchild = _wait_for_pids(pids_file, 2)
    assert _gone([leader, grandchild], pgid=leader)
    assert b"started" in res.stdout_path.read_bytes()


def test_group_killed_after_leader_exits(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    code = _stubborn_tree(pids_file, tail="")  # the leader exits as soon as the grandchild runs
    res = _run(tmp_path, code)
    assert res.exit_code == 0 and not res.timed_out
    leader, grandchild = _wait_for_pids(pids_file, 2, seconds=0)  # written before the leader exited
    assert _gone([grandchild], pgid=leader)


def test_exit_code_and_output_files(tmp_path: Path) -> None:
    code = """
        import sys
        print("to stdout")
        print("to stderr", file=sys.stderr)
        sys.exit(3)
    """
    res = _run(tmp_path, code)
    assert res.exit_code == 3
    assert not (res.timed_out or res.cancelled) and res.error is None
    assert res.stdout_path.read_text() == "to stdout\n"
    assert res.stderr_path.read_text() == "to stderr\n"
    assert res.stdout_bytes == len("to stdout\n")
    assert res.stderr_bytes == len("to stderr\n")


def _tick_until_early(out: Path, go: Path, seen: list[bytes]):
    """An on_tick that records the output file and lets the child end once "early" is on disk."""

    def tick(seconds: float, quiet: float) -> None:
        seen.append(out.read_bytes())
        if seen[-1] == b"early\n":
            go.touch()

    return tick


def test_output_is_on_disk_while_running(tmp_path: Path) -> None:
    seen: list[bytes] = []
    out, go = tmp_path / "out" / "stdout.txt", tmp_path / "go"
    code = _go_child(go, before='print("early", flush=True)')
    res = _run(tmp_path, code, tick_every=0.02, on_tick=_tick_until_early(out, go, seen))
    assert res.exit_code == 0  # a tick saw "early" on disk while the child waited for it
    assert seen and seen[-1] == b"early\n"


def test_tick_reports_elapsed_and_quiet(tmp_path: Path) -> None:
    ticks: list[tuple[float, float]] = []
    go = tmp_path / "go"

    def tick(seconds: float, quiet: float) -> None:
        ticks.append((seconds, quiet))
        if len(ticks) >= 3 and quiet > 0.3:
            go.touch()

    code = _go_child(go, before='print("hello", flush=True)')
    res = _run(tmp_path, code, tick_every=0.02, on_tick=tick)
    assert res.exit_code == 0  # the child waited until quiet had grown past 0.3 s
    assert len(ticks) >= 3
    assert all(q <= s for s, q in ticks)
    assert [s for s, _ in ticks] == sorted(s for s, _ in ticks)
    assert ticks[-1][1] > 0.3  # nothing written for a while: quiet grows


def test_failing_tick_does_not_stop_supervision(tmp_path: Path) -> None:
    calls: list[float] = []
    go = tmp_path / "go"

    def boom(seconds: float, quiet: float) -> None:
        calls.append(seconds)
        if len(calls) >= 2:
            go.touch()  # ticked again after a failure: supervision went on
        raise RuntimeError("tick failed")

    res = _run(tmp_path, _go_child(go, before="", after="print('done')"), tick_every=0.02, on_tick=boom)
    assert len(calls) >= 2
    assert res.exit_code == 0
    assert res.stdout_path.read_text() == "done\n"


def test_missing_executable_is_an_error_not_an_exception(tmp_path: Path) -> None:
    res = run_supervised(
        ["jury-no-such-command-xyz", "--help"],
        cwd=tmp_path,
        env=dict(os.environ),
        stdout_path=tmp_path / "o.txt",
        stderr_path=tmp_path / "e.txt",
        timeout=5,
    )
    assert res.error == "command not found: jury-no-such-command-xyz"
    assert res.exit_code is None
    assert not (res.timed_out or res.cancelled)


def test_interrupted_cancels(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    code = _stubborn_tree(pids_file, tail="time.sleep(120)")
    res = _run(tmp_path, code, timeout=600, grace=0.5, interrupted=lambda: _tree_started(pids_file))
    assert res.cancelled and not res.timed_out
    assert res.seconds < PATIENCE  # ended by the cancel, not by its timeout or its own sleep
    leader, grandchild = _wait_for_pids(pids_file, 2, seconds=0)
    assert _gone([leader, grandchild], pgid=leader)


def test_stdin_is_closed(tmp_path: Path) -> None:
    code = """
        import sys
        data = sys.stdin.read()
        print(f"eof after {len(data)} bytes")
    """
    res = _run(tmp_path, code)
    assert not res.timed_out
    assert res.exit_code == 0
    assert res.stdout_path.read_text() == "eof after 0 bytes\n"


def test_env_is_passed_as_given(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "ONLY_THIS": "yes"}
    res = run_supervised(
        [sys.executable, "-c", "import os; print(os.environ.get('ONLY_THIS'), 'HOME' in os.environ)"],
        cwd=tmp_path,
        env=env,
        stdout_path=tmp_path / "o.txt",
        stderr_path=tmp_path / "e.txt",
        timeout=PATIENCE,
    )
    assert res.stdout_path.read_text() == "yes False\n"


# -- output capping ------------------------------------------------------------------------------------------

BLOCK_LINES = 95_326  # "BBB:LLLLLL\n" lines: 11 bytes each, a little over 1 MiB per block


def _template() -> bytes:
    return b"".join(b"@@@:%06d\n" % i for i in range(BLOCK_LINES))


def _block(template: bytes, n: int) -> bytes:
    return template.replace(b"@@@", b"%03d" % n)


BIG_WRITER = """
    import os, sys
    template = b"".join(b"@@@:%06d\\n" % i for i in range({lines}))
    out = sys.stdout.buffer
    sizes = []
    for n in range({blocks}):
        out.write(template.replace(b"@@@", b"%03d" % n))
        out.flush()
        sizes.append(os.stat({path!r}).st_size)  # what the disk holds while we keep writing
    with open({sizes_file!r}, "w") as f:
        f.write(" ".join(map(str, sizes)))
    print("only this on stderr", file=sys.stderr)
"""


def test_fifty_megabytes_capped_to_head_marker_tail(tmp_path: Path) -> None:
    from workers.isolation.capped_output import READ_CHUNK, drop_marker

    cap = 1024 * 1024
    blocks = 50
    out = tmp_path / "out" / "stdout.txt"
    sizes_file = tmp_path / "sizes"
    code = BIG_WRITER.format(lines=BLOCK_LINES, blocks=blocks, path=str(out), sizes_file=str(sizes_file))
    res = _run(tmp_path, code, timeout=60, max_output=cap)
    total = blocks * BLOCK_LINES * 11
    assert total > 50 * 1024 * 1024
    assert res.exit_code == 0 and not res.timed_out
    template = _template()
    head, tail = _block(template, 0)[: cap // 2], _block(template, blocks - 1)[-(cap // 2) :]
    dropped = total - cap
    assert res.stdout_dropped == dropped
    data = out.read_bytes()
    assert data == head + drop_marker(dropped) + tail
    assert f"[... {dropped} bytes dropped by jury ...]".encode() in data
    assert res.stdout_bytes == len(data) == cap + len(drop_marker(dropped))
    # stderr was small: kept whole
    assert res.stderr_path.read_text() == "only this on stderr\n"
    assert res.stderr_dropped == 0
    # disk stayed bounded while it ran: compacted whenever the file passed 2 × cap
    sizes = [int(x) for x in sizes_file.read_text().split()]
    assert len(sizes) == blocks
    assert max(sizes) <= 2 * cap + READ_CHUNK + 100
    assert sorted(p.name for p in out.parent.iterdir()) == ["stderr.txt", "stdout.txt"]


def test_output_under_cap_is_kept_whole(tmp_path: Path) -> None:
    res = _run(tmp_path, "print('x' * 99)", max_output=100)
    assert res.stdout_path.read_text() == "x" * 99 + "\n"
    assert res.stdout_dropped == 0 and res.stdout_bytes == 100


def test_output_between_cap_and_twice_cap_compacted_at_the_end(tmp_path: Path) -> None:
    from workers.isolation.capped_output import drop_marker

    code = """
        import sys
        sys.stdout.write("A" * 1000 + "B" * 300 + "C" * 1000)
        sys.stderr.write("e" * 5000)
    """
    res = _run(tmp_path, code, max_output=2000)
    assert res.stdout_path.read_bytes() == b"A" * 1000 + drop_marker(300) + b"C" * 1000
    assert res.stdout_dropped == 300
    assert res.stderr_path.read_bytes() == b"e" * 1000 + drop_marker(3000) + b"e" * 1000
    assert res.stderr_dropped == 3000


def test_capped_output_is_on_disk_while_running(tmp_path: Path) -> None:
    seen: list[bytes] = []
    out, go = tmp_path / "out" / "stdout.txt", tmp_path / "go"
    code = _go_child(go, before='print("early", flush=True)')
    tick = _tick_until_early(out, go, seen)
    res = _run(tmp_path, code, max_output=1000, tick_every=0.02, on_tick=tick)
    assert res.exit_code == 0  # a tick saw "early" on disk while the child waited for it
    assert seen and seen[-1] == b"early\n"
    assert res.stdout_path.read_bytes() == b"early\n"


def test_capped_run_does_not_hang_on_an_escaped_writer(tmp_path: Path) -> None:
    """A grandchild that left the group (setsid) keeps the pipe open: the reader must still return."""
    pid_file = tmp_path / "escaped.pid"
    code = f"""
        import os, subprocess, sys, time
        escaped = (
            "import os, time; os.setsid(); "
            "open({str(pid_file)!r} + '.tmp', 'w').write(str(os.getpid())); "
            "os.rename({str(pid_file)!r} + '.tmp', {str(pid_file)!r}); time.sleep(120)"
        )
        subprocess.Popen([sys.executable, "-c", escaped])
        # the leader ends only once the grandchild has left the group (else ending the group kills it)
        deadline = time.monotonic() + {PATIENCE}
        while not os.path.exists({str(pid_file)!r}) and time.monotonic() < deadline:
            time.sleep(0.01)
        print("leader done", flush=True)
    """
    try:
        res = _run(tmp_path, code, max_output=1000, timeout=300)
        assert res.exit_code == 0
        assert res.seconds < PATIENCE  # not held until the escaped writer's 120 s sleep ends
        assert res.stdout_path.read_text() == "leader done\n"
    finally:
        escaped_pid = _wait_for_pids(pid_file, 1)[0]
        os.kill(escaped_pid, 9)


def test_max_output_must_be_sane(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_output"):
        _run(tmp_path, "print(1)", max_output=1)


# -- parent-death signal -------------------------------------------------------------------------------------

PARENT_HELPER = """
    import os, sys
    from pathlib import Path
    from workers.isolation.supervise import run_supervised

    tmp = Path(sys.argv[1])
    run_supervised(
        [sys.executable, str(tmp / "orphan.py")],
        cwd=tmp,
        env=dict(os.environ),
        stdout_path=tmp / "orphan.out",
        stderr_path=tmp / "orphan.err",
        timeout=600,
    )
"""

ORPHAN = """
    import os, time
    with open({pids!r}, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_child_dies_when_its_parent_is_killed(tmp_path: Path) -> None:
    import signal
    import subprocess

    pids_file = tmp_path / "orphan.pid"
    (tmp_path / "helper.py").write_text(textwrap.dedent(PARENT_HELPER))
    (tmp_path / "orphan.py").write_text(textwrap.dedent(ORPHAN.format(pids=str(pids_file))))
    helper = subprocess.Popen([sys.executable, str(tmp_path / "helper.py"), str(tmp_path)])
    orphan = 0
    try:
        orphan = _wait_for_pids(pids_file, 1)[0]
        assert _alive(orphan)
        os.kill(helper.pid, signal.SIGKILL)  # no finally, no cleanup: only PDEATHSIG can reach the child
        helper.wait()
        assert _gone([orphan], pgid=orphan)
    finally:
        if helper.poll() is None:
            helper.kill()
            helper.wait()
        if orphan and _alive(orphan):
            os.kill(orphan, 9)
