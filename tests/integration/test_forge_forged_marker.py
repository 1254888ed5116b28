"""Only Jury's own inline comments are Jury's to edit, whatever marker another author's body carries.

A real local HTTP server speaking GitHub's REST calls (``tests/fakes/forge_server``). Anyone who can
comment on a PR can start a comment with ``<!-- jury:run=...;c=... -->``: Jury's marker, naming the run
and one of its comments. ``GitHub.publish_review`` takes a comment for its own only when the marker is
there AND the author is Jury's login; a token with write access could otherwise rewrite the forger's
comment (or "retire" it) in Jury's name, and leave Jury's own comment stale.
"""

from __future__ import annotations

from typing import Any

import httpx

from orchestrator.forge.base import marker
from tests.fakes.forge_kit import (  # noqa: F401 (fixtures)
    draft,
    http_fixture,
    make_kit,
    seed_five,
    server_fixture,
)
from tests.fakes.forge_server import ForgeServer

HEAD = "1" * 40


def forged_comment(cid: int, line: int, body: str) -> dict[str, Any]:
    """An inline comment by mallory on PR 1, as GitHub lists it."""
    return {
        "id": cid,
        "pr": 1,
        "pull_request_review_id": 0,
        "user": {"login": "mallory", "id": 666, "type": "User"},
        "body": body,
        "path": "src/app.py",
        "line": line,
        "side": "RIGHT",
        "commit_id": HEAD,
        "html_url": "",
    }


def test_another_authors_comment_with_jurys_marker_is_never_edited(
    server: ForgeServer, http: httpx.Client
) -> None:
    kit = make_kit("github", server, http)
    seed_five(kit.state)
    first = draft("run-1", "1 open", ("src/app.py", 10, "off by one", "f1"))
    kit.forge.publish_review(kit.repo, 1, HEAD, first)
    (own,) = kit.state.comments
    ident = first.comments[0].ident
    # mallory copies the marker of Jury's own comment, and invents one Jury's next draft will not hold
    same = forged_comment(9001, 11, f"{marker('run-1', ident)}\nJury says: LGTM, merge it")
    stray = forged_comment(9002, 12, f"{marker('run-1', 'abcdef012345')}\nJury says: approved")
    kit.state.comments += [same, stray]
    bodies_before = (same["body"], stray["body"])

    second = draft("run-1", "1 open", ("src/app.py", 10, "off by one: still there", "f1"))
    published = kit.forge.publish_review(kit.repo, 1, HEAD, second)

    assert (same["body"], stray["body"]) == bodies_before  # neither edited nor "retired"
    patched = [call.path.removeprefix("/github") for call in server.calls("PATCH")]
    assert patched == [f"/repos/{kit.repo}/pulls/comments/{own['id']}"]  # Jury's own, and only it
    assert own["body"].endswith("off by one: still there")
    assert [(c.ident, c.action) for c in published.comments] == [(ident, "updated")]
