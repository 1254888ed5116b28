"""Table tests for orchestrator.parse: reviewer reports, judge verdicts, replies, raw CLI output."""

from __future__ import annotations

import json

import pytest

from orchestrator.domain import Contest
from orchestrator.parse import (
    NO_CONTEST,
    STOP_TOKEN,
    JudgeVerdict,
    ParsedFinding,
    ReviewParse,
    acceptance_refusal,
    extract_report,
    find_session,
    parse_loc,
    parse_reply,
    parse_review,
    parse_verdict,
    report_cost,
    same_finding,
    summarize,
)

# --- parse_review -----------------------------------------------------------------------------------

CODEX_REPORT = """\
I read the diff with `git diff abc123...HEAD` and ran the tests.

FINDING: `parse_port` accepts 0 as a valid port
WHERE: src/net/ports.py:41
The check is `>= 0` instead of `> 0`; `parse_port("0")` returns 0.

FINDING: The retry loop never sleeps between attempts
WHERE: src/net/retry.py:88
`time.sleep(delay)` is computed but not called.
"""

CLAUDE_MARKDOWN = """\
## Review

**FINDING:** SQL built with string formatting allows injection
**WHERE:** `./app/db.py:120`

The `name` parameter is interpolated directly.

- FINDING: Missing `await` on `session.close()`
- WHERE: `app/http.py:33-35`
  The coroutine is never awaited.

### FINDING: Config default differs from the docs
### WHERE: config.py:7
"""

FENCED_ONLY = """\
Here is an example of the format I will use:

```
FINDING: example claim
WHERE: src/example.py:1
```

~~~text
FINDING: another quoted claim
WHERE: src/quoted.py:2
~~~

NO NEW FINDINGS
"""

PROMPT_ECHO_THEN_ANSWER = """\
# Jury review — round 1
Report each problem as exactly these two lines:

```
FINDING: <one-line claim>
WHERE: <path>:<line>
```

If you have nothing new to report, answer with only this single line:

```
NO NEW FINDINGS
```

codex
FINDING: Division by zero when the list is empty
WHERE: stats/mean.py:5
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            CODEX_REPORT,
            [
                ("`parse_port` accepts 0 as a valid port", "src/net/ports.py:41"),
                ("The retry loop never sleeps between attempts", "src/net/retry.py:88"),
            ],
            id="plain-two-findings",
        ),
        pytest.param(
            CLAUDE_MARKDOWN,
            [
                ("SQL built with string formatting allows injection", "app/db.py:120"),
                ("Missing `await` on `session.close()`", "app/http.py:33-35"),
                ("Config default differs from the docs", "config.py:7"),
            ],
            id="markdown-decorated",
        ),
        pytest.param(FENCED_ONLY, [], id="fenced-findings-are-quotes"),
        pytest.param(
            PROMPT_ECHO_THEN_ANSWER,
            [("Division by zero when the list is empty", "stats/mean.py:5")],
            id="prompt-echo-then-answer",
        ),
        pytest.param(
            "finding: lower-case keywords work\nwhere: a.py:3\n",
            [("lower-case keywords work", "a.py:3")],
            id="case-insensitive",
        ),
        pytest.param(
            "FINDING: blank line between is fine\n\nWHERE: a.py:9\n",
            [("blank line between is fine", "a.py:9")],
            id="where-two-lines-later",
        ),
        pytest.param(
            "FINDING: too far from its location\n\nsome prose\nWHERE: a.py:9\n",
            [],
            id="where-three-lines-later-ignored",
        ),
        pytest.param(
            "FINDING: no location at all\nJust prose.\n\nFINDING: has one\nWHERE: b.py:2\n",
            [("has one", "b.py:2")],
            id="finding-without-where-ignored",
        ),
        pytest.param(
            "FINDING: first\nFINDING: second\nWHERE: c.py:1\n",
            [("second", "c.py:1")],
            id="where-belongs-to-nearest-finding",
        ),
        pytest.param(
            "1. **FINDING 1:** numbered and bold\n   **WHERE:** `pkg/mod.py:10`\n",
            [("numbered and bold", "pkg/mod.py:10")],
            id="numbered-list",
        ),
        pytest.param("> FINDING: quoted\n> WHERE: q.py:4\n", [("quoted", "q.py:4")], id="blockquote"),
        pytest.param("FINDING:\nWHERE: a.py:1\n", [], id="empty-claim-ignored"),
        pytest.param(
            "**FINDING:** `cfg.load` ignores `$HOME`\n**WHERE:** cfg.py:3\n",
            [("`cfg.load` ignores `$HOME`", "cfg.py:3")],
            id="bold-keyword-then-backticked-claim",
        ),
        pytest.param(
            "**FINDING: the whole line is bold**\nWHERE: src/x.py:5 (in `load`)\n",
            [("the whole line is bold", "src/x.py:5")],
            id="bold-line-and-loc-with-note",
        ),
    ],
)
def test_parse_review_findings(text: str, expected: list[tuple[str, str]]) -> None:
    got = parse_review(text)
    assert [(f.claim, f.loc) for f in got.findings] == expected


@pytest.mark.parametrize(
    ("text", "stop", "verdict"),
    [
        pytest.param("NO NEW FINDINGS", True, "clean", id="bare"),
        pytest.param("I checked everything.\n\n**NO NEW FINDINGS**\n", True, "clean", id="bold"),
        pytest.param("> NO NEW FINDINGS.\n", True, "clean", id="quote-and-period"),
        pytest.param("### No new findings\n", True, "clean", id="heading-lowercase"),
        pytest.param("`NO NEW FINDINGS`", True, "clean", id="backticks"),
        pytest.param("I found NO NEW FINDINGS here", False, "unparseable", id="inside-sentence"),
        pytest.param("NO NEW FINDINGS in the parser, but see below", False, "unparseable", id="prefix"),
        pytest.param("```\nNO NEW FINDINGS\n```\n", False, "unparseable", id="fenced"),
        pytest.param("", False, "unparseable", id="empty"),
        pytest.param("The change looks fine to me.", False, "unparseable", id="prose-only"),
        pytest.param(CODEX_REPORT + "\nNO NEW FINDINGS\n", True, "found", id="findings-win-over-stop"),
        pytest.param(FENCED_ONLY, True, "clean", id="stop-after-fenced-examples"),
        pytest.param(PROMPT_ECHO_THEN_ANSWER, False, "found", id="echoed-stop-is-fenced"),
    ],
)
def test_parse_review_stop_and_verdict(text: str, stop: bool, verdict: str) -> None:
    got = parse_review(text)
    assert got.stop_token is stop
    assert got.verdict == verdict


def test_parse_review_body_runs_to_next_finding() -> None:
    got = parse_review(CODEX_REPORT)
    assert got.findings[0].body == 'The check is `>= 0` instead of `> 0`; `parse_port("0")` returns 0.'
    assert got.findings[1].body == "`time.sleep(delay)` is computed but not called."


def test_parse_review_body_excludes_stop_line_and_is_capped() -> None:
    text = "FINDING: huge\nWHERE: a.py:1\n" + "x" * 5000 + "\n"
    assert len(parse_review(text).findings[0].body) == 4000
    text = "FINDING: short\nWHERE: a.py:1\nwhy it fails\n\nNO NEW FINDINGS\n"
    assert parse_review(text).findings[0].body == "why it fails"


def test_parse_review_body_keeps_fenced_code() -> None:
    text = "FINDING: crash\nWHERE: a.py:1\nRepro:\n```\n$ python a.py\nFINDING: not a finding\n```\n"
    got = parse_review(text)
    assert len(got.findings) == 1
    assert "$ python a.py" in got.findings[0].body


def test_unclosed_fence_swallows_rest() -> None:
    assert parse_review("```\nFINDING: a\nWHERE: b.py:1\n").findings == []


def test_review_parse_verdict_property() -> None:
    f = ParsedFinding(claim="c", loc="a.py:1", body="")
    assert ReviewParse(findings=[f], stop_token=True).verdict == "found"
    assert ReviewParse(findings=[], stop_token=True).verdict == "clean"
    assert ReviewParse(findings=[], stop_token=False).verdict == "unparseable"
    assert STOP_TOKEN == "NO NEW FINDINGS"


# --- locations and duplicates -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("loc", "expected"),
    [
        ("src/a.py:12", ("src/a.py", 12)),
        ("src/a.py:12-14", ("src/a.py", 12)),
        ("a.py", ("a.py", None)),
        ("./src/a.py:3", ("src/a.py", 3)),
        ("`src/a.py:7`", ("src/a.py", 7)),
        ("`./b.py`", ("b.py", None)),
        ("src/a.py:12:5", ("src/a.py", 12)),
        ("src/a.py#L40", ("src/a.py", 40)),
        ("C:/x/a.py:9", ("C:/x/a.py", 9)),
    ],
)
def test_parse_loc(loc: str, expected: tuple[str, int | None]) -> None:
    assert parse_loc(loc) == expected


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        pytest.param(("Off by one", "a.py:10"), ("Totally different words", "a.py:10"), True, id="same-line"),
        pytest.param(
            ("Loop skips the last element of items", "a.py:10"),
            ("The loop skips the last element", "./a.py:12"),
            True,
            id="near-and-similar",
        ),
        pytest.param(
            ("Loop skips the last element of items", "a.py:10"),
            ("Loop skips the last element of items", "a.py:14"),
            False,
            id="too-far",
        ),
        pytest.param(
            ("Loop skips the last element", "a.py:10"),
            ("Unchecked None return from lookup", "a.py:11"),
            False,
            id="near-but-different",
        ),
        pytest.param(("Off by one", "a.py:10"), ("Off by one", "b.py:10"), False, id="other-file"),
        pytest.param(
            ("Missing license header in module", "a.py"),
            ("module missing license header", "a.py"),
            True,
            id="no-lines-similar",
        ),
        pytest.param(
            ("Missing license header", "a.py"),
            ("Logging leaks the password", "a.py"),
            False,
            id="no-lines-different",
        ),
        pytest.param(
            ("Missing license header", "a.py"), ("Missing license header", "a.py:1"), False, id="one-line"
        ),
        pytest.param(("a b", "a.py"), ("c d", "a.py"), False, id="no-long-words"),
    ],
)
def test_same_finding(a: tuple[str, str], b: tuple[str, str], same: bool) -> None:
    assert same_finding(a[0], a[1], b[0], b[1]) is same
    assert same_finding(b[0], b[1], a[0], a[1]) is same


# --- judge verdicts ---------------------------------------------------------------------------------

FULL = {
    "verdict": "accepted",
    "reproduced": True,
    "reason": "the loop skipped the last item",
    "evidence": "pytest showed [1, 2] != [1, 2, 3]",
    "test": "test_mean_includes_last",
    "test_command": "python -m pytest tests/test_mean.py::test_mean_includes_last",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "I reproduced it and fixed it.\n\n" + json.dumps(FULL) + "\n",
            JudgeVerdict(**FULL),
            id="in-prose",
        ),
        pytest.param(
            "Final answer:\n```json\n" + json.dumps(FULL, indent=2) + "\n```\n",
            JudgeVerdict(**FULL),
            id="in-json-fence",
        ),
        pytest.param(
            'First I thought {"verdict": "rejected", "reproduced": false, "reason": "x"}.\n'
            'Tool output: {"exit": 1, "stdout": "AssertionError"}\n'
            'Then: {"verdict": "deferred", "reproduced": "no", "reason": "needs a design call"}\n'
            'Cost: {"tokens": 1200}\n',
            JudgeVerdict(verdict="deferred", reproduced=False, reason="needs a design call"),
            id="last-with-verdict-wins",
        ),
        pytest.param(
            '{"verdict": "Rejected", "reproduced": "False", "reason": "N/A", "test": "null", '
            '"test_command": "None", "evidence": ""}',
            JudgeVerdict(verdict="rejected", reproduced=False),
            id="null-strings-and-case",
        ),
        pytest.param(
            '{"verdict": "accepted", "reproduced": "yes", "reason": "brace } and { and \\" quote",'
            ' "test": "checks {\\"a\\": 1}", "test_command": "pytest -k \'x or y\'"}',
            JudgeVerdict(
                verdict="accepted",
                reproduced=True,
                reason='brace } and { and " quote',
                test='checks {"a": 1}',
                test_command="pytest -k 'x or y'",
            ),
            id="braces-in-strings",
        ),
        pytest.param(
            'Result: {"answer": {"verdict": "rejected", "reason": "not reachable"}, "ok": true}',
            JudgeVerdict(verdict="rejected", reason="not reachable"),
            id="nested-only",
        ),
        pytest.param(
            '{"verdict": "rejected", "meta": {"verdict": "accepted"}}',
            JudgeVerdict(verdict="rejected"),
            id="top-level-preferred-over-nested",
        ),
        pytest.param(
            'Broken { like this, then {"verdict": "deferred"} done }',
            JudgeVerdict(verdict="deferred"),
            id="inside-unbalanced-prose",
        ),
        pytest.param(
            '{"log": "truncated, then {"verdict": "rejected", "evidence": "ran it: ok"}',
            JudgeVerdict(verdict="rejected", evidence="ran it: ok"),
            id="inside-broken-object",
        ),
        pytest.param(
            '{"verdict": "accepted", "reproduced": "maybe", "test_command": ["pytest", "tests/a b.py"]}',
            JudgeVerdict(verdict="accepted", reproduced=None, test_command="pytest 'tests/a b.py'"),
            id="argv-command-and-unknown-bool",
        ),
    ],
)
def test_parse_verdict(text: str, expected: JudgeVerdict) -> None:
    assert parse_verdict(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("I could not decide.", id="prose"),
        pytest.param('{"reason": "no verdict key"}', id="no-verdict-key"),
        pytest.param('{"verdict": "maybe"}', id="unknown-verdict"),
        pytest.param('{"verdict": "accepted|rejected|deferred", "reproduced": true}', id="template-echo"),
        pytest.param('{"verdict": "accepted", "reason": "cut off', id="truncated"),
        pytest.param('{"verdict": "accepted"} then {"verdict": "unsure"}', id="last-is-unknown"),
        pytest.param('{"verdict": null}', id="null-verdict"),
    ],
)
def test_parse_verdict_none(text: str) -> None:
    assert parse_verdict(text) is None


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (JudgeVerdict(**FULL), None),
        (
            JudgeVerdict(**{**FULL, "reproduced": False}),
            "accepted without a reproduction",
        ),
        (
            JudgeVerdict(**{**FULL, "reproduced": None, "test": None}),
            "accepted without a reproduction; accepted without a regression test",
        ),
        (
            JudgeVerdict(verdict="accepted"),
            "accepted without a reproduction; accepted without a regression test; "
            "accepted without a test_command",
        ),
        (JudgeVerdict(**{**FULL, "test_command": None}), "accepted without a test_command"),
        (
            JudgeVerdict(**{**FULL, "test_command": "pytest -q " + "t" * 9000}),
            "a test_command of 9,010 characters (at most 8,192)",
        ),
        (JudgeVerdict(verdict="rejected"), None),
        (JudgeVerdict(verdict="deferred", reproduced=False), None),
    ],
)
def test_acceptance_refusal(verdict: JudgeVerdict, expected: str | None) -> None:
    assert acceptance_refusal(verdict) == expected


@pytest.mark.parametrize(
    ("reproduced", "evidence", "expected", "expected_evidence"),
    [
        pytest.param(
            "median([1, 2, 3, 4]) returned 3", None, True, "median([1, 2, 3, 4]) returned 3", id="obs"
        ),
        pytest.param("  saw 3, wanted 2.5 ", "pytest: 3 != 2.5", True, "pytest: 3 != 2.5", id="both"),
        pytest.param("yes", None, True, None, id="yes"),
        pytest.param("True", None, True, None, id="true-string"),
        pytest.param(True, None, True, None, id="bool"),
        pytest.param("no", None, False, None, id="no"),
        pytest.param("False.", None, False, None, id="false-string"),
        pytest.param("Not reproduced", None, False, None, id="not-reproduced"),
        pytest.param("", None, None, None, id="empty"),
        pytest.param("   ", None, None, None, id="blank"),
        pytest.param("null", None, None, None, id="null-string"),
        pytest.param(None, None, None, None, id="null"),
        pytest.param("maybe", None, None, None, id="maybe"),
        pytest.param(1, None, None, None, id="number"),
    ],
)
def test_reproduced_in_codejurys_string_form(
    reproduced: object, evidence: str | None, expected: bool | None, expected_evidence: str | None
) -> None:
    # codejury's verdict schema gives "reproduced" as the observation itself (issue 9, point 6)
    doc = {**FULL, "reproduced": reproduced, "evidence": evidence}
    v = parse_verdict(json.dumps(doc))
    assert v is not None
    assert v.reproduced is expected
    assert v.evidence == expected_evidence
    assert (acceptance_refusal(v) is None) is (expected is True)


def test_parsed_then_refused_end_to_end() -> None:
    v = parse_verdict('Done.\n{"verdict": "accepted", "reproduced": true, "reason": "r", "test": "n/a"}')
    assert v is not None
    assert acceptance_refusal(v) == "accepted without a regression test; accepted without a test_command"


# --- replies ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(NO_CONTEST, [], id="no-contest"),
        pytest.param("**NO CONTEST**", [], id="no-contest-bold"),
        pytest.param(
            "CONTEST r1-codex-2: the judge ran the wrong test; `pytest -k port` fails on main too\n",
            [("r1-codex-2", "the judge ran the wrong test; `pytest -k port` fails on main too")],
            id="one",
        ),
        pytest.param(
            "- **CONTEST r2-claude-1:** reachable from `cli.main`\n"
            "  see the call at cli.py:40\n"
            "- CONTEST `r2-claude-3`: deferred but it is a crash\n",
            [
                ("r2-claude-1", "reachable from `cli.main`\nsee the call at cli.py:40"),
                ("r2-claude-3", "deferred but it is a crash"),
            ],
            id="markdown-and-continuation",
        ),
        pytest.param(
            "I would answer like this:\n```\nCONTEST r1-codex-2: <evidence>\n```\nNO CONTEST\n",
            [],
            id="fenced-example",
        ),
        pytest.param(
            "contest r3-gemini-10: lowercase keyword\nNO CONTEST for the others\n",
            [("r3-gemini-10", "lowercase keyword\nNO CONTEST for the others")],
            id="lowercase",
        ),
        pytest.param("NO CONTEST: I accept all outcomes.", [], id="no-contest-is-not-contest"),
        pytest.param("I CONTEST nothing here", [], id="mid-sentence"),
    ],
)
def test_parse_reply(text: str, expected: list[tuple[str, str]]) -> None:
    got = parse_reply(text)
    assert [(c.id, c.text) for c in got.contests] == expected
    assert got.clean is (not expected)
    assert all(isinstance(c, Contest) for c in got.contests)


# --- raw CLI output ---------------------------------------------------------------------------------

CLAUDE_JSON = json.dumps(
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "FINDING: x\nWHERE: a.py:1",
        "session_id": "5f2c",
        "total_cost_usd": 0.4213,
    }
)

CLAUDE_VERBOSE = json.dumps(
    [
        {"type": "system", "subtype": "init", "session_id": "5f2c"},
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "thinking"}]},
        },
        {"type": "result", "result": "NO NEW FINDINGS", "total_cost_usd": 0.05},
    ]
)

OPENCODE = "\n".join(
    json.dumps(e)
    for e in [
        {"type": "step_start", "sessionID": "ses_1", "part": {"type": "step-start"}},
        {"type": "text", "sessionID": "ses_1", "part": {"type": "text", "text": "Let me look at the diff."}},
        {"type": "tool_use", "sessionID": "ses_1", "part": {"type": "tool", "tool": "bash"}},
        {"type": "text", "sessionID": "ses_1", "part": {"type": "text", "text": "NO NEW FINDINGS"}},
        {"type": "step_finish", "sessionID": "ses_1", "part": {"type": "step-finish", "reason": "stop"}},
    ]
)

CLAUDE_STREAM = "\n".join(
    json.dumps(e)
    for e in [
        {"type": "system", "subtype": "init"},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm"},
                    {"type": "text", "text": "FINDING: leak"},
                    {"type": "tool_use", "name": "Read", "input": {}},
                ],
            },
        },
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "content": "x"}]}},
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "WHERE: a.py:3"}]},
        },
        {"type": "result", "result": "WHERE: a.py:3"},
    ]
)

KIMI_STREAM = "\n".join(
    json.dumps(e)
    for e in [
        {"role": "user", "content": "review this"},
        {"role": "assistant", "content": "FINDING: x"},
        {"role": "tool", "content": "FINDING: from a tool"},
        {"role": "assistant", "content": [{"type": "text", "text": "WHERE: k.py:2"}]},
    ]
)


@pytest.mark.parametrize(
    ("stdout", "fmt", "expected"),
    [
        pytest.param("  answer\n\n", "whole", "answer", id="whole"),
        pytest.param(
            "user\nprompt text\nNO NEW FINDINGS\ncodex\nthinking\ncodex\nFINDING: real\nWHERE: a.py:1\n",
            "tail",
            "FINDING: real\nWHERE: a.py:1",
            id="tail-after-last-codex",
        ),
        pytest.param("just the answer\n", "tail", "just the answer", id="tail-without-marker"),
        pytest.param(
            "codex said\n  codexx\nok", "tail", "codex said\n  codexx\nok", id="tail-exact-line-only"
        ),
        pytest.param(CLAUDE_JSON, "result-json", "FINDING: x\nWHERE: a.py:1", id="result-json"),
        pytest.param(CLAUDE_VERBOSE, "result-json", "NO NEW FINDINGS", id="result-json-array"),
        pytest.param(
            'log line\n{"result": "first"}\nnoise {\n{"type": "result", "result": "second"}\n',
            "result-json",
            "second",
            id="result-json-last-wins",
        ),
        pytest.param("not json at all", "result-json", "not json at all", id="result-json-fallback"),
        pytest.param(OPENCODE, "opencode-json", "NO NEW FINDINGS", id="opencode-last-text"),
        pytest.param(
            json.dumps({"type": "message", "text": "hello"}) + "\n",
            "opencode-json",
            "hello",
            id="opencode-message",
        ),
        pytest.param(
            json.dumps(
                {"type": "message.part.updated", "properties": {"part": {"type": "text", "text": "hi"}}}
            ),
            "opencode-json",
            "hi",
            id="opencode-bus-event",
        ),
        pytest.param("Error: no provider\n", "opencode-json", "Error: no provider", id="opencode-fallback"),
        pytest.param(CLAUDE_STREAM, "stream-json", "FINDING: leak\nWHERE: a.py:3", id="stream-claude"),
        pytest.param(KIMI_STREAM, "stream-json", "FINDING: x\nWHERE: k.py:2", id="stream-role-content"),
        pytest.param("plain text", "stream-json", "plain text", id="stream-fallback"),
        pytest.param(" x ", "unknown-format", "x", id="unknown-format"),
    ],
)
def test_extract_report(stdout: str, fmt: str, expected: str) -> None:
    assert extract_report(stdout, "stderr noise", fmt) == expected


def test_extract_report_feeds_parse_review() -> None:
    report = extract_report(CLAUDE_STREAM, "", "stream-json")
    assert [(f.claim, f.loc) for f in parse_review(report).findings] == [("leak", "a.py:3")]


@pytest.mark.parametrize(
    ("pattern", "stdout", "stderr", "expected"),
    [
        pytest.param(
            r"session id: ([0-9a-f-]+)",
            "answer",
            "OpenAI Codex v0.171.0\nsession id: 0199a1b2-c3d4-7e5f\n",
            "0199a1b2-c3d4-7e5f",
            id="codex-stderr",
        ),
        pytest.param(r"session id: (\S+)", "session id: old-style\n", "", "old-style", id="codex-stdout"),
        pytest.param(
            r"session id: (\S+)", "session id: out", "session id: a\nsession id: b", "b", id="last-in-stderr"
        ),
        pytest.param(
            r'"sessionID":\s*"([^"]+)"',
            '{"sessionID": "ses_1"}\n{"sessionID": "ses_2"}',
            "",
            "ses_2",
            id="opencode-last",
        ),
        pytest.param(r"session id: (\S+)", "nothing", "nothing", None, id="no-match"),
        pytest.param(r"session id: ([", "session id: x", "", None, id="invalid-regex"),
        pytest.param(None, "session id: x", "", None, id="no-pattern"),
    ],
)
def test_find_session(pattern: str | None, stdout: str, stderr: str, expected: str | None) -> None:
    assert find_session(pattern, stdout, stderr) == expected


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        pytest.param(CLAUDE_JSON, 0.4213, id="claude"),
        pytest.param(CLAUDE_VERBOSE, 0.05, id="array"),
        pytest.param('{"total_cost_usd": 1}\n{"x": 2}\n{"total_cost_usd": 2.5}\n', 2.5, id="last-wins"),
        pytest.param('{"total_cost_usd": "free"}', None, id="not-a-number"),
        pytest.param("plain text", None, id="none"),
    ],
)
def test_report_cost(stdout: str, expected: float | None) -> None:
    assert report_cost(stdout) == expected


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("\n\n  First line  \nsecond", 200, "First line"),
        ("", 200, ""),
        ("abcdefghij", 5, "abcd…"),
        ("abcde", 5, "abcde"),
    ],
)
def test_summarize(text: str, limit: int, expected: str) -> None:
    assert summarize(text, limit) == expected
