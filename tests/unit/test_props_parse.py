"""Reviewer reports, judge verdicts and replies under property-based tests (orchestrator/parse.py).

On any text the parsers answer with their documented shapes and raise nothing; what Jury's own prompts
ask agents to write reads back as written, whatever decoration surrounds it; a code fence hides whatever
it holds, fences inside fences included; the stop token counts only on a line of its own.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from orchestrator.parse import (
    BODY_LIMIT,
    CONTEST_LIMIT,
    STOP_TOKEN,
    JudgeVerdict,
    acceptance_refusal,
    parse_loc,
    parse_reply,
    parse_review,
    parse_verdict,
    same_finding,
    summarize,
)
from tests.unit.hostile import VERDICT_OBJECT, deep_json_parts, hostile_text, nest

REVIEW_WORDS = ["FINDING:", "FINDING 2:", "Finding #3:", "WHERE:", "Where:", STOP_TOKEN, "NO CONTEST"]
ANY_REPORT = hostile_text(REVIEW_WORDS)
ANY_REPLY = hostile_text(["CONTEST f-1:", "CONTEST:", "Contest F-2:", "NO CONTEST", "CONTEST f-1"])
ANY_ANSWER = hostile_text(
    ["{", '{"verdict": ', '"verdict": "accepted"', "}", '{"reason": '],
    extra=[st.builds(lambda v: json.dumps({"verdict": v}), st.text(max_size=10))],
)

# Plain words: what a claim, an id or a body line is made of when the test needs it to read back exactly.
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def word(first: str, rest: str, longest: int) -> st.SearchStrategy[str]:
    return st.builds(str.__add__, st.sampled_from(first), st.text(alphabet=rest, max_size=longest - 1))


WORD = word(ALNUM, ALNUM + "(),.'=<>/-é", 12)
PHRASE = st.lists(WORD, min_size=1, max_size=8).map(" ".join)
PATH = st.builds(
    lambda parts, ext: "/".join(parts) + ext,
    st.lists(word("abcxyz", "abcxyz019_", 8), min_size=1, max_size=4),
    st.sampled_from([".py", ".js", ".go", ".rs"]),
)
LINE = st.integers(min_value=1, max_value=10**9)
FENCE_LINE = re.compile(r"^\s*(?:>\s*)*(`{3,}|~{3,})")


def no_break(text: str) -> bool:
    return len(text.splitlines()) <= 1


# --- reviewer reports ------------------------------------------------------------------------------


@given(text=ANY_REPORT)
@example(text="FINDING: a\nWHERE: x.py:" + "1" * 5_000)  # a 5,000-digit line: int() raised ValueError
@example(text="```\nFINDING: hidden\nWHERE: a.py:1\n```\n" + STOP_TOKEN)
def test_any_report_reads_as_findings_or_a_verdict(text: str) -> None:
    review = parse_review(text)
    assert review.verdict in ("found", "clean", "unparseable")
    assert (review.verdict == "found") == bool(review.findings)
    for f in review.findings:
        assert f.claim.strip() and f.loc.strip()
        assert no_break(f.claim) and no_break(f.loc)
        assert len(f.body) <= BODY_LIMIT
        path, line = parse_loc(f.loc)
        assert line is None or line >= 0
        assert same_finding(f.claim, f.loc, f.claim, f.loc) in (True, False)
    assert len(summarize(text)) <= 200


FINDING_DECOR = st.sampled_from(
    [("", ""), ("**", "**"), ("- ", ""), ("- **", "**"), ("1. ", ""), ("### ", ""), ("> ", ""), ("`", "`")]
)
WHERE_DECOR = st.sampled_from(["{}", "`{}`", "./{}", "**{}**", "`./{}`."])


@st.composite
def reports(draw: st.DrawFn) -> tuple[str, list[tuple[str, str, str]]]:
    """A report of findings as the reviewer prompt asks for them, decorated; with what it must read as."""
    findings = draw(st.lists(st.tuples(PHRASE, PATH, LINE, st.lists(PHRASE, max_size=3)), max_size=5))
    blocks, expected = [], []
    for n, (claim, path, line, body) in enumerate(findings, start=1):
        lead, close = draw(FINDING_DECOR)
        numbered = draw(st.sampled_from(["FINDING", f"FINDING {n}", f"Finding #{n}", "finding"]))
        where = draw(WHERE_DECOR).format(f"{path}:{line}")
        blank = draw(st.sampled_from(["", "\n"]))  # WHERE may follow its FINDING by one line
        blocks.append(f"{lead}{numbered}:{close} {claim}\n{blank}WHERE: {where}\n" + "\n".join(body))
        expected.append((claim, f"{path}:{line}", "\n".join(body).strip()))
    stop = draw(st.booleans())
    text = draw(st.sampled_from(["", "Here is my review.\n\n"])) + "\n\n".join(blocks)
    return text + ("\n\n" + STOP_TOKEN if stop else ""), expected


@given(report=reports())
def test_a_report_in_the_asked_format_reads_back(report: tuple[str, list[tuple[str, str, str]]]) -> None:
    text, expected = report
    review = parse_review(text)
    assert [(f.claim, f.loc, f.body) for f in review.findings] == expected
    assert review.verdict == ("found" if expected else ("clean" if STOP_TOKEN in text else "unparseable"))


FENCE_INNER = hostile_text(REVIEW_WORDS + ["```", "~~~", "```python"], max_lines=12)


@st.composite
def fenced_blocks(draw: st.DrawFn) -> list[str]:
    """A closed code fence around hostile lines, which may hold shorter fences of their own."""
    char = draw(st.sampled_from(["`", "~"]))
    width = draw(st.integers(min_value=4, max_value=6))
    info = draw(st.sampled_from(["", "text", "python"]))
    inner = draw(FENCE_INNER).splitlines()

    def closes(line: str) -> bool:
        m = FENCE_LINE.match(line)
        return bool(m and m[1][0] == char and len(m[1]) >= width)

    indent = draw(st.sampled_from(["", "  ", "> "]))
    return [indent + char * width + info, *(ln for ln in inner if not closes(ln)), char * width]


@given(before=ANY_REPORT, block=fenced_blocks(), after=ANY_REPORT)
@example(before="FINDING: x", block=["````", "```", "WHERE: a.py:1", "```", "````"], after="WHERE: b.py:2")
def test_a_code_fence_hides_what_it_holds(before: str, block: list[str], after: str) -> None:
    """Whatever is inside a fence (fences too) reads as plain lines: same findings, same stop token."""
    # The text before the fence must not leave a fence of its own open.
    head = [ln for ln in before.splitlines() if not FENCE_LINE.match(ln)]
    tail = after.splitlines()
    fenced = parse_review("\n".join([*head, *block, *tail]))
    plain = parse_review("\n".join([*head, *(["plain"] * len(block)), *tail]))
    assert [(f.claim, f.loc) for f in fenced.findings] == [(f.claim, f.loc) for f in plain.findings]
    assert fenced.verdict == plain.verdict


@given(
    left=PHRASE,
    right=PHRASE,
    lead=st.sampled_from(["", "- ", "**", "> ", "## ", "`"]),
    close=st.sampled_from(["", "**", ".", "!", "`"]),
)
def test_the_stop_token_counts_only_on_a_line_of_its_own(
    left: str, right: str, lead: str, close: str
) -> None:
    assert parse_review(f"{lead}{STOP_TOKEN}{close}").verdict == "clean"
    assert parse_review(f"{left} {STOP_TOKEN} {right}").verdict == "unparseable"
    assert parse_review(f"{left}\n```\n{STOP_TOKEN}\n```\n{right}").verdict == "unparseable"
    found = parse_review(f"FINDING: {left}\nWHERE: a.py:3\n{lead}{STOP_TOKEN}{close}")
    assert found.verdict == "found"
    assert found.findings[0].body == ""  # the stop token ends the finding's explanation


# --- judge verdicts ---------------------------------------------------------------------------------

NULLS = {"null", "none", "n/a", ""}


def normal(value: str) -> str | None:
    text = value.strip()
    return None if text.lower() in NULLS else text


@given(text=ANY_ANSWER)
@example(text="[" * 100_000 + '\n{"verdict": "rejected", "reason": "deep"}')
def test_any_answer_reads_as_a_verdict_or_none(text: str) -> None:
    v = parse_verdict(text)
    if v is not None:
        assert v.verdict in ("accepted", "rejected", "deferred")
        for field in (v.reason, v.test, v.test_command, v.evidence):
            assert field is None or (field == field.strip() and field.lower() not in NULLS)
        refusal = acceptance_refusal(v)
        assert refusal is None or v.verdict == "accepted"


@st.composite
def verdicts(draw: st.DrawFn) -> tuple[dict[str, Any], JudgeVerdict]:
    verdict = draw(st.sampled_from(["accepted", "rejected", "deferred"]))
    spelled = draw(st.sampled_from([verdict, verdict.upper(), f" {verdict.title()} "]))
    reproduced = draw(st.booleans())
    reason, test, command = draw(st.text()), draw(st.text()), draw(st.text())
    doc = {"verdict": spelled, "reproduced": reproduced, "reason": reason, "test": test}
    doc[draw(st.sampled_from(["test_command", "testCommand"]))] = command
    expected = JudgeVerdict(
        verdict=verdict,
        reproduced=reproduced,
        reason=normal(reason),
        test=normal(test),
        test_command=normal(command),
    )
    return doc, expected


# Before the answer, no JSON nested hundreds deep and left open: each of its starts fails only at the
# end of the text, and past jsonsafe's work budget (twice the text's length plus a floor) the rest of the
# text is not searched, so a verdict after 500 such levels is not found (documented in jsonsafe).
PLAIN_ANSWER = hostile_text(["{", '{"verdict": ', '"verdict": "accepted"', "}", '{"reason": '], big=False)


@given(
    verdict=verdicts(),
    before=PLAIN_ANSWER,
    after=st.text().map(lambda t: t.replace("{", "")),
    fence=st.sampled_from(["{}", "```json\n{}\n```", "> {}", "Verdict: {} Done."]),
)
def test_a_verdict_in_the_asked_format_reads_back(
    verdict: tuple[dict[str, Any], JudgeVerdict], before: str, after: str, fence: str
) -> None:
    """The last JSON object with a ``verdict`` wins, wherever it stands and whatever its strings hold."""
    doc, expected = verdict
    compact = json.dumps(doc, ensure_ascii=False)
    text = before + "\n" + fence.replace("{}", compact) + "\n" + after
    assert parse_verdict(text) == expected
    assert parse_verdict(json.dumps(doc, indent=2)) == expected


@given(
    verdict=st.sampled_from(["accepted", "rejected", "deferred"]),
    reproduced=st.none() | st.booleans(),
    test=st.none() | st.text(max_size=5),
    command=st.none() | st.text(max_size=5),
)
def test_an_acceptance_needs_a_reproduction_a_test_and_a_command(
    verdict: str, reproduced: bool | None, test: str | None, command: str | None
) -> None:
    v = JudgeVerdict.model_validate(
        {"verdict": verdict, "reproduced": reproduced, "test": test, "test_command": command}
    )
    refusal = acceptance_refusal(v)
    proven = reproduced is True and bool(test) and bool(command)
    assert (refusal is None) == (verdict != "accepted" or proven)
    if refusal is not None:
        assert ("reproduction" in refusal) == (reproduced is not True)
        assert ("regression test" in refusal) == (not test)
        assert ("test_command" in refusal) == (not command)


# --- replies ----------------------------------------------------------------------------------------

ID = word(ALNUM, ALNUM + ".-", 11)


@given(text=ANY_REPLY)
@example(text="CONTEST a" + "_" * 30_000 + "x")
def test_any_reply_reads_as_contests(text: str) -> None:
    reply = parse_reply(text)
    ids = [c.id for c in reply.contests]
    assert len(ids) == len(set(ids))
    for c in reply.contests:
        assert re.fullmatch(r"[A-Za-z0-9][\w.\-]*", c.id)
        assert len(c.text) <= CONTEST_LIMIT
    assert reply.clean == (not reply.contests)


@given(
    contests=st.lists(st.tuples(ID, PHRASE, st.lists(PHRASE, max_size=2)), max_size=5),
    lead=st.sampled_from(["", "- ", "**", "1. "]),
    close=st.sampled_from(["", "**"]),
    no_contest=st.booleans(),
)
def test_a_reply_in_the_asked_format_reads_back(
    contests: list[tuple[str, str, list[str]]], lead: str, close: str, no_contest: bool
) -> None:
    lines = []
    expected: dict[str, str] = {}
    for fid, first, more in contests:
        lines += [f"{lead}CONTEST {fid}:{close} {first}", *more]
        reason = "\n".join([first, *more])
        expected[fid] = "\n\n".join(p for p in (expected.get(fid, ""), reason) if p)[:CONTEST_LIMIT]
    if no_contest:
        lines.append("NO CONTEST")
    reply = parse_reply("\n".join(lines))
    assert {c.id: c.text for c in reply.contests} == expected
    assert [c.id for c in reply.contests] == list(expected)


@given(before=ANY_REPLY, inner=ANY_REPLY)
def test_a_contest_inside_a_fence_is_no_contest(before: str, inner: str) -> None:
    head = [ln for ln in before.splitlines() if not FENCE_LINE.match(ln)]
    body = [ln for ln in inner.splitlines() if not FENCE_LINE.match(ln)]
    fenced = parse_reply("\n".join([*head, "~~~~", *body, "~~~~"]))
    plain = parse_reply("\n".join([*head, *(["plain"] * (len(body) + 2))]))
    assert [c.id for c in fenced.contests] == [c.id for c in plain.contests]


@given(parts=deep_json_parts())
@example(parts=("[", "]", 99, True, VERDICT_OBJECT))  # within the limit: found
@example(parts=('{"verdict":', "}", 3, True, "1"))  # a verdict key with no verdict in it: none
def test_deep_nesting_crashes_nothing_and_makes_nothing_up(parts: tuple[str, str, int, bool, str]) -> None:
    """Nesting from a few levels to far past the decoder's limit: no parser crashes; no finding, stop
    token or contest comes of it; the only verdict read is the well-formed verdict object the text really
    holds, and one nested within the limit under other JSON is still found."""
    opener, _, n, _, inner = parts
    text = nest(*parts)
    review = parse_review(text)
    assert review.findings == [] and not review.stop_token
    assert parse_reply(text).contests == []
    verdict = parse_verdict(text)
    holds_one = inner == VERDICT_OBJECT
    assert verdict is None or (holds_one and verdict.verdict == "accepted" and verdict.reproduced is None)
    if holds_one and n < 100 and opener != '{"verdict":':  # an outer "verdict" key would be the last word
        assert verdict is not None
