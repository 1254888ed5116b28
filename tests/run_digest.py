"""On a failed test that used ``state_dir``: what its runs said, in the failure's report.

An end-to-end test's runs live in its temporary directory, which is gone (or on another machine) by the
time somebody reads a CI log; a failure that does not come back on a rerun then leaves nothing to go on.
So a failed test's report gets a section, "jury runs", with each run's events (one short line each), the
tail of every agent's stderr and of every worker's log: enough to tell "the agent found nothing" from
"the agent never ran" from "its sandbox failed".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

MAX_EVENTS = 150  # a run's last events shown; a longer run's earlier ones are counted, not shown
MAX_LINE = 300  # characters of an event's line
TAIL_BYTES = 1500  # of each agent's stderr and each worker's log
MAX_SECTION = 60_000  # the whole section's last characters, so a failure's report stays readable

# The fields worth a line: who, what, and why it failed.
FIELDS = ("agent", "round", "id", "verdict", "error", "reason", "state", "key", "kind", "exit_code")


def event_line(raw: str) -> str:
    """One event as a short line: its type and the fields that say who did what and why."""
    try:
        event: Any = json.loads(raw)
    except ValueError:
        return f"(not JSON) {raw[:MAX_LINE]}"
    if not isinstance(event, dict):
        return f"(not an object) {raw[:MAX_LINE]}"
    parts = [str(event.get("t", "?"))]
    for name in FIELDS:
        value = event.get(name)
        if value not in (None, "", [], {}):
            parts.append(f"{name}={value}")
    target = event.get("target")
    if isinstance(target, dict) and target.get("state"):
        parts.append(f"target.state={target['state']}")
    line = " ".join(parts)
    return line if len(line) <= MAX_LINE else line[:MAX_LINE] + " [...]"


def tail(path: Path, size: int = TAIL_BYTES) -> str:
    """The last ``size`` bytes of ``path``, as text."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"(unreadable: {exc.strerror})"
    cut = data[-size:]
    return ("[...]\n" if len(data) > size else "") + cut.decode("utf-8", errors="replace")


def run_digest(run: Path) -> Iterator[str]:
    """What one run's directory holds: its events, then its agents' stderr."""
    yield f"== run {run.name}"
    try:
        lines = [x for x in (run / "events.ndjson").read_text(errors="replace").splitlines() if x.strip()]
    except OSError as exc:
        lines = []
        yield f"   (no events: {exc.strerror})"
    if len(lines) > MAX_EVENTS:
        yield f"   ({len(lines) - MAX_EVENTS} earlier events not shown)"
    yield from (f"   {event_line(x)}" for x in lines[-MAX_EVENTS:])
    for err in sorted(run.glob("*.stderr.txt")):
        text = tail(err).strip()
        if text:
            yield f"-- {err.name}\n{text}"


def digest(state_dir: Path) -> str:
    """Every run under ``state_dir`` and the tail of every worker log there; past ``MAX_SECTION``
    characters, the end of it."""
    parts: list[str] = []
    runs = state_dir / "runs"
    for run in sorted(p for p in runs.glob("*") if p.is_dir()) if runs.is_dir() else []:
        parts.extend(run_digest(run))
    for log in sorted((state_dir / "logs").glob("*.log")):
        parts.append(f"== worker log {log.name}\n{tail(log)}")
    text = "\n".join(parts) or f"(no runs under {state_dir})"
    if len(text) > MAX_SECTION:  # the end: what happened last is what the failure is about
        text = f"[... {len(text) - MAX_SECTION} characters before not shown]\n" + text[-MAX_SECTION:]
    return text


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    state_dir = getattr(item, "funcargs", {}).get("state_dir")
    if isinstance(state_dir, Path) and state_dir.is_dir():
        report.sections.append(("jury runs", digest(state_dir)))
