"""The forge's pure parts: the rate-limit policy, the run markers, the review draft's rules."""

from __future__ import annotations

from email.utils import formatdate

import pytest
from pydantic import ValidationError

from orchestrator.forge.base import InlineComment, ReviewDraft, marker, read_marker, summary_text
from orchestrator.forge.limits import retry_delay
from orchestrator.forge.transport import next_link

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("status", "headers", "message", "attempt", "expected"),
    [
        (429, {"retry-after": "7"}, "", 1, 7.0),
        (429, {"retry-after": formatdate(NOW + 7, usegmt=True)}, "", 1, 7.0),  # an HTTP date, 7 s from NOW
        (429, {}, "", 1, 60.0),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 42)}, "", 1, 42.0),
        (429, {"ratelimit-remaining": "0", "ratelimit-reset": str(int(NOW) + 9)}, "", 1, 9.0),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) - 5)}, "", 1, 0.0),
        (403, {}, "You have exceeded a secondary rate limit", 1, 60.0),
        (403, {}, "You have exceeded a secondary rate limit", 3, 240.0),
        (403, {"retry-after": "30"}, "You have exceeded a secondary rate limit", 2, 30.0),
        (403, {"x-ratelimit-remaining": "12", "x-ratelimit-reset": str(int(NOW) + 42)}, "Forbidden", 1, None),
        (403, {}, "Resource not accessible by personal access token", 1, None),
        (404, {"retry-after": "5"}, "", 1, None),
        (422, {}, "", 1, None),
        (503, {}, "", 1, 2.0),
        (503, {}, "", 2, 4.0),
        (502, {"retry-after": "3"}, "", 1, 3.0),
        (429, {"retry-after": "soon"}, "", 1, 60.0),
    ],
)
def test_retry_delay(
    status: int, headers: dict[str, str], message: str, attempt: int, expected: float | None
) -> None:
    assert retry_delay(status, headers, message, NOW, attempt) == expected


def test_next_link() -> None:
    header = '<https://api/x?page=2>; rel="next", <https://api/x?page=5>; rel="last"'
    assert next_link({"link": header}) == "https://api/x?page=2"
    assert next_link({"link": '<https://api/x?page=1>; rel="prev"'}) is None
    assert next_link({}) is None


def test_a_marker_counts_only_at_the_very_start() -> None:
    assert read_marker(marker("run-1") + "\nbody") == ("run-1", None)
    assert read_marker(marker("run-1", "0123456789ab") + "\nx") == ("run-1", "0123456789ab")
    assert read_marker("quoted: " + marker("run-1")) is None
    assert read_marker(" " + marker("run-1")) is None
    assert read_marker("<!-- jury:run=../x -->") is None
    assert read_marker(None) is None


def test_the_summary_starts_with_the_marker_whatever_the_body_says() -> None:
    draft = ReviewDraft(run="r", body=marker("other") + " injected")
    assert read_marker(summary_text(draft, [])) == ("r", None)


def test_a_draft_refuses_bad_slugs_and_twin_keys() -> None:
    with pytest.raises(ValidationError, match="a run slug is letters, digits"):
        ReviewDraft(run="bad slug -->", body="x")
    with pytest.raises(ValidationError, match="two comments share the key of a:1"):
        ReviewDraft(
            run="r",
            body="x",
            comments=(InlineComment(path="a", line=1, body="x"), InlineComment(path="a", line=1, body="y")),
        )
    keyed = InlineComment(path="a", line=1, body="x", key="finding-1")
    moved = InlineComment(path="a", line=9, body="x", key="finding-1")
    assert keyed.ident == moved.ident != InlineComment(path="a", line=1, body="x").ident


def test_a_huge_body_is_cut_to_what_forges_accept() -> None:
    body = summary_text(ReviewDraft(run="r", body="x" * 100_000), [])
    assert len(body) < 65_536 and read_marker(body) == ("r", None)
