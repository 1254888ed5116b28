"""The console's JSON API against a real uvicorn server over the real stores (a files record and the
machine's Redis): what the pages read, the live events, the artifacts' confinement, the token and the
same-origin rule on actions, and ``jury web`` itself."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from jury_cli.web import app as web_app
from jury_cli.web.app import create_app
from jury_cli.web.auth import COOKIE, Guard
from orchestrator.config import Settings
from orchestrator.domain import ActionDeferred, Event, RunCancel, RunResumed, TargetEvent
from orchestrator.spec import Target
from orchestrator.store.files import FileStore
from orchestrator.store.redis import RedisStore
from orchestrator.store.redis import from_url as redis_store
from tests.conftest import outside_env
from tests.fakes import console_run as run

TOKEN = "console-test-token-0123456789"


@pytest.fixture(params=["files", "redis"])
def backing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Settings, Any]]:
    """The two stores the console reads: the files under --dir, or the fleet's Redis."""
    if request.param == "files":
        yield Settings(dir=tmp_path / "state", redis_url=None), FileStore(tmp_path / "state")
        return
    url = request.getfixturevalue("shared_redis")
    store = redis_store(url)
    yield Settings(dir=tmp_path / "state", redis_url=url), store
    store.close()


def console(settings: Settings, store: Any, reads_need_token: bool = False):
    return run.serve(create_app(settings, store, Guard(TOKEN, reads_need_token), loopback=True))


def sse_frames(
    base: str, path: str, want: int, headers: dict[str, str] | None = None
) -> list[dict[str, str]]:
    """The first ``want`` SSE messages that carry an event (log/alive/reset), as {id, event, data}."""
    frames: list[dict[str, str]] = []
    with httpx.stream("GET", base + path, headers=headers or {}, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        current: dict[str, str] = {}
        for line in r.iter_lines():
            if not line:
                if "event" in current:
                    frames.append(current)
                    if len(frames) >= want:
                        return frames
                current = {}
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            current[name] = value
    return frames


def test_run_list_sorts_by_state_and_lists_unreadable_runs(tmp_path: Path) -> None:
    settings = Settings(dir=tmp_path, redis_url=None)
    store = FileStore(tmp_path)
    runs = [("a-conv", "converged"), ("b-human", "human"), ("c-queued", "queued"), ("d-rev", "review")]
    for i, (slug, state) in enumerate([*runs, ("e-rev", "review")]):
        store.append(slug, run.started(state=state))
        (tmp_path / "runs" / slug / ".created").write_text(f"{1000 + i}\n")  # the order of creation
    bad = tmp_path / "runs" / "zz-bad"
    bad.mkdir()
    (bad / "events.ndjson").write_text("not json\n{\n")
    with console(settings, store) as base:
        body = httpx.get(f"{base}/api/runs").json()
    assert [r["slug"] for r in body["runs"]] == ["b-human", "e-rev", "d-rev", "c-queued", "a-conv"]
    assert body["skipped"] == [{"slug": "zz-bad", "reason": "no readable events"}]
    assert body["runs"][0]["title"] == "fix the parser"


def test_run_page_shows_the_timeline_rounds_conversation_findings_and_spend(backing) -> None:
    settings, store = backing
    store.append("acme-7", run.started() + run.alpha_found() + run.judged())
    store.put_artifact("acme-7", "patches/r1-alpha-1.patch", b"diff")  # the prompt is never stored here
    if isinstance(store, RedisStore):
        store.put_alive("acme-7", run.beta_tick(30.0))
    with console(settings, store) as base:
        page = httpx.get(f"{base}/api/runs/acme-7").json()
        missing = httpx.get(f"{base}/api/runs/nope")
        bad_slug = httpx.get(f"{base}/api/runs/no%20such%3Bslug")
        dots = httpx.get(f"{base}/api/runs/..%2F..")
    assert missing.status_code == 404 and "no run named nope" in missing.json()["error"]
    assert bad_slug.status_code == 404 and dots.status_code in (404, 405)
    assert page["state"] == "review" and page["position"]
    lanes = {lane["agent"]: lane["bars"] for lane in page["timeline"]["lanes"]}
    assert set(lanes) == {"alpha", "beta", "judge"}
    (alpha,) = lanes["alpha"]
    assert (alpha["start"], alpha["end"], alpha["state"], alpha["outcome"]) == (2.0, 40.0, "done", "found")
    (beta,) = lanes["beta"]
    assert beta["state"] == "running" and beta["end"] >= 80  # still running: the bar reaches now
    if isinstance(store, RedisStore):
        assert beta["alive"] == {"seconds": 30.0, "quietSeconds": 3.0}
    (judge,) = lanes["judge"]
    assert judge["role"] == "judge" and judge["state"] == "done"
    (r1,) = page["rounds"]
    assert {v["agent"]: v["state"] for v in r1["verdicts"]} == {"alpha": "found", "beta": "running"}
    beta_seconds = next(v["seconds"] for v in r1["verdicts"] if v["agent"] == "beta")
    assert (
        beta_seconds == 30.0 if isinstance(store, RedisStore) else beta_seconds >= 80
    )  # tick, else since launch
    talk = {c["agent"]: [i["kind"] for i in c["items"]] for c in page["conversations"]}
    assert talk == {"alpha": ["report", "finding", "verdict", "commit", "reply", "answer"], "beta": []}
    (f,) = page["findings"]
    assert f["status"] == "accepted" and f["claim"].endswith(run.HOSTILE)  # data, shown as text
    assert [v["tree"] for v in f["verification"]] == ["fixed", "reverted"]
    assert f["refutation"]["outcome"] == "not_refuted" and f["refutation"]["cost_usd"] == 0.0006
    assert f["costUsd"] == 0.25
    assert page["spend"] == {
        "totalUsd": 0.25,
        "byAgent": {"judge": 0.25},
        "reservedUsd": 0.0,
        "unknownCalls": 0,
        "budgetUsd": 2.0,
        "budgetRefused": None,
        "byFinding": {"r1-alpha-1": 0.25},
    }
    # only what answers: the events name the round's prompt too, but no store kept it (it would be a 404)
    assert page["artifacts"] == ["patches/r1-alpha-1.patch"]
    assert "round-1.prompt.md" not in page["artifacts"]


def test_re_publish_is_offered_only_for_an_ended_run_of_a_pr(backing) -> None:
    """A local branch's run has no PR (the API would answer 409); a running one has no verdict yet. The
    run list shows a PR's number as "#7" and a branch by its name, never "#feat-b"."""
    settings, store = backing
    pr_run = Target(repo="acme/widgets", id="7", url="https://github.com/acme/widgets/pull/7", head="a" * 40)
    local = Target(repo="widgets", id="feat-b", branch="feat-b", head="b" * 40, path="/src/widgets")
    for slug, target, state in (
        ("pr-7", pr_run, "human"),
        ("local-b", local, "human"),
        ("pr-live", pr_run, "review"),
    ):
        store.append(
            slug, [TargetEvent(eid="t", target=target), TargetEvent(eid="end", target=Target(state=state))]
        )
    with console(settings, store) as base:
        pages = {slug: httpx.get(f"{base}/api/runs/{slug}").json() for slug in ("pr-7", "local-b", "pr-live")}
        rows = {r["slug"]: r for r in httpx.get(f"{base}/api/runs").json()["runs"]}
    assert (pages["pr-7"]["publishable"], pages["pr-7"]["publishRefusal"]) == (True, None)
    assert pages["local-b"]["publishable"] is False
    assert "reviewed a local branch: it has no PR to publish to" in pages["local-b"]["publishRefusal"]
    assert (
        pages["pr-live"]["publishable"] is False and "once it has ended" in pages["pr-live"]["publishRefusal"]
    )
    assert rows["pr-7"]["url"] and rows["local-b"]["url"] is None  # the page's "#" goes with a URL only


def test_an_agent_left_without_an_end_is_abandoned_once_the_run_ended_or_resumed(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    ended = run.started() + [
        run.TargetEvent(eid="state:failed", ts=run.at(50), target=run.Target(state="failed"))
    ]
    store.append("gone-1", ended)
    with console(Settings(dir=tmp_path, redis_url=None), store) as base:
        page = httpx.get(f"{base}/api/runs/gone-1").json()
    states = {lane["agent"]: lane["bars"][0]["state"] for lane in page["timeline"]["lanes"]}
    assert states == {"alpha": "abandoned", "beta": "abandoned"}
    assert page["timeline"]["live"] is False
    # Resumed: what ran before the resume is abandoned; the agent launched again is running, in the same lane.
    again: list[Event] = [
        RunResumed(eid="resume:1", ts=run.at(60), epoch=1),
        run.TargetEvent(eid="state:review:e1", ts=run.at(60), target=run.Target(state="review")),
        run.ActionDispatched(
            eid="d:again",
            ts=run.at(61),
            key="review:1:alpha:e1",
            kind="review",
            round=1,
            agent="alpha",
            epoch=1,
        ),
        run.AgentLaunch(eid="again:launch", ts=run.at(62), agent="alpha", round=1, key="review:1:alpha:e1"),
    ]
    store.append("gone-1", again)
    with console(Settings(dir=tmp_path, redis_url=None), store) as base:
        page = httpx.get(f"{base}/api/runs/gone-1").json()
    lanes = {lane["agent"]: [b["state"] for b in lane["bars"]] for lane in page["timeline"]["lanes"]}
    assert lanes == {"alpha": ["abandoned", "running"], "beta": ["abandoned"]}
    assert page["timeline"]["live"] is True


def test_an_attempt_launched_again_keeps_its_bar_as_abandoned(tmp_path: Path) -> None:
    """alpha's worker died (the reaper handed its review to another, which launched it again); a rate
    limit put beta's review back, and its next attempt launched anew: each earlier run stays on the
    timeline, abandoned, ending where it was put back or where the next began; the latest runs on."""
    store = FileStore(tmp_path)
    again: list[Event] = [
        run.AgentLaunch(
            eid="review:1:alpha:launch:2", ts=run.at(30), agent="alpha", round=1, key="review:1:alpha"
        ),
        ActionDeferred(
            eid="review:1:beta:wait:0", ts=run.at(20), key="review:1:beta", reason="rate-limit", seconds=25
        ),
        run.AgentLaunch(
            eid="review:1:beta:b1:launch", ts=run.at(45), agent="beta", round=1, key="review:1:beta"
        ),
    ]
    store.append("again-1", run.started() + again)
    with console(Settings(dir=tmp_path, redis_url=None), store) as base:
        page = httpx.get(f"{base}/api/runs/again-1").json()
    lanes = {lane["agent"]: lane["bars"] for lane in page["timeline"]["lanes"]}
    assert [(b["state"], b["start"], b["outcome"]) for b in lanes["alpha"]] == [
        ("abandoned", 2.0, "abandoned"),
        ("running", 30.0, None),
    ]
    assert lanes["alpha"][0]["end"] == 30.0
    assert [(b["state"], b["start"], b["outcome"]) for b in lanes["beta"]] == [
        ("abandoned", 2.0, "put back: rate-limit"),
        ("running", 45.0, None),
    ]
    assert lanes["beta"][0]["end"] == 20.0


def test_events_follow_the_log_and_resume_from_last_event_id(backing) -> None:
    settings, store = backing
    store.append("acme-7", run.started())
    with console(settings, store) as base:
        first = [f for f in sse_frames(base, "/api/runs/acme-7/events", 8) if f["event"] == "log"]
        assert [json.loads(f["data"])["eid"] for f in first] == [e.eid for e in run.started()]
        store.append("acme-7", run.alpha_found())
        since = {"Last-Event-ID": first[-1]["id"]}
        later = [f for f in sse_frames(base, "/api/runs/acme-7/events", 3, since) if f["event"] == "log"]
        assert [json.loads(f["data"])["t"] for f in later] == [
            "agent.report",
            "finding.raised",
            "action.done",
        ]
        assert len({f["id"] for f in first + later}) == len(first) + len(later)  # each id once, in order
        # A position the log does not hold (deleted and begun again): reset, then the log from its start.
        gone = sse_frames(base, "/api/runs/acme-7/events?after=999999-0", 2)
        assert [f["event"] for f in gone] == ["reset", "log"]
        assert httpx.get(f"{base}/api/runs/nope/events").status_code == 404


def test_artifacts_never_reach_outside_their_run(tmp_path: Path) -> None:
    root = tmp_path / "state"
    store = FileStore(root)
    store.append("acme-7", run.started())
    store.append("other", run.started())
    store.put_artifact("acme-7", "round-1.alpha.stdout.txt", f"FINDING: {run.HOSTILE}\n".encode())
    store.put_artifact("acme-7", "patches/r1-alpha-1.patch", b"--- a\n+++ b\n")
    store.put_artifact("other", "secret.txt", b"the other run's")
    (tmp_path / "outside.txt").write_text("host secret")
    run_dir = root / "runs" / "acme-7"
    (run_dir / "link-out").symlink_to(tmp_path / "outside.txt")
    (run_dir / "dir-out").symlink_to(tmp_path)
    (run_dir / "link-other").symlink_to(root / "runs" / "other" / "secret.txt")
    with console(Settings(dir=root, redis_url=None), store) as base:
        art = f"{base}/api/runs/acme-7/artifacts/"
        ok = httpx.get(art + "round-1.alpha.stdout.txt")
        assert ok.status_code == 200 and ok.text.endswith(f"{run.HOSTILE}\n")
        assert ok.headers["content-type"] == "text/plain; charset=utf-8"
        assert "sandbox" in ok.headers["content-security-policy"]
        assert ok.headers["x-content-type-options"] == "nosniff"
        assert httpx.get(art + "patches/r1-alpha-1.patch").text.startswith("--- a")
        assert httpx.get(art + "patches%2Fr1-alpha-1.patch").status_code == 200  # an encoded slash is a slash
        hostile = [
            "../other/secret.txt",
            "..%2Fother%2Fsecret.txt",
            "..%2F..%2F..%2Foutside.txt",
            "%2E%2E/%2E%2E/outside.txt",
            "/etc/passwd",
            "%2Fetc%2Fpasswd",
            "patches/../../other/secret.txt",
            "link-out",
            "dir-out/outside.txt",
            "link-other",
            "round-1.alpha.stdout.txt%00.png",
            "events.ndjson",
            "run.json",
            "..\\other\\secret.txt",
            "",
        ]
        for name in hostile:
            r = httpx.get(art + name)
            assert r.status_code == 404, (name, r.status_code, r.text)
            assert "host secret" not in r.text and "the other run's" not in r.text
        # A raw request line, which no client normalised: the server gets the dots themselves.
        host, port = base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as conn:
            target = "/api/runs/acme-7/artifacts/../../../outside.txt"
            conn.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 404") and b"host secret" not in answer


def test_actions_need_the_token_and_the_console_origin(shared_redis: str, tmp_path: Path) -> None:
    settings = Settings(dir=tmp_path, redis_url=shared_redis)
    store = redis_store(shared_redis)
    store.append("acme-7", run.started())
    try:
        with console(settings, store) as base:
            cancel = f"{base}/api/runs/acme-7/cancel"
            host = base.removeprefix("http://")
            assert httpx.post(cancel).status_code == 403  # no token, even on loopback
            assert httpx.post(cancel, headers={"x-jury-token": "wrong-token-xxxxxxxx"}).status_code == 403
            assert httpx.get(cancel).status_code == 405  # POST only
            good = {"x-jury-token": TOKEN}
            for cross in (
                {"origin": "https://evil.example"},
                {"origin": f"http://{host}.evil.example"},
                {"sec-fetch-site": "cross-site"},
                {"sec-fetch-site": "same-site"},
            ):
                r = httpx.post(cancel, headers={**good, **cross})
                assert r.status_code == 403 and "cross-origin" in r.json()["error"], cross
            assert not any(isinstance(e, RunCancel) for e in store.read("acme-7"))
            # The cookie the token URL set, from the console's own page: accepted.
            page = httpx.get(f"{base}/?token={TOKEN}", follow_redirects=False)
            assert page.status_code == 303 and page.headers["location"] == "/"
            cookie = page.headers["set-cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
            port = base.rsplit(":", 1)[1]
            assert cookie.startswith(f"{COOKIE}_{port}={TOKEN};"), cookie
            page_of = {"origin": base, "sec-fetch-site": "same-origin"}
            for stale in (f"{COOKIE}={TOKEN}", f"{COOKIE}_1={TOKEN}"):  # not this console's cookie: no token
                assert httpx.post(cancel, headers={"cookie": stale, **page_of}).status_code == 403, stale
            same = {"cookie": f"{COOKIE}_{port}={TOKEN}", **page_of}
            r = httpx.post(cancel, headers=same)
            assert r.status_code == 200, r.text
            assert any(isinstance(e, RunCancel) and e.who == "console" for e in store.read("acme-7"))
            assert store.cancel_flagged("acme-7")
            r = httpx.post(f"{base}/api/runs/acme-7/publish", headers=good)  # jury publish's own refusal
            assert r.status_code == 409 and "publish it once it has ended" in r.json()["error"]
            # Resume: only a run that ended without converging (the page's button says the same).
            for slug, why in [("acme-7", "is still running (review)"), ("acme-10", "converged")]:
                if slug != "acme-7":
                    store.append(slug, run.started(state="converged"))
                page = httpx.get(f"{base}/api/runs/{slug}").json()
                assert page["resumable"] is False and why in page["resumeRefusal"]
                r = httpx.post(f"{base}/api/runs/{slug}/resume", headers=good)
                assert r.status_code == 409 and why in r.json()["error"], r.text
                assert not any(isinstance(e, RunResumed) for e in store.read(slug))
            # What `jury review --resume SLUG --detach` does, through the fleet's Redis.
            store.append("acme-8", run.started(state="failed"))
            page = httpx.get(f"{base}/api/runs/acme-8").json()
            assert page["resumable"] is True and page["resumeRefusal"] is None
            r = httpx.post(f"{base}/api/runs/acme-8/resume", headers=good)
            assert r.status_code == 200, r.text
            resumed = [e for e in store.read("acme-8") if isinstance(e, RunResumed)]
            assert len(resumed) == 1 and "acme-8" in store.active_runs()
            assert httpx.get(f"{base}/api/runs/acme-8").json()["state"] == "review"
            # An ended run without a PR: refused, the forge never reached, and nothing logged (a failure
            # logged would stay in the run's summary, with a retry that could never succeed).
            store.append("acme-9", run.started(state="failed"))
            before = len(store.read("acme-9"))
            r = httpx.post(f"{base}/api/runs/acme-9/publish", headers=good)
            assert r.status_code == 409 and "it has no PR to publish to" in r.json()["error"], r.text
            assert httpx.get(f"{base}/api/runs/acme-9").json()["published"] == []
            assert len(store.read("acme-9")) == before
            assert httpx.get(f"{base}/api/session", headers=good).json()["publish"] is True
            assert httpx.post(f"{base}/api/runs/nope/cancel", headers=good).status_code == 404
            # An ended run has nothing to cancel: refused, and nothing logged nor flagged.
            r = httpx.post(f"{base}/api/runs/acme-10/cancel", headers=good)
            assert r.status_code == 409 and "already ended (converged)" in r.json()["error"], r.text
            assert not any(isinstance(e, RunCancel) for e in store.read("acme-10"))
            assert not store.cancel_flagged("acme-10")
            assert httpx.post(f"{base}/api/runs/acme-7/explode", headers=good).status_code == 404
    finally:
        store.close()


def test_resume_without_the_fleet_says_what_to_do(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.append("acme-7", run.started(state="failed"))
    store.append("acme-8", run.started(state="converged"))
    with console(Settings(dir=tmp_path, redis_url=None), store) as base:
        r = httpx.post(f"{base}/api/runs/acme-7/resume", headers={"x-jury-token": TOKEN})
        page = httpx.get(f"{base}/api/runs/acme-7").json()
        converged = httpx.get(f"{base}/api/runs/acme-8").json()
    assert r.status_code == 409 and "jury review --resume acme-7" in r.json()["error"]
    assert page["resumable"] is False and page["resumeRefusal"] == r.json()["error"]
    assert converged["resumable"] is False and "converged" in converged["resumeRefusal"]


def test_a_store_that_does_not_answer_is_a_503_that_says_so(tmp_path: Path) -> None:
    """Redis down (nothing listens on port 1): every request that reads the store answers 503 with the
    store's own words, never a 500 (or a 404 that says the run does not exist)."""
    url = "redis://127.0.0.1:1/0"
    store = redis_store(url)
    good = {"x-jury-token": TOKEN}
    try:
        with console(Settings(dir=tmp_path, redis_url=url), store) as base:
            for method, path in [
                ("GET", "/api/runs"),
                ("GET", "/api/runs/acme-7"),
                ("GET", "/api/runs/acme-7/events"),
                ("GET", "/api/runs/acme-7/artifacts/round-1.alpha.stdout.txt"),
                ("POST", "/api/runs/acme-7/cancel"),
                ("POST", "/api/runs/acme-7/resume"),
                ("POST", "/api/runs/acme-7/publish"),
            ]:
                r = httpx.request(method, base + path, headers=good, timeout=30)
                assert r.status_code == 503, (method, path, r.status_code, r.text)
                assert r.headers["content-type"] == "application/json"
                why = r.json()["error"]
                assert why.startswith("the run store is unavailable: ") and "127.0.0.1:1" in why, why
            assert httpx.get(f"{base}/healthz").text == "ok"  # the console itself still serves
    finally:
        store.close()


def test_token_url_host_check_and_headers(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    with console(Settings(dir=tmp_path, redis_url=None), store) as base:
        assert httpx.get(f"{base}/?token=nope-nope-nope-nope", follow_redirects=False).status_code == 403
        # Another site rebinding its name to 127.0.0.1 reaches the console under its own Host: refused.
        assert httpx.get(f"{base}/api/runs", headers={"host": "evil.example"}).status_code == 403
        r = httpx.get(f"{base}/api/runs", headers={"host": "localhost"})
        assert r.status_code == 200
        page = httpx.get(f"{base}/runs/acme-7")
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert page.headers["referrer-policy"] == "no-referrer"
        r = httpx.get(f"{base}//evil.example/?token={TOKEN}", follow_redirects=False)
        assert r.headers["location"] == "/evil.example/"  # never an open redirect
    with console(Settings(dir=tmp_path, redis_url=None), store, reads_need_token=True) as base:
        assert httpx.get(f"{base}/api/runs").status_code == 401
        assert httpx.get(f"{base}/").status_code == 401
        assert httpx.get(f"{base}/api/runs", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_two_consoles_on_one_machine_keep_their_own_cookies(tmp_path: Path) -> None:
    """A browser sends a host's cookies to every port of it: the second console a user signs in to must not
    replace the first one's cookie (each has its own token), so each names its cookie for its port."""
    store = FileStore(tmp_path)
    settings = Settings(dir=tmp_path, redis_url=None)
    tokens = ("first-console-token-0123456789", "second-console-token-0123456789")
    first, second = (run.serve(create_app(settings, store, Guard(t, True), loopback=True)) for t in tokens)
    with first as one, second as two, httpx.Client() as browser:  # one cookie jar, as a browser has
        for base, token in zip((one, two), tokens, strict=True):
            assert browser.get(f"{base}/api/runs").status_code == 401
            assert browser.get(f"{base}/?token={token}", follow_redirects=False).status_code == 303
        assert len(browser.cookies.jar) == 2  # both kept: neither overwrote the other
        for base in (one, two):
            assert browser.get(f"{base}/api/runs").status_code == 200, base
            assert browser.get(f"{base}/api/session").json()["canAct"] is True


def concrete(path: str) -> str:
    """A route's path with its parameters filled in."""
    filled = {"{slug}": "acme-7", "{name:path}": "round-1.alpha.stdout.txt", "{action}": "cancel"}
    for param, value in filled.items():
        path = path.replace(param, value)
    assert "{" not in path, path
    return path


@pytest.mark.parametrize("loopback", [False, True], ids=["beyond-loopback", "loopback"])
def test_healthz_needs_no_token_and_says_only_ok_while_every_other_route_needs_it(
    tmp_path: Path, loopback: bool
) -> None:
    """Every route, the run list and the artifacts among them, on loopback too (``jury web``'s default
    there): any process of the machine, a sandboxed agent's included, reaches loopback."""
    from starlette.routing import Mount, Route

    store = FileStore(tmp_path)
    store.append("acme-7", run.started())
    store.put_artifact("acme-7", "round-1.alpha.stdout.txt", b"FINDING: x\n")
    app = create_app(Settings(dir=tmp_path, redis_url=None), store, Guard(TOKEN, True), loopback=loopback)
    requests: list[tuple[str, str]] = []
    for route in app.app.routes:  # type: ignore[attr-defined]
        if isinstance(route, Mount):
            requests.append(("GET", route.path + "/console.js"))
        else:
            assert isinstance(route, Route)
            requests += [(m, concrete(route.path)) for m in sorted(route.methods or ["GET"]) if m != "HEAD"]
    assert ("GET", "/healthz") in requests and len(requests) > 10
    with run.serve(app) as base:
        for given in ({}, {"x-jury-token": "wrong-token-xxxxxxxxxx"}):
            r = httpx.get(f"{base}/healthz", headers=given)
            assert (r.status_code, r.text) == (200, "ok")
            assert r.headers["content-type"].startswith("text/plain")
            assert "set-cookie" not in r.headers and r.headers["cache-control"] == "no-store"
        assert httpx.head(f"{base}/healthz").status_code == 200
        assert httpx.post(f"{base}/healthz").status_code == 405
        for method, path in requests:
            if path == "/healthz":
                continue
            r = httpx.request(method, base + path, timeout=30)
            assert r.status_code == 401, (method, path, r.status_code)
            assert "acme-7" not in r.text and "FINDING" not in r.text
        good = {"authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"{base}/api/runs/acme-7", headers=good).status_code == 200


def test_fleet_page_shows_spend_against_the_ceiling_and_runs_in_flight(
    shared_redis: str, tmp_path: Path
) -> None:
    from workers.fleet.ledger import Ledger
    from workers.fleet.presence import Presence, WorkerPresence

    config = tmp_path / "config.toml"
    config.write_text(
        '[[schedules]]\nname = "nightly"\ncron = "0 2 * * *"\nkind = "verify"\nrepos = ["a/b"]\n'
    )
    settings = Settings(dir=tmp_path, redis_url=shared_redis, fleet_day_ceiling=5.0, config=config)
    store = redis_store(shared_redis)
    try:
        store.client.lpush("review", b"{}", b"{}")  # two messages no worker has taken (Celery's list)
        me = WorkerPresence(id="w1", host="h1", pid=42, queues=["review"], started=time.time(), last_seen=0)
        Presence(store.client, me, ttl=300).refresh()  # a live worker's record, as its thread writes it
        store.append("acme-7", run.started())
        store.activate("acme-7")
        ledger = Ledger(store.client)
        ledger.reserve(
            slug="acme-7", call_id="c1", projection=0.5, run_ceiling=None, call_ceiling=None, day_ceiling=None
        )
        ledger.reconcile("c1", 0.3)
        with console(settings, store) as base:
            f = httpx.get(f"{base}/api/fleet").json()
        assert f["spend"]["spentUsd"] == pytest.approx(0.3) and f["spend"]["ceilingUsd"] == 5.0
        (worker,) = f["workers"]["workers"]
        assert (worker["id"], worker["host"], worker["queues"], worker["state"]) == (
            "w1",
            "h1",
            ["review"],
            "running",
        )
        depths = {q["name"]: q["depth"] for q in f["queues"]["queues"]}
        assert depths["review"] == 2 and depths["control"] == 0
        (nightly,) = f["schedules"]["schedules"]
        assert (
            nightly["name"] == "nightly"
            and nightly["last"] is None
            and nightly["next"].endswith("02:00:00 UTC")
        )
        (inflight,) = f["inflight"]["runs"]
        assert inflight["slug"] == "acme-7" and {a["agent"] for a in inflight["actions"]} == {"alpha", "beta"}
    finally:
        store.close()
    with console(Settings(dir=tmp_path, redis_url=None), FileStore(tmp_path)) as base:
        f = httpx.get(f"{base}/api/fleet").json()
    assert f["redis"] is False and all(f[k]["available"] is False for k in ("workers", "queues", "spend"))
    # The schedules are the operator's file's ($JURY_DIR/config.toml); their last firings are the fleet's.
    assert [x["name"] for x in f["schedules"]["schedules"]] == ["nightly"]
    assert "last firings unknown" in f["schedules"]["note"]


def test_jury_web_binds_loopback_prints_the_token_url_and_refuses_other_addresses(tmp_path: Path) -> None:
    env = {**outside_env(), "JURY_DIR": str(tmp_path), "NO_COLOR": "1"}
    refused = subprocess.run(
        [sys.executable, "-m", "jury_cli", "web", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert refused.returncode == 2 and "needs a token" in refused.stderr
    FileStore(tmp_path).append("acme-7", run.started())
    p = subprocess.Popen(
        [sys.executable, "-m", "jury_cli", "web", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert p.stdout is not None
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            if m := re.search(r"(http://127\.0\.0\.1:\d+/)\?token=(\S+)", line):
                url, token = m.group(1), m.group(2)
        assert url is not None, "jury web printed no URL"
        with httpx.Client(base_url=url) as client:
            for path in ("api/runs", "api/runs/acme-7", "api/session", "api/runs/acme-7/artifacts/run.json"):
                r = client.get(path)  # reads need the token on loopback too
                assert r.status_code == 401 and "acme" not in r.text, (path, r.status_code)
            assert client.post("api/runs/acme-7/cancel").status_code == 401
            client.get(f"?token={token}")  # the cookie
            assert client.get("api/runs").json()["runs"][0]["slug"] == "acme-7"
            assert client.get("api/session").json()["canAct"] is True
    finally:
        p.terminate()
        p.wait(timeout=30)
        if p.stdout is not None:
            p.stdout.close()
    assert os.path.exists(tmp_path / "runs" / "acme-7")


def test_jury_web_no_token_is_an_explicit_choice_said_and_logged_and_loopback_only(tmp_path: Path) -> None:
    env = {**outside_env(), "JURY_DIR": str(tmp_path), "NO_COLOR": "1"}
    beyond = subprocess.run(
        [sys.executable, "-m", "jury_cli", "web", "--no-token", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        env={**env, "JURY_WEB_TOKEN": "an-operator-token-0123456789"},
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert beyond.returncode == 2 and "--no-token is for a console on loopback only" in beyond.stderr
    FileStore(tmp_path).append("acme-7", run.started())
    p = subprocess.Popen(
        [sys.executable, "-m", "jury_cli", "web", "--port", "0", "--no-token"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    said: list[str] = []
    try:
        assert p.stdout is not None
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            said.append(line)
            if m := re.search(r"(http://127\.0\.0\.1:\d+/)\?token=\S+", line):
                url = m.group(1)
        assert url is not None, "jury web printed no URL"
        text = "".join(said)
        assert "--no-token: every process on this machine can read every run" in text, text
        assert "web.no_token" in text, text  # in the log too
        with httpx.Client(base_url=url) as client:
            assert client.get("api/runs").json()["runs"][0]["slug"] == "acme-7"  # the choice: reads open
            assert client.post("api/runs/acme-7/cancel").status_code == 403  # actions still need it
            assert client.get("api/session").json()["canAct"] is False
    finally:
        p.terminate()
        p.wait(timeout=30)
        if p.stdout is not None:
            p.stdout.close()


def test_jury_web_beyond_loopback_prints_addresses_a_browser_can_open_and_never_the_token(
    tmp_path: Path,
) -> None:
    env = {**outside_env(), "JURY_DIR": str(tmp_path), "NO_COLOR": "1", "JURY_WEB_TOKEN": TOKEN}
    p = subprocess.Popen(
        [sys.executable, "-m", "jury_cli", "web", "--host", "0.0.0.0", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert p.stdout is not None
        printed: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("open http" in line for line in printed):
            if not (line := p.stdout.readline()):
                break
            printed.append(line)
        text = "".join(printed)
        m = re.search(r"open (http://127\.0\.0\.1:\d+/) on this machine", text)
        assert m is not None, f"jury web printed no URL to open: {text}"
        url = m.group(1)
        assert "listening on all addresses (0.0.0.0)" in text
        assert "http://0.0.0.0" not in text  # no browser opens that
        assert f"http://{socket.gethostname()}:{url.rsplit(':', 1)[1]}" in text
        assert TOKEN not in text and "?token=" not in text  # the operator's token is not echoed
        assert httpx.get(f"{url}api/runs").status_code == 401
        assert httpx.get(f"{url}api/runs", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    finally:
        p.terminate()
        p.wait(timeout=30)
        if p.stdout is not None:
            p.stdout.close()


def test_the_run_list_folds_what_is_new_only(backing) -> None:
    """The list keeps its folds between requests and reads only what each log gained (a live run starts
    from the coordinator's snapshot); a new event still shows at once."""
    from orchestrator.fold import fold, snapshot

    settings, store = backing
    store.append("acme-7", run.started())
    if isinstance(store, RedisStore):  # a snapshot that says something the log does not: it is what is read
        found = store.read_after("acme-7", None) or []
        state = fold([e for _, e in found], "acme-7")
        state.target = state.target.model_copy(update={"title": "from the snapshot"})
        store.write_snapshot("acme-7", snapshot(state, found[-1][0], store.origin("acme-7")))
    with console(settings, store) as base:
        (first,) = httpx.get(f"{base}/api/runs").json()["runs"]
        assert first["state"] == "review" and first["findings"] == 0
        if isinstance(store, RedisStore):
            assert first["title"] == "from the snapshot"
        store.append("acme-7", run.alpha_found())
        (later,) = httpx.get(f"{base}/api/runs").json()["runs"]
        assert later["findings"] == 1 and later["open"] == 1
        store.append("acme-7", [run.TargetEvent(eid="end", ts=run.at(80), target=run.Target(state="human"))])
        (last,) = httpx.get(f"{base}/api/runs").json()["runs"]
        assert last["state"] == "human"


def test_an_artifact_longer_than_the_console_serves_says_it_was_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(tmp_path)
    store.append("acme-7", run.started())
    store.put_artifact("acme-7", "round-1.alpha.stdout.txt", b"x" * 100)
    monkeypatch.setattr(web_app, "ARTIFACT_CAP", 40)
    served = web_app.read_artifact(store, "acme-7", "round-1.alpha.stdout.txt")
    assert served is not None and served.startswith(b"x" * 40 + b"\n")
    assert b"x" * 41 not in served and b"the first 40 of its 100 bytes" in served
    store.put_artifact("acme-7", "short.txt", b"y" * 40)
    assert web_app.read_artifact(store, "acme-7", "short.txt") == b"y" * 40  # whole: nothing said
