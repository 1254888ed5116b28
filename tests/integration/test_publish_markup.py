"""Hostile markup in a run's findings, published through the real forge clients to the local fake GitHub
and GitLab (tests/fakes/forge_server.py) over HTTP: what arrives (the review, the inline comments, the
summary's list of refused comments, the check's title and summary, the status) holds no raw HTML and no
link of a scheme but http, https and mailto outside code, and still shows what the agent wrote."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from markdown_it import MarkdownIt

from orchestrator.domain import (
    Event,
    FindingRaised,
    FindingResolved,
    JuryConfigEvent,
    RoundStart,
    TargetEvent,
)
from orchestrator.fold import fold
from orchestrator.forge import ForgeSettings
from orchestrator.spec import AgentSpec, JuryConfig, Target
from tests.fakes.forge_server import FakePR, ForgeServer
from tests.unit.test_markdown_safe import problems
from workers.runtime.publish import publish_state

ATTACK = '<img src=x onerror=alert(1)> see [x](javascript:alert(1)) and <a href="javascript:alert(2)">y</a>'
GH_TOKEN = "ghp_MARKUPsecretTOKEN0123456789"
GL_TOKEN = "glpat-MARKUPsecretTOKEN98765"
HEAD = "c" * 40


@pytest.fixture
def server() -> Iterator[ForgeServer]:
    with ForgeServer() as s:
        s.user(GH_TOKEN, "jury-bot", app=True)
        s.user(GL_TOKEN, "jury-bot")
        for repo in (s.github_repo("acme/sample"), s.gitlab_project("acme/sample")):
            repo.add(FakePR(number=7, title="pr", head_sha=HEAD, diff={"stats.py": {5, 6}}))
        yield s


def hostile_run(url: str) -> list[Event]:
    """A run that ended with an open finding on the diff, a deferred one off it, both written to attack."""
    cfg = JuryConfig(reviewers=["a"], judge="j", agents={"a": AgentSpec(name="a"), "j": AgentSpec(name="j")})
    return [
        TargetEvent(eid="target:0", target=Target(url=url, head=HEAD, trunk="main", state="review")),
        JuryConfigEvent(eid="config:0", config=cfg),
        RoundStart(eid="round.start:1", n=1, sha=HEAD, prompt="p"),
        FindingRaised(
            eid="raise:1",
            id="f1",
            round=1,
            agent="a",
            claim=ATTACK,
            loc="stats.py:5",
            body=ATTACK + "\n```\n</code><script>alert(3)</script>\n```\n",
        ),
        FindingRaised(eid="raise:2", id="f2", round=1, agent="a", claim=ATTACK, loc="stats.py:99"),
        FindingResolved(eid="v2", id="f2", verdict="deferred", reason=ATTACK, who="j"),
        TargetEvent(eid="end", target=Target(state="human", state_note=ATTACK)),
    ]


def assert_inert(where: str, body: str) -> None:
    body = body.split("\n", 1)[1] if body.startswith("<!-- jury:") else body  # Jury's own marker
    assert problems(body) == [], (where, body)
    rendered = MarkdownIt("commonmark", {"html": True}).render(body)
    assert "<img" not in rendered and "<a " not in rendered and "<script" not in rendered, (where, rendered)


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_hostile_findings_arrive_neutralised(server: ForgeServer, kind: str) -> None:
    url = (
        "https://github.com/acme/sample/pull/7"
        if kind == "github"
        else "https://gitlab.com/acme/sample/-/merge_requests/7"
    )
    s = fold(hostile_run(url), "s-1")
    settings = ForgeSettings.model_validate(
        {
            "JURY_GITHUB_API": server.github_api,
            "JURY_GITLAB_API": server.gitlab_api,
            "GITHUB_TOKEN": GH_TOKEN,
            "GITLAB_TOKEN": GL_TOKEN,
            "JURY_GITHUB_LOGIN": "jury-bot",
        }
    )
    with httpx.Client() as http:
        event = publish_state(s, "publish:human:e0", settings=settings, client=http)
    assert event.ok, event
    if kind == "github":
        repo = server.github["acme/sample"]
        bodies = {f"review {r['id']}": r["body"] for r in repo.reviews}
        bodies |= {f"comment {c['path']}:{c['line']}": c["body"] for c in repo.comments}
        (check,) = repo.check_runs
        bodies["check summary"] = check["output"]["summary"]
        plain = [check["output"]["title"]]
        placed = [c["body"] for c in repo.comments]
    else:
        repo = server.gitlab["acme/sample"]
        notes = [n for d in repo.discussions[7] for n in d["notes"]]
        bodies = {f"note {n['id']}": n["body"] for n in notes}
        plain = [st["description"] for st in repo.statuses]
        placed = [n["body"] for n in notes if n.get("position")]
    assert len(bodies) >= 2
    for where, body in bodies.items():
        assert_inert(where, body)
    for line in plain:  # shown as plain text by the forge: one line, still saying why
        assert "\n" not in line and "Jury" in line
    # the open finding on the diff's line 5 went inline, with the agent's text shown, not dropped
    (inline,) = placed
    rendered = MarkdownIt("commonmark").render(inline)
    assert "&lt;img src=x onerror=alert(1)&gt;" in rendered
    assert "[x](javascript:alert(1))" in rendered  # as text: no link
    assert "&lt;/code&gt;&lt;script&gt;alert(3)&lt;/script&gt;" in rendered  # verbatim in its code block
    everything = "\n".join(bodies.values())
    assert "stats.py:99" in everything  # the deferred one, off the diff, is listed in the summary
