"""Hostile markup made inert in everything Jury publishes, checked by parsing the output with a CommonMark
parser (markdown-it-py): no raw HTML, no link, image or autolink of a scheme but http, https and mailto
outside code, prose that renders as exactly what was written, code verbatim in spans and fenced blocks
that nothing inside can close. Property-based: arbitrary text and text built of attack fragments."""

from __future__ import annotations

import itertools
from urllib.parse import urlsplit

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from orchestrator.fold import FindingState, RoundSeat, RoundState, RunState
from orchestrator.forge.base import BODY_MAX, InlineComment, ReviewDraft, summary_text, with_marker
from orchestrator.markdown_safe import (
    CUT_NOTE,
    code,
    code_block,
    escape,
    fit,
    flatten,
    longest_backtick_run,
    normalise,
    plain,
    text,
)
from orchestrator.publishing import Plan, plan
from orchestrator.spec import AgentSpec, JuryConfig, Target

ALLOWED_SCHEMES = {"http", "https", "mailto"}
ATTACKS = [
    "<img src=x onerror=alert(1)>",
    "[x](javascript:alert(1))",
    '<a href="javascript:alert(1)">x</a>',
    "<javascript:alert(1)>",
    "<https://ok.example>",
    "![i](data:text/html,x)",
    "[r]: javascript:alert(1)",
    "[r]",
    "<!-- jury:run=x -->",
    "-->",
    "<script>",
    "&lt;b&gt;",
    "&#60;",
    "`",
    "``",
    "```",
    "~~~",
    "\n",
    "\n\n",
    "\r",
    "\r\n",
    "\0",
    "    ",
    "\t",
    "*",
    "_",
    "\\",
    "@octocat",
    "# ",
    "> ",
    "- ",
    "1. ",
    "|",
    "$",
    "www.example.com",
    "javascript:alert(1)",
]
hostile = st.lists(st.one_of(st.sampled_from(ATTACKS), st.text(max_size=12)), max_size=12).map("".join)
untrusted = st.one_of(hostile, st.text())


def parser() -> MarkdownIt:
    """CommonMark with raw HTML on (as the forges allow some), and links of every scheme kept as links: a
    link the parser itself would have dropped still counts against the renderer."""
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md


MD = parser()


def walk(tokens: list[Token]) -> list[Token]:
    found: list[Token] = []
    for t in tokens:
        found.append(t)
        found += walk(t.children or [])
    return found


def problems(markdown: str) -> list[str]:
    """What in ``markdown`` is raw HTML or a link of a scheme outside the allow-list (outside code: code
    tokens have no children and no links)."""
    bad: list[str] = []
    for t in walk(MD.parse(markdown)):
        if t.type in ("html_block", "html_inline"):
            bad.append(f"{t.type}: {t.content!r}")
        if t.type in ("link_open", "image"):
            href = str(t.attrGet("href") or t.attrGet("src") or "")
            if urlsplit(href).scheme.lower() not in ALLOWED_SCHEMES:
                bad.append(f"{t.type} {t.markup or 'link'}: {href!r}")
    return bad


def inline_children(markdown: str) -> list[Token]:
    inline = [t for t in MD.parse(markdown) if t.type == "inline"]
    assert len(inline) <= 1, markdown
    return inline[0].children or [] if inline else []


# --- the four renderings on their own -------------------------------------------------------------


@given(untrusted, st.integers(min_value=1, max_value=400))
def test_prose_renders_as_exactly_what_was_written_and_nothing_else(value: str, limit: int) -> None:
    shown = plain(value, limit)
    for context in ("{}", "- {}", "**Jury** (a, round 1): {}", "- `f1` `a.py:3` {}: fixed", "### {}"):
        markdown = context.format(text(value, limit))
        assert problems(markdown) == [], markdown
    children = inline_children(text(value, limit))
    assert [t.type for t in children] in ([], ["text"]), children
    assert "".join(t.content for t in children) == shown  # nothing was read as syntax, nothing lost


@given(untrusted, st.integers(min_value=1, max_value=400))
def test_code_spans_are_verbatim_whatever_backticks_they_hold(value: str, limit: int) -> None:
    markdown = code(value, limit)
    (span,) = inline_children(f"see {markdown} here")[1:2]
    assert span.type == "code_inline"
    expected = flatten(value)
    expected = expected if len(expected) <= limit else expected[: limit - 1] + "…"
    assert span.content == (expected or " ")
    assert len(span.markup) > longest_backtick_run(span.content)


@given(untrusted, st.integers(min_value=1, max_value=2000))
def test_code_blocks_are_verbatim_with_a_fence_longer_than_any_backtick_run(value: str, limit: int) -> None:
    markdown = f"before\n\n{code_block(value, limit)}\n\nafter"
    assert problems(markdown) == []
    tokens = MD.parse(markdown)
    (fence,) = [t for t in tokens if t.type == "fence"]
    shown = normalise(value)[:limit]
    assert fence.content == (shown if shown.endswith("\n") or not shown else shown + "\n")
    assert fence.info == "" and len(fence.markup) > longest_backtick_run(shown) and len(fence.markup) >= 3
    after = [t for t in tokens if t.type == "inline"][-1]
    assert after.content == "after"  # the block closed where Jury closed it


@given(untrusted, st.integers(min_value=1, max_value=200))
def test_plain_text_is_one_short_line_without_mentions(value: str, limit: int) -> None:
    shown = plain(value, limit)
    assert "\n" not in shown and "\r" not in shown
    assert len(shown.replace("\u200b", "")) <= limit
    assert all(shown[i + 1] == "\u200b" for i, ch in enumerate(shown) if ch == "@")


def test_line_start_markers_and_the_issues_attack_are_escaped() -> None:
    assert escape("# title") == "\\# title" and escape("1. x") == "1\\. x" and escape("- x") == "\\- x"
    assert escape("<img src=x onerror=alert(1)>") == "\\<img src=x onerror=alert(1)\\>"
    assert text("[x](javascript:alert(1))", 100) == "\\[x\\](javascript:alert(1))"


piece = st.one_of(
    untrusted.map(lambda v: text(v, 300)),
    untrusted.map(lambda v: "- " + code(v, 80) + " " + text(v, 80)),
    untrusted.map(lambda v: "\n" + code_block(v, 500) + "\n"),
)


@given(st.lists(piece, max_size=8), st.integers(min_value=60, max_value=3000))
def test_any_document_of_rendered_pieces_and_any_cut_of_it_is_safe(pieces: list[str], limit: int) -> None:
    whole = fit(pieces, limit)
    assert problems(whole) == [], whole
    assert len(whole) <= max(limit, len(CUT_NOTE) + 2)


# --- every body a publish sends --------------------------------------------------------------------


def hostile_run(fields: list[str]) -> RunState:
    """An ended run whose every agent-written field holds ``fields``' text, findings in every status."""
    it = itertools.cycle(fields)
    cfg = JuryConfig(
        reviewers=["a"],
        judge="j",
        agents={"a": AgentSpec(name="a"), "j": AgentSpec(name="j")},
        publish=True,
        config_notes=[next(it)],
    )
    s = RunState(
        slug="s-1",
        target=Target(
            state="human",
            state_note=next(it),
            url="https://github.com/o/r/pull/1",
            head="h" * 40,
            trunk=next(it),
        ),
        config=cfg,
    )
    s.rounds.append(
        RoundState(
            n=1, sha="h" * 40, prompt="", started_at="t", agents={"a": RoundSeat(agent="a", state="found")}
        )
    )
    s.spent = {next(it): 0.5}
    for i, status in enumerate(("open", "deferred", "accepted", "rejected", "open")):
        loc = next(it) if i == 4 else f"src/{next(it)[:20]}.py:{i + 3}"
        f = FindingState(
            id=f"f{i}",
            round=1,
            agent=next(it),
            claim=next(it),
            body=next(it),
            loc=loc,
            status=status,  # type: ignore[arg-type]
            reason=next(it),
            test=next(it),
            test_command=next(it),
        )
        f.refusals = [next(it)]
        f.reopens = ["refuter: " + next(it)]
        f.verification_table = {
            "ok": False,
            "reason": next(it),
            "tests": [{"id": next(it), "fixed": next(it), "reverted": next(it)}],
        }
        s.findings[f.id] = f
    return s


def published_bodies(p: Plan) -> dict[str, str]:
    """What the forge receives, as the forge clients build it: the summary with every comment refused
    (listed in it), each comment under its marker, the check's summary. Jury's own markers are HTML
    comments by design: they are cut off before parsing (they end on their own line)."""
    comments = tuple(InlineComment(path=n.path, line=n.line, body=n.body, key=n.key) for n in p.comments)
    draft = ReviewDraft(run="s-1", body=p.body, comments=comments)
    bodies = {
        "review (all comments unplaced)": summary_text(draft, list(comments)),
        "review": summary_text(draft, []),
        "check summary": p.check_summary,
    }
    bodies |= {f"comment {c.key}": with_marker("s-1", c.body, c.ident) for c in comments}
    return {k: v.split("\n", 1)[1] if v.startswith("<!-- jury:") else v for k, v in bodies.items()}


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(untrusted, min_size=1, max_size=6))
def test_every_published_body_of_a_hostile_run_is_inert(fields: list[str]) -> None:
    for diff in (None, {}):
        p = plan(hostile_run(fields), diff)
        for where, body in published_bodies(p).items():
            assert problems(body) == [], (where, body)
            assert len(body) < BODY_MAX
        for line in (p.title,):
            assert "\n" not in line


def test_the_issues_attack_is_neutralised_and_still_shown() -> None:
    attack = '<img src=x onerror=alert(1)> and [x](javascript:alert(1)) <a href="javascript:alert(2)">y</a>'
    s = hostile_run([attack])
    s.findings["f0"].body = attack + "\n```\nstill `code` <b>\n```\n"
    s.findings["f0"].loc = "src/a.py:3"
    p = plan(s, None)
    bodies = published_bodies(p)
    for where, body in bodies.items():
        assert problems(body) == [], (where, body)
    comment = bodies["comment f0"]
    rendered = MD.render(comment)
    assert "<img" not in rendered and "javascript:alert(1)</a>" not in rendered and "<a " not in rendered
    assert "&lt;img src=x onerror=alert(1)&gt;" in rendered  # shown as text, not dropped
    assert "still `code` &lt;b&gt;" in rendered  # the body's own fence did not close Jury's block


def test_a_path_with_a_backtick_is_no_place_on_the_diff() -> None:
    """The forge client lists a refused comment as ``- `path:line`: body``: a backtick in the path would
    close that span and let what follows it be read as Markdown."""
    from orchestrator.publishing import parse_loc

    assert parse_loc("a`<img src=x onerror=alert(1)>`b.py:3") is None
    assert parse_loc("a\nb.py:3") is None
    assert parse_loc("src/ünïcode name.py:3") == ("src/ünïcode name.py", 3)


@settings(max_examples=30)
@given(st.integers(min_value=0, max_value=300), untrusted)
def test_a_forge_cut_of_a_long_review_stays_inert(shift: int, value: str) -> None:
    """Sixty refused comments full of code spans quoting HTML: the summary that lists them is past what a
    forge takes, and the forge client's cut (at a line break) leaves no span open."""
    line = "x" * shift + " " + code("<b>bold</b> <img src=x onerror=alert(1)> " + value, 200)
    comments = tuple(
        InlineComment(path="a.py", line=i + 1, body=(line + "\n") * 40, key=f"f{i}") for i in range(60)
    )
    body = summary_text(ReviewDraft(run="s-1", body="summary", comments=comments), list(comments))
    assert sum(len(c.body) for c in comments) > BODY_MAX and body.endswith("…")  # the forge client cut it
    assert problems(body.split("\n", 1)[1]) == []
