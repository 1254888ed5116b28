"""The refuter's verdict and the commands of a task text under property-based tests (orchestrator.refute).

A refuter's answer is a model's free text: whatever it says, it reads as refuted, not refuted or
unclear, and refuted only from a ``REFUTED: <evidence>`` last line. A task text is the user's or a PR's:
whatever it holds, the commands read from it are ones ``classify_command`` gives a kind.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from orchestrator.refute import MIN_REFUTATION_REASON, classify_command, commands_in_task, parse_refutation
from tests.unit.hostile import FENCES, hostile_text

VERDICT_WORDS = [
    "REFUTED:",
    "NOT REFUTED:",
    "REFUTED",
    "NOT REFUTED",
    "**REFUTED:**",
    "Refuted claims",
    "<reason>",
]
ANY_ANSWER = hostile_text(VERDICT_WORDS)
REASON = (
    st.text(alphabet="abcdefghij klmnop(),.0123456789", min_size=1, max_size=80).map(str.strip).filter(bool)
)


@given(text=ANY_ANSWER)
@example(text="REFUTED: x" + " " * 30_000 + "y")
@example(text="NOT REFUTED: checked\n```")
def test_any_answer_reads_as_one_of_three_outcomes(text: str) -> None:
    verdict = parse_refutation(text)
    assert verdict.outcome in ("refuted", "not_refuted", "unclear")
    assert verdict.reason.strip()
    if verdict.outcome == "refuted":
        assert len(verdict.reason) >= MIN_REFUTATION_REASON
        assert verdict.reason in text and "refuted" in text.lower()


@given(
    before=ANY_ANSWER,
    reason=REASON,
    lead=st.sampled_from(["", "**", "- ", "> ", "1. ", "`"]),
    close=st.sampled_from(["", "**", "`"]),
    fences=st.lists(st.sampled_from(FENCES[:5]), max_size=2),
    blanks=st.sampled_from(["", "\n", "\n\n  \n"]),
)
def test_a_last_line_verdict_reads_back(
    before: str, reason: str, lead: str, close: str, fences: list[str], blanks: str
) -> None:
    """The last non-empty line decides; trailing fence lines and blank lines are skipped."""
    tail = "\n".join(fences) + blanks
    refuted = parse_refutation(f"{before}\n{lead}REFUTED:{close} {reason}{close}\n{tail}")
    kept = parse_refutation(f"{before}\n{lead}NOT REFUTED:{close} {reason}{close}\n{tail}")
    # ``(...)`` after REFUTED without a colon still reads; a trailing ``**``/backtick is decoration.
    if len(reason) >= MIN_REFUTATION_REASON:
        assert (refuted.outcome, refuted.reason) == ("refuted", reason)
    else:
        assert refuted.outcome == "unclear"
    assert (kept.outcome, kept.reason) == ("not_refuted", reason)


@given(before=ANY_ANSWER, after=st.text(alphabet="abc xyz.", min_size=1).filter(str.strip))
def test_a_verdict_before_the_last_line_is_unclear(before: str, after: str) -> None:
    answer = parse_refutation(f"{before}\nREFUTED: the test passes without the fix applied\n{after}")
    assert answer.outcome == "unclear"


ANY_TASK = hostile_text(["`pytest -q`", "$ ", "```", "`", "npm test", "make check", "cargo test", "\\"])


@given(text=ANY_TASK)
@example(text="```\n" + "x \\\n" * 5_000 + "```")
@example(text="`" * 10_000)
def test_commands_of_any_task_are_signals_each_once(text: str) -> None:
    found = commands_in_task(text)
    assert len(found) == len(set(found))
    for command in found:
        assert command.strip() == command and command
        assert classify_command(command) is not None


@given(
    command=hostile_text(["pytest", "python -m", "npm", "make", "&&", "|", ";", "sudo", "env X=1"], big=False)
)
def test_any_command_classifies_or_not_without_raising(command: str) -> None:
    assert classify_command(command) in (None, "test", "typecheck", "lint", "build")


@given(
    commands=st.lists(
        st.sampled_from(["pytest -q", "python -m pytest tests", "npm test", "go test ./...", "mypy ."]),
        min_size=1,
        max_size=4,
    ),
    prompt=st.sampled_from(["$ ", "% ", "", "> "]),
    fence=st.sampled_from(["```", "~~~", "```bash", "````sh"]),
)
def test_named_commands_read_back_in_order(commands: list[str], prompt: str, fence: str) -> None:
    inline = " and ".join(f"`{c}`" for c in commands)
    assert commands_in_task(f"Run {inline} please.") == list(dict.fromkeys(commands))
    closing = fence.rstrip("abcdefghijklmnopqrstuvwxyz")
    block = "\n".join([fence, *(prompt + c for c in commands), closing])
    assert commands_in_task(block) == list(dict.fromkeys(commands))
