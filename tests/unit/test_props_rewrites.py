"""The linear-time patterns read every line as the backtracking ones they replaced did.

The parsers' regexes were rewritten so a huge line costs linear time (test_props_speed.py). The old
patterns are kept here as the reference: on short lines made of the characters that matter to each, the
new pattern matches exactly when the old one did and captures the same text. Lines are short, so the old
patterns' quadratic and cubic costs do not matter here.
"""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from orchestrator import diagnostics, parse
from orchestrator.refute import verdicts

OLD_LEAD = r"^[\s>#*_`+\-]*(?:\d+[.)]\s*)?[\s*_`]*"
OLD_AFTER = r"\s*(?:[*_`]+(?=\s|$))?\s*"
OLD = {
    "finding": re.compile(
        OLD_LEAD + r"FINDING(?:\s*#?\d+)?[\s*_`]*:" + OLD_AFTER + r"(?P<rest>.*)$", re.IGNORECASE
    ),
    "where": re.compile(OLD_LEAD + r"WHERE[\s*_`]*:" + OLD_AFTER + r"(?P<rest>.*)$", re.IGNORECASE),
    "contest": re.compile(
        OLD_LEAD
        + r"CONTEST[\s*_`]*:?[\s*_`]*(?P<id>[A-Za-z0-9][\w.\-]*?)[\s*_`]*:"
        + OLD_AFTER
        + r"(?P<rest>.*)$",
        re.IGNORECASE,
    ),
    "verdict": re.compile(
        OLD_LEAD + r"(?P<kw>NOT[\s_\-]+REFUTED|REFUTED)\b"
        r"[\s*_`]*(?P<sep>[:\-–—])?[\s*_`]*(?P<rest>.*)$",
        re.IGNORECASE,
    ),
    "mypy": re.compile(
        r"^(?P<path>[^\s:][^:]*?)(?::(?P<line>\d+))?(?::(?P<col>\d+))?(?::\d+:\d+)?:\s+"
        r"(?P<sev>error|warning|note):\s+(?P<msg>.*?)(?:\s+\[(?P<code>[a-z0-9_-]+)\])?\s*$"
    ),
    "section": re.compile(
        r"^_{3,}\s+(?:(?:ERROR|FAILURE) (?:at \w+ of |collecting )?)?(?P<name>.+?)\s+_{3,}$"
    ),
}
OLD_PATH_LINE = re.compile(r"^(?P<path>.+?)(?::L?|#L)(?P<line>\d+)(?:\s*[-–:,]\s*L?\d+)*$")
OLD_BOLD = re.compile(r"[\s*_]*\*+[\s*_]*$")
NEW = {
    "finding": parse._FINDING_RE,
    "where": parse._WHERE_RE,
    "contest": parse._CONTEST_RE,
    "verdict": verdicts._VERDICT_RE,
    "mypy": diagnostics._MYPY_RE,
    "section": diagnostics._SECTION_RE,
}


def pieces(*words: str, chars: str) -> st.SearchStrategy[str]:
    """Short lines of the given words and characters, in any order."""
    return st.lists(st.sampled_from(list(words)) | st.sampled_from(list(chars)), max_size=14).map("".join)


DECORATED = pieces(
    "FINDING", "finding", "WHERE", "CONTEST", "REFUTED", "NOT", "f-1", "a_b", "x.y", "1.", "2)", "#3",
    chars=" \t*_`>#+-:.1aZé\u00a0",
)  # fmt: skip
MYPY = pieces("a.py", ":1", ":12", " error", " note", " warning", ": ", "[arg-type]", "[x]", chars=" :ax\t")
SECTION = pieces("___", "_", "ERROR ", "FAILURE ", "at setup of ", "collecting ", "test_x", chars=" _a\t")
LOCS = pieces("a.py", ":L", "#L", ":", "12", "3", " - ", "–", ",", "\n", chars=" :#L1-,a.")


def groups(m: re.Match[str] | None, *names: str) -> tuple[str | None, ...] | None:
    return None if m is None else tuple(m[n] for n in names)


@given(line=DECORATED)
@example(line="CONTEST f_1_: why")
@example(line="CONTEST a__: x")
@example(line="**CONTEST** `f-1`:** because")
@example(line="1.  **FINDING 2:** claim")
def test_keyword_patterns_read_what_the_backtracking_ones_read(line: str) -> None:
    for kind, names in {
        "finding": ("rest",),
        "where": ("rest",),
        "contest": ("id", "rest"),
        "verdict": ("kw", "sep", "rest"),
    }.items():
        assert groups(NEW[kind].match(line), *names) == groups(OLD[kind].match(line), *names), kind


@given(line=MYPY)
@example(line="a.py:1: error:  [x]")
@example(line="a.py:1: error: x  [arg-type]  ")
def test_the_mypy_pattern_reads_what_the_backtracking_one_read(line: str) -> None:
    names = ("path", "line", "col", "sev", "msg", "code")
    assert groups(NEW["mypy"].match(line), *names) == groups(OLD["mypy"].match(line), *names)


@given(line=SECTION)
@example(line="___  ___")
@example(line="___ ERROR at setup of test_x ___")
def test_the_section_pattern_reads_what_the_backtracking_one_read(line: str) -> None:
    old, new = OLD["section"].match(line), NEW["section"].match(line)

    # parse_pytest strips the name and drops one made only of rules and spaces: compare what it keeps.
    def kept(m: re.Match[str] | None) -> str | None:
        if m is None or set(m["name"]) <= {"_", " "}:
            return None
        return m["name"].strip()

    assert kept(new) == kept(old)


@given(loc=LOCS)
@example(loc="a:1\n:2")
@example(loc="a:1x:2")
@example(loc="dir:1/x.py:L3 - 5")
def test_parse_loc_reads_what_the_backtracking_pattern_read(loc: str) -> None:
    text = loc.strip().replace("`", "").strip()
    while text.startswith("./"):
        text = text[2:]
    m = OLD_PATH_LINE.match(text)
    assert parse.parse_loc(loc) == ((m["path"].strip(), int(m["line"])) if m else (text, None))


@given(reason=pieces("**", "*", "_", "__", " ", "\t", "x", "y z", "`", chars="*_ x\u2003"))
def test_closing_bold_goes_as_the_backtracking_pattern_took_it(reason: str) -> None:
    assert verdicts._drop_closing_bold(reason) == OLD_BOLD.sub("", reason)
