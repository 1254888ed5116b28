"""``jury doctor`` in a container: it says it is in one, and when the sandbox cannot start there, what to
change.

The end-to-end test runs the real ``jury doctor`` inside a real confinement that refuses what a default
container refuses bubblewrap: bubblewrap's own ``--disable-userns`` (no user namespace can be created
inside), a ``/proc`` with parts masked (read-only submounts, as Docker masks its paths) and the podman
marker ``/run/.containerenv``. The other obstacles (a seccomp filter, an AppArmor profile, the kernel's
switches) cannot be raised here without privileges, so ``sandbox_hints`` reads them from a directory laid
out as the files it reads.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import outside_env
from workers.doctor import container, sandbox_hints

ROOT = Path(__file__).resolve().parents[2]


def test_doctor_in_a_container_without_user_namespaces_says_what_to_change(tmp_path: Path) -> None:
    bwrap = shutil.which("bwrap")
    assert bwrap, "the tests need bubblewrap (apt-get install bubblewrap)"
    env = outside_env()
    env.update({"JURY_DIR": str(tmp_path / "state"), "TMPDIR": str(tmp_path), "NO_COLOR": "1"})
    jail = [bwrap, "--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "--dev", "/dev"]
    jail += [
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--tmpfs",
        "/run",
        "--ro-bind",
        "/dev/null",
        "/run/.containerenv",
    ]
    # the checkout (and its venv) again over the private /tmp, where a CI clone may live
    jail += ["--ro-bind", str(ROOT), str(ROOT), "--bind", str(tmp_path), str(tmp_path)]
    jail += ["--chdir", str(ROOT), "--"]
    r = subprocess.run(
        [*jail, sys.executable, "-m", "jury_cli", "doctor"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    # the podman marker, unless this machine is a Docker container already (then /.dockerenv is seen first)
    assert re.search(r"^container  --    in a container: (podman|docker) \(/", r.stdout, re.M), r.stdout
    assert "userns     FAIL" in r.stdout and "sandbox    FAIL" in r.stdout
    notes = [
        ln for ln in r.stdout.splitlines() if ln.startswith("note: in a container, to run the sandbox: ")
    ]
    assert any("user.max_user_namespaces" in n for n in notes), r.stdout
    assert any("--security-opt systempaths=unconfined" in n for n in notes), r.stdout
    assert "jury doctor: sandbox unavailable" in r.stderr


def lay_out(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_sandbox_hints_name_each_obstacle_of_a_default_docker_container(tmp_path: Path) -> None:
    root = lay_out(
        tmp_path,
        {
            ".dockerenv": "",
            "proc/self/status": "Name:\tpython\nSeccomp:\t2\nSeccomp_filters:\t1\n",
            "proc/self/attr/current": "docker-default (enforce)\n",
            "proc/self/mountinfo": (
                "1 0 0:1 / / rw - overlay overlay rw\n"
                "2 1 0:2 / /proc rw - proc proc rw\n"
                "3 2 0:3 /null /proc/kcore rw - devtmpfs udev rw\n"
                "4 2 0:4 / /proc/acpi ro - tmpfs tmpfs ro\n"
            ),
            "proc/sys/user/max_user_namespaces": "63000\n",
            "proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n",
        },
    )
    assert container(root) == "docker (/.dockerenv)"
    hints = " | ".join(sandbox_hints("bwrap: No permissions to create new namespace", root))
    for option in (
        "--security-opt seccomp=unconfined",
        "--security-opt apparmor=unconfined",
        "--security-opt systempaths=unconfined",
        "kernel.apparmor_restrict_unprivileged_userns=0",
    ):
        assert option in hints
    assert "'docker-default (enforce)'" in hints and "/proc/acpi" in hints


@pytest.mark.parametrize(
    ("files", "found"),
    [
        ({"proc/1/cgroup": "0::/kubepods/besteffort/pod1/abc\n"}, "kubepods (/proc/1/cgroup)"),
        ({"proc/1/cgroup": "0::/\n", "proc/self/status": "Seccomp:\t0\n"}, None),
    ],
)
def test_container_is_told_from_pid_1s_cgroup(
    tmp_path: Path, files: dict[str, str], found: str | None
) -> None:
    root = lay_out(tmp_path, files)
    assert container(root) == found
    if found is None:  # a host with nothing confining it: nothing to change but the kernel's switches
        assert sandbox_hints("", root, in_container=False) == []
