"""The console in a real browser: `jury web` in a subprocess, headless Chromium driven by Playwright. A run
is in progress (its first events in the store); the page is open; the test appends a reviewer's report and
finding to the store, and the finding appears on the page without a reload, as text (the claim carries
markup that must not run). A screenshot is saved under the test's tmp_path."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.store.files import FileStore
from tests.conftest import outside_env
from tests.fakes import console_run as run

CHROMIUM = Path("/usr/bin/chromium")


def chromium() -> Path:
    if not CHROMIUM.exists() and shutil.which("chromium") is None:
        pytest.skip("no Chromium at /usr/bin/chromium: install Debian's `chromium` package to run this test")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -e '.[dev]')")
    return CHROMIUM if CHROMIUM.exists() else Path(shutil.which("chromium") or "")


def test_a_new_finding_appears_on_the_open_run_page_without_a_reload(tmp_path: Path) -> None:
    executable = chromium()
    from playwright.sync_api import expect, sync_playwright

    state = tmp_path / "state"
    store = FileStore(state)
    slug = "acme-widgets-7"
    store.append(slug, run.started(title=f"parser {run.HOSTILE}"))
    env = {**outside_env(), "JURY_DIR": str(state), "NO_COLOR": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "jury_cli", "web", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert server.stdout is not None
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            if m := re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", line):
                url = m.group(0)
        assert url is not None, "jury web printed no URL"
        base = url.split("?")[0]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(executable), headless=True, args=["--no-sandbox"]
            )
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 1400})
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.goto(url)  # the token URL: a cookie, then the run list without the token
                assert "token" not in page.url
                page.get_by_role("link", name=slug).click()
                page.wait_for_url(f"{base}runs/{slug}")
                expect(page.locator("#live")).to_have_text("live", timeout=30_000)
                expect(page.locator("section.panel", has_text="findings")).to_contain_text("no findings yet")
                lanes = page.locator(".lane")
                expect(lanes).to_have_count(2)
                expect(page.locator('.lane[data-agent="alpha"] .bar')).to_have_attribute(
                    "data-state", "running"
                )
                page.evaluate("window.__notReloaded = true")

                store.append(slug, run.alpha_found())  # the reviewer reports while the page is open

                finding = page.locator('article.finding[data-id="r1-alpha-1"]')
                expect(finding).to_be_visible(timeout=30_000)
                expect(finding).to_contain_text("parse() drops the last byte")
                expect(finding).to_contain_text('<script>document.title="pwned"</script>')  # shown, not run
                expect(page.locator('.lane[data-agent="alpha"] .bar')).to_have_attribute("data-state", "done")
                assert page.evaluate("window.__notReloaded") is True
                assert page.locator("main script, main img").count() == 0
                assert "pwned" not in page.title()

                # An action from the console's own page passes the token and origin checks; without the
                # fleet's Redis it is refused with what to do, not a fake success.
                page.locator('button[data-action="cancel"]').click()
                expect(page.locator(".actions .message")).to_contain_text("no Redis to reach the run")

                shot = tmp_path / "console-run.png"
                page.screenshot(path=str(shot), full_page=True)
                print(f"screenshot: {shot}")
                assert shot.stat().st_size > 10_000
                assert errors == []
            finally:
                browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
        server.stdout.close() if server.stdout else None
