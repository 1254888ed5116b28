"""Code nothing calls is code nobody reads until it misleads them: vulture, as .ci/run runs it, finds no
unused function, class, variable, import or unreachable line in Jury's packages. What it cannot see
used (a protocol's parameters ...) is in ``vulture_whitelist.py``, each with its reason."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VULTURE = [sys.executable, "-m", "vulture", "--min-confidence", "80"]


def vulture(*paths: Path | str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VULTURE, *map(str, paths)], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_packages_hold_no_dead_code() -> None:
    found = vulture("orchestrator", "workers", "jury_cli", "vulture_whitelist.py")
    assert found.returncode == 0, f"dead code (remove it, or whitelist it with the reason):\n{found.stdout}"
    assert found.stdout == ""


def test_vulture_sees_dead_code(tmp_path: Path) -> None:
    module = tmp_path / "dead.py"
    module.write_text(
        textwrap.dedent(
            """
            import os


            def used(n: int) -> int:
                return n
                print("never")


            used(1)
            """
        )
    )
    found = vulture(module)
    assert found.returncode == 3  # vulture's "dead code found"
    assert "unused import 'os'" in found.stdout
    assert "unreachable code after 'return'" in found.stdout
