"""The repository tracks no symbolic link: a link to a developer's checkout (its tools, its state) would
point nowhere, or back at itself, in a fresh clone and break CI's set-up."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_symbolic_link_is_tracked() -> None:
    staged = subprocess.run(
        ["git", "ls-files", "--stage"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    links = [line.split("\t", 1)[1] for line in staged.splitlines() if line.startswith("120000 ")]
    assert links == [], f"tracked symbolic links: {links}"
