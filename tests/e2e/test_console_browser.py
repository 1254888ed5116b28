"""The console in a real browser: `jury web` in a subprocess, headless Chromium driven by Playwright.

- A run is in progress (its first events in the store); the page is open; the test appends a reviewer's
  report and finding to the store, and the finding appears on the page without a reload, as text (the
  claim carries markup that must not run). Between server events the page's own clock moves the running
  bars and the elapsed figure on. A screenshot is saved under the test's tmp_path.
- A run with a verified, a refuted and an open finding: the verification runs are a real table (a row a
  run: tree, command, exit code, time), the second opinions are shown, and the state filter shows only the
  findings of the state chosen.
- Over the fleet's Redis, the resume button is enabled only on a run the resume action takes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.files import FileStore
from orchestrator.store.redis import from_url as redis_store
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


@contextmanager
def jury_web(env: dict[str, str]) -> Iterator[str]:
    """`jury web --port 0` with ``env`` added to a clean environment; yields the token URL it printed."""
    server = subprocess.Popen(
        [sys.executable, "-m", "jury_cli", "web", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**outside_env(), "NO_COLOR": "1", **env},
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
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        server.stdout.close() if server.stdout else None


@contextmanager
def browser_page(executable: Path) -> Iterator[tuple[Any, list[str]]]:
    """A page of headless Chromium, and the list its uncaught script errors are added to."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(executable), headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page, errors
        finally:
            browser.close()


def as_seconds(text: str) -> int:
    """The page's figure ("1m32s", "45s") in seconds."""
    m = re.search(r"(?:(\d+)m)?(\d+)s", text)
    assert m is not None, text
    return int(m.group(1) or 0) * 60 + int(m.group(2))


def test_a_new_finding_appears_on_the_open_run_page_without_a_reload(tmp_path: Path) -> None:
    executable = chromium()
    from playwright.sync_api import expect

    state = tmp_path / "state"
    store = FileStore(state)
    slug = "acme-widgets-7"
    store.append(slug, run.started(title=f"parser {run.HOSTILE}"))
    with jury_web({"JURY_DIR": str(state)}) as url, browser_page(executable) as (page, errors):
        base = url.split("?")[0]
        # The run's page as the server first answers it, and only that, while the clock is looked at: what
        # moves then is the page's own doing, not a new answer.
        frozen: dict[str, str] = {}

        def freeze(route: Any) -> None:
            if "body" not in frozen:
                frozen["body"] = route.fetch().text()
            route.fulfill(status=200, content_type="application/json", body=frozen["body"])

        view = f"{base}api/runs/{slug}"
        page.route(view, freeze)
        page.goto(url)  # the token URL: a cookie, then the run list without the token
        assert "token" not in page.url
        page.get_by_role("link", name=slug).click()
        page.wait_for_url(f"{base}runs/{slug}")
        expect(page.locator("#live")).to_have_text("live", timeout=30_000)
        expect(page.locator("section.panel", has_text="findings")).to_contain_text("no findings yet")
        lanes = page.locator(".lane")
        expect(lanes).to_have_count(2)
        expect(page.locator('.lane[data-agent="alpha"] .bar')).to_have_attribute("data-state", "running")
        running = page.locator('.lane[data-agent="beta"] .bar')
        expect(running).to_have_attribute("data-state", "running")

        # Between server events the running bars and the elapsed figure still move on, every second.
        elapsed = page.get_by_test_id("elapsed")
        first, width = elapsed.inner_text(), running.evaluate("b => b.style.width")
        expect(elapsed).not_to_have_text(first, timeout=15_000)
        assert as_seconds(elapsed.inner_text()) > as_seconds(first)
        page.wait_for_function(
            "w => document.querySelector('.lane[data-agent=\"beta\"] .bar').style.width !== w", arg=width
        )
        page.unroute(view)

        # Not from the console without the fleet's Redis: the button says what to run instead.
        resume = page.locator('button[data-action="resume"]')
        expect(resume).to_be_disabled()
        expect(resume).to_have_attribute("title", re.compile(f"jury review --resume {slug}"))

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

        # An action from the console's own page passes the token and origin checks; without the fleet's
        # Redis it is refused with what to do, not a fake success.
        page.locator('button[data-action="cancel"]').click()
        expect(page.locator(".actions .message")).to_contain_text("no Redis to reach the run")

        shot = tmp_path / "console-run.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")
        assert shot.stat().st_size > 10_000
        assert errors == []


# Each row of a finding's verification table: its cells as [tag, text].
VERIFICATION_CELLS = """(id) => [
    ...document.querySelectorAll(`article.finding[data-id="${id}"] table.verification tr`)
  ].map(tr => [...tr.children].map(c => [c.tagName, c.textContent]))"""
SHOWN = "() => [...document.querySelectorAll('article.finding')].map(a => [a.dataset.id, a.dataset.status])"


def test_a_verified_finding_shows_its_runs_and_the_filter_shows_one_state(tmp_path: Path) -> None:
    executable = chromium()
    from playwright.sync_api import expect

    state = tmp_path / "state"
    store = FileStore(state)
    slug = "acme-widgets-8"
    store.append(slug, run.started() + run.alpha_found() + run.judged() + run.beta_found())
    with jury_web({"JURY_DIR": str(state)}) as url, browser_page(executable) as (page, errors):
        page.goto(url)
        page.goto(f"{url.split('?')[0]}runs/{slug}")
        findings = page.locator("article.finding")
        expect(findings).to_have_count(3, timeout=30_000)

        verified = page.locator('article.finding[data-id="r1-alpha-1"]')
        expect(verified).to_contain_text("reproduced test fails on the head")
        expect(verified).to_contain_text("test: pytest -q tests/test_parse.py")
        rows = verified.locator("table.verification tr")
        expect(rows).to_have_count(5)  # the head, then each run's row and its output's
        cells = page.evaluate(VERIFICATION_CELLS, "r1-alpha-1")
        assert cells == [
            [["TH", "tree"], ["TH", "command"], ["TH", "exit"], ["TH", "time"]],
            [["TD", "fixed"], ["TD", "pytest -q tests/test_parse.py"], ["TD", "0"], ["TD", "2s"]],
            [["TD", "output1 passed"]],
            [["TD", "reverted"], ["TD", "pytest -q tests/test_parse.py"], ["TD", "1"], ["TD", "1s"]],
            [["TD", "output1 failed"]],
        ]
        expect(verified).to_contain_text(
            "second opinion: not_refuted NOT REFUTED: ran the test · beta (other/model) · $0.0006"
        )
        refuted = page.locator('article.finding[data-id="r1-beta-1"]')
        expect(refuted).to_contain_text("second opinion: refuted REFUTED: expire() runs every minute")
        expect(refuted.locator("table.verification")).to_have_count(0)
        body = page.locator("body").text_content() or ""
        assert "[object" not in body and "undefined" not in body

        # The state filter, in the page: only the findings of the state chosen.
        for choice, expected in [
            ("accepted", [["r1-alpha-1", "accepted"]]),
            ("rejected", [["r1-beta-1", "rejected"]]),
            ("open", [["r1-beta-2", "open"]]),
            ("deferred", []),
            ("all", [["r1-alpha-1", "accepted"], ["r1-beta-1", "rejected"], ["r1-beta-2", "open"]]),
        ]:
            page.select_option("#finding-filter", choice)
            expect(findings).to_have_count(len(expected))
            assert page.evaluate(SHOWN) == expected, choice
            expect(page.locator("#finding-filter")).to_have_value(choice)
            if not expected:
                expect(page.locator("section.panel:has(#finding-filter)")).to_contain_text(
                    f"no {choice} findings"
                )
        assert errors == []


def test_the_resume_button_is_enabled_only_where_resume_acts(shared_redis: str, tmp_path: Path) -> None:
    """The rule of the /resume action (an ended run that did not converge, over the fleet's Redis)."""
    executable = chromium()
    from playwright.sync_api import expect

    store = redis_store(shared_redis)
    states = {
        "queued": False,
        "review": False,
        "converged": False,
        "human": True,
        "failed": True,
        "cancelled": True,
    }
    try:
        for name in states:
            store.append(f"acme-{name}", run.started(state=name))
        env = {"JURY_DIR": str(tmp_path / "state"), "JURY_REDIS_URL": shared_redis}
        with jury_web(env) as url, browser_page(executable) as (page, errors):
            page.goto(url)
            for name, resumable in states.items():
                page.goto(f"{url.split('?')[0]}runs/acme-{name}")
                expect(page.locator("h1")).to_contain_text(f"acme-{name} {name}", timeout=30_000)
                button = page.locator('button[data-action="resume"]')
                if resumable:
                    expect(button).to_be_enabled()
                else:
                    expect(button).to_be_disabled()
                    why = "converged" if name == "converged" else "still running"
                    expect(button).to_have_attribute("title", re.compile(why))
            assert errors == []
    finally:
        store.close()
