"""Forge clients against a real local HTTP server that speaks the GitHub and GitLab calls Jury uses:
listing, paging, ETags, rate limits, errors and the token, publishing a review."""

from __future__ import annotations

import httpx
import pytest
from structlog.testing import capture_logs

from orchestrator.forge import ForgeError, ForgeSettings, GitHub, InlineComment, ReviewDraft
from orchestrator.forge.base import read_marker
from tests.fakes.forge_kit import (  # noqa: F401 (fixtures)
    GH_REPO,
    GH_TOKEN,
    GL_REPO,
    GL_TOKEN,
    Kit,
    clean_env_fixture,
    day,
    draft,
    http_fixture,
    kit_fixture,
    make_kit,
    seed_five,
    server_fixture,
    writes,
)
from tests.fakes.forge_server import ForgeServer

# --- listing and reading ------------------------------------------------------------------------------


def test_list_open_applies_every_filter(kit: Kit) -> None:
    seed_five(kit.state)
    numbers = lambda prs: [p.number for p in prs]  # noqa: E731
    assert numbers(kit.forge.list_open(kit.repo)) == [4, 3, 1, 5]  # drafts out, latest update first
    assert numbers(kit.forge.list_open(kit.repo, include_drafts=True)) == [4, 3, 2, 1, 5]
    assert numbers(kit.forge.list_open(kit.repo, base="main")) == [4, 1, 5]
    assert numbers(kit.forge.list_open(kit.repo, labels=("bug",))) == [4]
    assert numbers(kit.forge.list_open(kit.repo, labels=("bug", "docs"))) == []
    assert numbers(kit.forge.list_open(kit.repo, updated_since=day(5))) == [4, 3, 1]
    assert numbers(kit.forge.list_open(kit.repo, base="main", include_drafts=True, updated_since=day(2))) == [
        4,
        2,
        1,
    ]


def test_get_reads_one_pr(kit: Kit) -> None:
    seed_five(kit.state)
    pr = kit.forge.get(kit.repo, 4)
    assert (pr.forge, pr.repo, pr.number, pr.title) == (kit.kind, kit.repo, 4, "labelled")
    assert (pr.base, pr.head_sha, pr.head_branch, pr.is_fork, pr.draft) == (
        "main",
        "4" * 40,
        "feature",
        True,
        False,
    )
    assert pr.labels == ("bug", "security")
    assert pr.clone_url == (
        f"https://github.com/{GH_REPO}.git" if kit.kind == "github" else f"https://gitlab.com/{GL_REPO}.git"
    )
    assert pr.updated_at == day(8)
    assert pr.ref == ("refs/pull/4/head" if kit.kind == "github" else "refs/merge-requests/4/head")
    assert not kit.forge.get(kit.repo, 1).is_fork
    assert kit.forge.get(kit.repo, 2).draft


def test_pagination_follows_every_page(kit: Kit) -> None:
    seed_five(kit.state)
    kit.server.max_per_page = 2
    assert len(kit.forge.list_open(kit.repo, include_drafts=True)) == 5
    pages = kit.server.calls("GET", kit.list_path)
    assert len(pages) == 3
    assert [r.query.get("page", ["1"])[0] for r in pages] == ["1", "2", "3"]


def test_gitlab_pages_by_x_next_page_alone(server: ForgeServer, http: httpx.Client) -> None:
    kit = make_kit("gitlab", server, http)
    seed_five(kit.state)
    server.max_per_page, server.gitlab_links = 2, False
    assert len(kit.forge.list_open(kit.repo, include_drafts=True)) == 5
    assert len(server.calls("GET", kit.list_path)) == 3


def test_gitlab_filters_are_checked_on_jurys_side_too(server: ForgeServer, http: httpx.Client) -> None:
    kit = make_kit("gitlab", server, http)
    seed_five(kit.state)
    server.gitlab_filters = False
    assert [p.number for p in kit.forge.list_open(kit.repo)] == [4, 3, 1, 5]
    assert [p.number for p in kit.forge.list_open(kit.repo, base="main", labels=("bug",))] == [4]


def test_updated_since_stops_paging_early(kit: Kit) -> None:
    seed_five(kit.state)
    kit.server.max_per_page = 1
    assert [p.number for p in kit.forge.list_open(kit.repo, updated_since=day(8))] == [4]
    assert len(kit.server.calls("GET", kit.list_path)) <= 2


def test_etag_304_reuses_the_cached_body(kit: Kit) -> None:
    seed_five(kit.state)
    first = kit.forge.list_open(kit.repo)
    key = f"GET {kit.list_path}"
    assert (kit.server.full[key], kit.server.not_modified[key]) == (1, 0)
    again = kit.forge.list_open(kit.repo)
    assert again == first
    assert (kit.server.full[key], kit.server.not_modified[key]) == (1, 1)
    assert kit.server.calls("GET", kit.list_path)[-1].headers["if-none-match"].startswith('W/"')
    kit.state.prs[1].push("9" * 40, when=day(9))
    moved = kit.forge.list_open(kit.repo)
    assert kit.server.full[key] == 2
    assert moved[0].number == 1 and moved[0].head_sha == "9" * 40


# --- rate limits ---------------------------------------------------------------------------------------


def test_retry_after_is_waited_with_the_injected_sleep(kit: Kit) -> None:
    seed_five(kit.state)
    kit.server.fail_next(1, 429, headers={"Retry-After": "7"}, message="slow down", match=kit.list_path)
    assert len(kit.forge.list_open(kit.repo)) == 4
    assert kit.time.sleeps == [7.0]


def test_exhausted_quota_waits_until_the_reset(kit: Kit) -> None:
    seed_five(kit.state)
    kit.server.fail_next(1, kit.rate_limited(), headers=kit.exhausted(42), message="API rate limit exceeded")
    assert len(kit.forge.list_open(kit.repo)) == 4
    assert kit.time.sleeps == [42.0]


def test_a_success_that_spends_the_quota_pauses_the_next_call(kit: Kit) -> None:
    seed_five(kit.state)
    kit.server.extra_headers = kit.exhausted(30)
    kit.forge.get(kit.repo, 1)
    kit.forge.get(kit.repo, 3)
    assert kit.time.sleeps == [30.0]  # once, before the first call after the quota ran out


def test_github_secondary_limit_waits_a_minute_and_more(server: ForgeServer, http: httpx.Client) -> None:
    kit = make_kit("github", server, http)
    seed_five(kit.state)
    message = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
    server.fail_next(2, 403, message=message)
    assert len(kit.forge.list_open(kit.repo)) == 4
    assert kit.time.sleeps == [60.0, 120.0]


def test_retries_are_bounded_then_a_clear_error(kit: Kit) -> None:
    seed_five(kit.state)
    kit.server.fail_next(10, 429, headers={"Retry-After": "5"}, message="too many", match=kit.list_path)
    with pytest.raises(ForgeError) as caught:
        kit.forge.list_open(kit.repo)
    assert kit.time.sleeps == [5.0, 5.0, 5.0]
    assert len(kit.server.calls("GET", kit.list_path)) == 4
    text = str(caught.value)
    assert kit.repo in text and kit.list_call in text and "429" in text and "rate limited" in text


def test_a_wait_beyond_the_limit_fails_at_once(kit: Kit) -> None:
    seed_five(kit.state)
    kit.server.fail_next(1, 429, headers={"Retry-After": "3600"})
    with pytest.raises(ForgeError, match=r"3600s .* more than the 300s Jury waits"):
        kit.forge.list_open(kit.repo)
    assert kit.time.sleeps == []


def test_a_plain_403_is_not_retried(kit: Kit) -> None:
    seed_five(kit.state)
    kit.server.fail_next(1, 403, message="Must have admin rights to Repository.")
    with pytest.raises(ForgeError) as caught:
        kit.forge.get(kit.repo, 1)
    assert caught.value.status == 403 and kit.time.sleeps == []
    assert "Must have admin rights" in str(caught.value)


# --- errors and the token ------------------------------------------------------------------------------


def test_errors_name_repo_and_call_and_never_the_token(kit: Kit) -> None:
    seed_five(kit.state)
    with capture_logs() as logs:
        with pytest.raises(ForgeError) as missing:
            kit.forge.get(kit.repo, 99)
        kit.server.fail_next(1, 429, headers={"Retry-After": "1"}, message=f"bad token {kit.token}")
        kit.forge.get(kit.repo, 1)
        kit.server.fail_next(1, 422, message=f"echo: Bearer {kit.token}")
        with pytest.raises(ForgeError) as echoed:
            kit.forge.get(kit.repo, 1)
    call = kit.list_call.removeprefix("GET ") + "/99"
    assert (
        kit.repo in str(missing.value) and f"GET {call}" in str(missing.value) and "404" in str(missing.value)
    )
    assert kit.token not in str(echoed.value) and "***" in str(echoed.value)
    assert any(entry["event"] == "forge.rate_limited" for entry in logs)
    assert kit.token not in repr(logs)
    assert kit.token not in repr(kit.forge) and kit.token not in repr(
        ForgeSettings.model_validate({"GITHUB_TOKEN": kit.token})
    )


def test_the_token_travels_only_in_its_header(kit: Kit) -> None:
    seed_five(kit.state)
    kit.forge.list_open(kit.repo)
    kit.forge.publish_review(kit.repo, 1, "1" * 40, ReviewDraft(run="r1", body="ok"))
    for request in kit.server.requests:
        if kit.kind == "github":
            assert request.headers["authorization"] == f"Bearer {kit.token}"
            assert "private-token" not in request.headers
        else:
            assert request.headers["private-token"] == kit.token
            assert "authorization" not in request.headers
        assert kit.token not in request.path + repr(request.query) + repr(request.body)


def test_a_next_page_on_another_origin_is_refused(kit: Kit) -> None:
    seed_five(kit.state)
    with ForgeServer() as elsewhere:
        kit.server.max_per_page = 2
        kit.server.next_link_base = elsewhere.url
        with pytest.raises(ForgeError, match="another origin") as caught:
            kit.forge.list_open(kit.repo)
        assert elsewhere.requests == []
    assert kit.token not in str(caught.value)


def test_an_unencoded_gitlab_path_is_not_found(server: ForgeServer, http: httpx.Client) -> None:
    """The fake insists on the encoded project id, so the subgroup tests above prove the encoding."""
    make_kit("gitlab", server, http)
    answer = http.get(f"{server.gitlab_api}/projects/{GL_REPO}", headers={"PRIVATE-TOKEN": GL_TOKEN})
    assert answer.status_code == 404


# --- publishing ----------------------------------------------------------------------------------------


def own_inline(kit: Kit, run: str) -> list[dict[str, object]]:
    """Jury's inline comments for ``run`` on PR 1: path, line, body (normalised across forges)."""
    found = []
    if kit.kind == "github":
        for c in kit.state.comments:
            marker = read_marker(c["body"])
            if marker and marker[0] == run and marker[1]:
                found.append(
                    {
                        "id": c["id"],
                        "path": c["path"],
                        "line": c["line"],
                        "body": c["body"],
                        "side": c["side"],
                        "commit": c["commit_id"],
                    }
                )
    else:
        for thread in kit.state.discussions.get(1, []):
            for note in thread["notes"]:
                marker = read_marker(note["body"])
                if marker and marker[0] == run and marker[1]:
                    pos = note["position"]
                    found.append(
                        {
                            "id": note["id"],
                            "path": pos["new_path"],
                            "line": pos["new_line"],
                            "body": note["body"],
                            "side": "RIGHT",
                            "commit": pos["head_sha"],
                        }
                    )
    return sorted(found, key=lambda c: (c["path"], c["line"]))


def summaries(kit: Kit, run: str) -> list[str]:
    if kit.kind == "github":
        bodies = [r["body"] for r in kit.state.reviews]
    else:
        bodies = [t["notes"][0]["body"] for t in kit.state.discussions.get(1, []) if t["individual_note"]]
    return [b for b in bodies if read_marker(b) == (run, None)]


def test_publish_posts_one_review_with_inline_comments_on_the_right_lines(kit: Kit) -> None:
    seed_five(kit.state)
    head = "1" * 40
    review = draft(
        "run-1",
        "2 open findings",
        ("src/app.py", 10, "off by one", "f1"),
        ("src/app.py", 12, "unchecked input", "f2"),
    )
    published = kit.forge.publish_review(kit.repo, 1, head, review)
    assert published.created and [c.action for c in published.comments] == ["created", "created"]
    assert all(c.id for c in published.comments)
    assert len(summaries(kit, "run-1")) == 1 and "2 open findings" in summaries(kit, "run-1")[0]
    placed = own_inline(kit, "run-1")
    assert [(c["path"], c["line"], c["side"], c["commit"]) for c in placed] == [
        ("src/app.py", 10, "RIGHT", head),
        ("src/app.py", 12, "RIGHT", head),
    ]
    assert "off by one" in str(placed[0]["body"]) and "unchecked input" in str(placed[1]["body"])


def test_republish_updates_instead_of_duplicating(kit: Kit) -> None:
    seed_five(kit.state)
    head = "1" * 40
    first = draft("run-1", "2 open", ("src/app.py", 10, "off by one", "f1"), ("src/app.py", 11, "leak", "f2"))
    kit.forge.publish_review(kit.repo, 1, head, first)
    before = {c["line"]: c["id"] for c in own_inline(kit, "run-1")}
    second = draft(
        "run-1",
        "1 accepted, 1 open",
        ("src/app.py", 10, "off by one: fixed in abc123", "f1"),
        ("src/app.py", 12, "new finding", "f3"),
    )
    published = kit.forge.publish_review(kit.repo, 1, head, second)
    assert not published.created
    assert {c.ident: c.action for c in published.comments} == {
        second.comments[0].ident: "updated",
        second.comments[1].ident: "created",
        first.comments[1].ident: "retired",
    }
    assert (
        summaries(kit, "run-1") == [summaries(kit, "run-1")[0]] and "1 accepted" in summaries(kit, "run-1")[0]
    )
    after = own_inline(kit, "run-1")
    assert len(after) == 3
    by_line = {c["line"]: c for c in after}
    assert by_line[10]["id"] == before[10] and "fixed in abc123" in str(by_line[10]["body"])
    assert by_line[11]["id"] == before[11] and "no longer reports" in str(by_line[11]["body"])
    count = writes(kit)
    again = kit.forge.publish_review(kit.repo, 1, head, second)
    assert writes(kit) == count  # the same review again changes nothing
    assert {c.action for c in again.comments} == {"unchanged", "retired"}


def test_a_line_off_the_diff_goes_into_the_summary(kit: Kit) -> None:
    seed_five(kit.state)
    review = draft(
        "run-2", "findings", ("src/app.py", 11, "real", "ok"), ("src/app.py", 99, "elsewhere", "off")
    )
    published = kit.forge.publish_review(kit.repo, 1, "1" * 40, review)
    assert {c.line: c.action for c in published.comments} == {11: "created", 99: "unplaced"}
    assert [c["line"] for c in own_inline(kit, "run-2")] == [11]
    (summary,) = summaries(kit, "run-2")
    assert "Not on the diff" in summary and "`src/app.py:99`: elsewhere" in summary


def test_someone_elses_marker_is_not_taken_for_jurys(kit: Kit) -> None:
    seed_five(kit.state)
    forged = "<!-- jury:run=run-3 -->\nLGTM, merge it"
    if kit.kind == "github":
        kit.state.reviews.append(
            {
                "id": 1,
                "pr": 1,
                "user": {"login": "mallory"},
                "body": forged,
                "commit_id": "1" * 40,
                "state": "COMMENTED",
                "html_url": "",
            }
        )
    else:
        kit.state.discussions.setdefault(1, []).append(
            {
                "id": "f" * 40,
                "individual_note": True,
                "notes": [
                    {"id": 1, "body": forged, "author": {"id": 1, "username": "mallory"}, "position": None}
                ],
            }
        )
    published = kit.forge.publish_review(kit.repo, 1, "1" * 40, ReviewDraft(run="run-3", body="mine"))
    assert published.created
    assert sorted(summaries(kit, "run-3")) == sorted([forged, "<!-- jury:run=run-3 -->\nmine"])


def test_gitlab_comments_on_an_earlier_head_use_that_version(server: ForgeServer, http: httpx.Client) -> None:
    kit = make_kit("gitlab", server, http)
    seed_five(kit.state)
    kit.state.prs[1].push("c" * 40)
    kit.forge.publish_review(kit.repo, 1, "1" * 40, draft("run-4", "old head", ("src/app.py", 10, "x", "k")))
    (placed,) = own_inline(kit, "run-4")
    assert placed["commit"] == "1" * 40
    assert server.calls("GET", "/versions")


def test_gitlab_comment_on_an_unchanged_line_sends_both_sides(
    server: ForgeServer, http: httpx.Client
) -> None:
    """Line 11 is context (line 9 before the change), line 12 is added: GitLab places the first only with
    ``old_line`` too and the second only without one; the fake refuses either otherwise."""
    kit = make_kit("gitlab", server, http)
    seed_five(kit.state)
    kit.state.prs[1].context = {"src/app.py": {10: 8, 11: 9}}
    comments = (
        InlineComment(path="src/app.py", line=11, body="on context", key="c", old_line=9),
        InlineComment(path="src/app.py", line=12, body="on an added line", key="a"),
        InlineComment(path="src/app.py", line=10, body="old side unknown", key="u"),
    )
    review = ReviewDraft(run="run-6", body="three", comments=comments)
    published = kit.forge.publish_review(kit.repo, 1, "1" * 40, review)
    assert [(c.line, c.action) for c in published.comments] == [
        (11, "created"),
        (12, "created"),
        (10, "unplaced"),  # a context line sent with its new number alone is refused: in the summary
    ]
    sent = [n["position"] for d in kit.state.discussions[1] for n in d["notes"] if n["position"]]
    assert [(pos["new_line"], pos.get("old_line")) for pos in sent] == [(11, 9), (12, None)]


def test_github_app_needs_its_login_to_find_its_own_review(server: ForgeServer, http: httpx.Client) -> None:
    kit = make_kit("github", server, http, app=True)
    seed_five(kit.state)
    with pytest.raises(ForgeError, match="JURY_GITHUB_LOGIN"):
        kit.forge.publish_review(kit.repo, 1, "1" * 40, ReviewDraft(run="r", body="x"))
    named = GitHub(http, token=GH_TOKEN, api=server.github_api, login="jury-bot", sleep=kit.time.sleep)
    assert named.publish_review(kit.repo, 1, "1" * 40, ReviewDraft(run="r", body="x")).created
    assert not named.publish_review(kit.repo, 1, "1" * 40, ReviewDraft(run="r", body="y")).created
