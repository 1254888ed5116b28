"""The console's script shows hostile run data only as text, checked without a browser.

Runs ``node --test tests/console/console_dom.test.mjs``: console.js in a node:vm context with a minimal
DOM stand-in that records any HTML sink, fed run, fleet and run-list data whose every string is markup,
plus a static check that the script holds no HTML sink at all. The Chromium test
(tests/e2e/test_console_browser.py) covers the same page in a real browser where one is installed; this
one runs wherever node does (CI installs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

TEST_FILE = Path(__file__).resolve().parents[1] / "console" / "console_dom.test.mjs"


def test_console_js_renders_hostile_strings_as_text_only() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: install Debian's `nodejs` package to run console.js's tests")
    done = subprocess.run(
        [node, "--test", str(TEST_FILE)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=TEST_FILE.parent,
        check=False,
    )
    assert done.returncode == 0, f"node --test failed:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    passed = re.search(r"^# pass (\d+)$", done.stdout, re.MULTILINE)
    assert passed is not None and int(passed[1]) >= 4, done.stdout[-2000:]  # the node tests did run
