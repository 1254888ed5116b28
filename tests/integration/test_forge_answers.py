"""Malformed forge answers: every call family of both clients, answered by the fake forge (a real local
HTTP server) with a list where an object belongs and a string where an object belongs. Each is a
one-line ``ForgeError`` naming the call and what was wrong, never a ``TypeError`` or ``AttributeError``
from deep inside a client (``orchestrator/forge/answers.py`` checks them at the transport)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest

from orchestrator.forge import ForgeError
from tests.fakes.forge_kit import (  # noqa: F401 (fixtures)
    Kit,
    clean_env_fixture,
    draft,
    http_fixture,
    make_kit,
    seed_five,
    server_fixture,
)
from tests.fakes.forge_server import ForgeServer

HEAD = "1" * 40
Act = Callable[[Kit], object]


def listing(kit: Kit) -> object:
    return kit.forge.list_open(kit.repo)


def getting(kit: Kit) -> object:
    return kit.forge.get(kit.repo, 1)


def publishing(kit: Kit) -> object:
    return kit.forge.publish_review(kit.repo, 1, HEAD, draft("run-1", "one", ("src/app.py", 10, "a", "f1")))


def republishing(kit: Kit) -> object:
    second = draft("run-1", "two", ("src/app.py", 10, "a", "f1"), ("src/app.py", 11, "b", "f2"))
    return kit.forge.publish_review(kit.repo, 1, HEAD, second)


def checking(kit: Kit) -> object:
    return kit.forge.set_check(kit.repo, HEAD, conclusion="success", title="ok", summary="fine")


def checking_again(kit: Kit) -> object:
    return kit.forge.set_check(kit.repo, HEAD, conclusion="failure", title="bad", summary="not fine")


def nothing(kit: Kit) -> object:
    return None


def older_head(kit: Kit) -> object:
    kit.state.prs[1].push("c" * 40)  # the publish is for the older head: GitLab's versions are asked
    return None


@dataclass(frozen=True)
class Case:
    kind: str
    method: str
    pattern: str  # the call's path ends so
    act: Act
    before: Act = nothing  # what runs first, unharmed (an earlier publish to update)
    listed: bool = False  # the answer is a list of objects
    app: bool = False  # a GitHub App token (check runs)

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.method}-{self.pattern}-{self.act.__name__}"


CASES = [
    Case("github", "GET", r"/pulls$", listing, listed=True),
    Case("github", "GET", r"/pulls/1$", getting),
    Case("github", "GET", r"/user$", publishing),
    Case("github", "GET", r"/pulls/1/reviews$", publishing, listed=True),
    Case("github", "GET", r"/pulls/1/comments$", publishing, listed=True),
    Case("github", "POST", r"/pulls/1/reviews$", publishing),
    Case("github", "GET", r"/reviews/\d+/comments$", publishing, listed=True),
    Case("github", "PUT", r"/pulls/1/reviews/\d+$", republishing, before=publishing),
    Case("github", "POST", r"/pulls/1/comments$", republishing, before=publishing),
    Case("github", "GET", r"/check-runs$", checking, app=True),
    Case("github", "POST", r"/check-runs$", checking, app=True),
    Case("github", "PATCH", r"/check-runs/\d+$", checking_again, before=checking, app=True),
    Case("github", "GET", r"/statuses$", checking, listed=True),
    Case("github", "POST", r"/statuses/[0-9a-f]+$", checking),
    Case("gitlab", "GET", r"widgets$", listing),
    Case("gitlab", "GET", r"/merge_requests$", listing, listed=True),
    Case("gitlab", "GET", r"/merge_requests/1$", getting),
    Case("gitlab", "GET", r"/merge_requests/1$", publishing),
    Case("gitlab", "GET", r"/user$", publishing),
    Case("gitlab", "GET", r"/discussions$", publishing, listed=True),
    Case("gitlab", "POST", r"/discussions$", publishing),
    Case("gitlab", "POST", r"/merge_requests/1/notes$", publishing),
    Case("gitlab", "PUT", r"/merge_requests/1/notes/\d+$", republishing, before=publishing),
    Case("gitlab", "GET", r"/versions$", publishing, before=older_head, listed=True),
    Case("gitlab", "GET", r"/statuses$", checking, listed=True),
    Case("gitlab", "POST", r"/statuses/[0-9a-f]+$", checking),
]
SHAPES = {
    # a list where an object belongs (the answer's object, or each item of a list answer)
    "list": (["x", {"id": 1}], [["x", {"id": 1}]]),
    # a string where an object belongs
    "string": ("not an object", ["not an object"]),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_malformed_answer_is_a_one_line_error_naming_the_call(
    case: Case, shape: str, server: ForgeServer, http: httpx.Client
) -> None:
    kit = make_kit(case.kind, server, http, app=case.app, **({"login": "jury-bot"} if case.app else {}))
    seed_five(kit.state)
    case.before(kit)
    server.garble_next(case.method, case.pattern, SHAPES[shape][case.listed])
    with pytest.raises(ForgeError) as raised:
        case.act(kit)
    error = raised.value
    said = str(error)
    assert error.call.startswith(f"{case.method} ") and re.search(case.pattern, error.call), said
    assert "\n" not in said and "unexpected answer: expected " in said, said
    assert kit.token not in said and "not an object" not in said  # the forge's text is not echoed
    assert not server.garbles  # the garbled answer was the one that failed


def test_a_string_where_a_nested_object_belongs_says_where(server: ForgeServer, http: httpx.Client) -> None:
    kit = make_kit("github", server, http)
    seed_five(kit.state)
    pull = http.get(f"{server.github_api}/repos/{kit.repo}/pulls/1").json()
    server.garble_next("GET", r"/pulls/1$", {**pull, "head": "someone:feature"})
    with pytest.raises(ForgeError, match=r"unexpected answer: expected an object at head, got a string"):
        kit.forge.get(kit.repo, 1)

    gl = make_kit("gitlab", server, http)
    seed_five(gl.state)
    server.garble_next("GET", r"/discussions$", [{"id": "ab12", "notes": [{"id": 5, "author": "me"}]}])
    with pytest.raises(ForgeError, match=r"expected an object at 0\.notes\.0\.author, got a string"):
        publishing(gl)
