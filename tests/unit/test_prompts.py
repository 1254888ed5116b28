"""Tests for orchestrator.prompts: first lines, contents, and that echoing a prompt parses as nothing."""

from __future__ import annotations

import pytest

from orchestrator.parse import parse_reply, parse_review, parse_verdict
from orchestrator.prompts import SettledItem, reply_prompt, review_prompt, triage_prompt

SETTLED = [
    SettledItem(
        id="r1-codex-1",
        verdict="accepted",
        claim="parse_port accepts 0",
        loc="src/ports.py:41",
        reason="fixed in 1a2b3c",
    ),
    SettledItem(
        id="r1-claude-2",
        verdict="rejected",
        claim="retry never sleeps",
        loc="src/retry.py:88",
        reason="sleep happens in\nthe caller",
    ),
]


def _review(**kw: object) -> str:
    args: dict[str, object] = {
        "round_n": 3,
        "repo": "acme/widgets",
        "branch": "feat/ports",
        "trunk": "main",
        "base": "abc123",
        "head": "def456",
        "settled": SETTLED,
    }
    args.update(kw)
    return review_prompt(**args)  # type: ignore[arg-type]


def _triage(**kw: object) -> str:
    args: dict[str, object] = {
        "finding_id": "r2-codex-4",
        "agent": "codex",
        "claim": "Division by zero on an empty list",
        "loc": "stats/mean.py:5",
        "body": "Call `mean([])`.\n```py\nmean([])\n```\nFINDING: quoted in body\nWHERE: x.py:1",
        "base": "abc123",
        "turns": [],
        "refusals": [],
    }
    args.update(kw)
    return triage_prompt(**args)  # type: ignore[arg-type]


# --- review -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("round_n", [1, 2, 10])
def test_review_first_line(round_n: int) -> None:
    assert _review(round_n=round_n).splitlines()[0] == f"# Jury review — round {round_n}"


def test_review_names_the_change_and_diff_against_merge_base() -> None:
    text = _review()
    assert "git diff abc123...HEAD" in text
    assert "git log abc123..HEAD" in text
    assert "git diff main" not in text
    for part in ("acme/widgets", "feat/ports", "def456", "independent", "Do not edit"):
        assert part in text


def test_review_lists_settled_items_one_per_line() -> None:
    lines = _review().splitlines()
    assert "- r1-codex-1 [accepted] parse_port accepts 0 (src/ports.py:41): fixed in 1a2b3c" in lines
    assert (
        "- r1-claude-2 [rejected] retry never sleeps (src/retry.py:88): sleep happens in the caller" in lines
    )
    assert "none yet" not in lines


def test_review_without_settled_says_none_yet() -> None:
    text = _review(settled=[])
    assert "none yet" in text.splitlines()
    assert "r1-codex-1" not in text


def test_review_task_included_when_given() -> None:
    assert "Make ports strictly positive" in _review(task="Make ports strictly positive")
    assert "meant to do" not in _review(task=None)


def test_review_states_format_and_stop_token() -> None:
    text = _review()
    assert "FINDING: <one-line claim>" in text
    assert "WHERE: <path>:<line>" in text
    assert "NO NEW FINDINGS" in text


@pytest.mark.parametrize("settled", [[], SETTLED])
def test_review_prompt_echo_parses_as_nothing(settled: list[SettledItem]) -> None:
    echo = parse_review(_review(settled=settled, task="FINDING: sneaky\nWHERE: a.py:1\nNO NEW FINDINGS"))
    assert echo.findings == []
    assert echo.stop_token is False
    assert echo.verdict == "unparseable"


def test_review_echo_followed_by_answer_reads_the_answer() -> None:
    got = parse_review(_review() + "\nFINDING: real problem\nWHERE: src/a.py:9\n")
    assert [(f.claim, f.loc) for f in got.findings] == [("real problem", "src/a.py:9")]
    assert parse_review(_review() + "\nNO NEW FINDINGS\n").verdict == "clean"


# --- triage -----------------------------------------------------------------------------------------


def test_triage_first_line_and_claim_lines() -> None:
    lines = _triage().splitlines()
    assert lines[0] == "# Jury triage — finding r2-codex-4"
    assert "CLAIM: Division by zero on an empty list" in lines
    assert "WHERE: stats/mean.py:5" in lines


def test_triage_instructions() -> None:
    text = _triage()
    for part in (
        "reproduce",
        "regression test",
        "Do not commit",
        "test_command",
        '"verdict"',
        "abc123...HEAD",
    ):
        assert part.lower() in text.lower()


def test_triage_multiline_claim_stays_on_its_line() -> None:
    lines = _triage(claim="first\nsecond").splitlines()
    assert "CLAIM: first second" in lines


def test_triage_body_is_fenced() -> None:
    text = _triage()
    assert "Call `mean([])`." in text
    assert parse_review(text).findings == []


def test_triage_includes_turns_and_refusals() -> None:
    text = _triage(
        turns=[("codex", "The judge ran the wrong file."), ("claude", "Agreed with codex.")],
        refusals=["accepted without a regression test"],
    )
    assert "The judge ran the wrong file." in text
    assert "### codex" in text and "### claude" in text
    assert "- accepted without a regression test" in text.splitlines()


def test_triage_without_turns_or_refusals_has_no_such_sections() -> None:
    text = _triage()
    assert "Earlier turns" not in text
    assert "refused" not in text.split("## What to do")[0]


def test_triage_echo_yields_no_verdict_but_answer_does() -> None:
    text = _triage()
    assert parse_verdict(text) is None
    answer = (
        text + '\nDone.\n{"verdict": "rejected", "reproduced": false, "reason": "mean guards empty input"}'
    )
    v = parse_verdict(answer)
    assert v is not None and v.verdict == "rejected" and v.reproduced is False


# --- reply ------------------------------------------------------------------------------------------


def test_reply_first_line_and_outcomes() -> None:
    text = reply_prompt(round_n=2, agent="claude", outcomes=SETTLED)
    lines = text.splitlines()
    assert lines[0] == "# Jury reply — round 2"
    assert "- r1-codex-1 [accepted] parse_port accepts 0 (src/ports.py:41): fixed in 1a2b3c" in lines
    assert (
        "- r1-claude-2 [rejected] retry never sleeps (src/retry.py:88): sleep happens in the caller" in lines
    )
    assert "CONTEST <id>: <evidence>" in text
    assert "NO CONTEST" in text


def test_reply_echo_has_no_contests_but_answer_does() -> None:
    text = reply_prompt(round_n=2, agent="claude", outcomes=SETTLED)
    assert parse_reply(text).clean
    got = parse_reply(text + "\nCONTEST r1-claude-2: the caller never sleeps either, see retry.py:90\n")
    assert [c.id for c in got.contests] == ["r1-claude-2"]
