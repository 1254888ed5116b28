"""Scripted chat models that behave like real ones through Jury's tool loop (brains for ``ChatServer``).

A brain never follows a fixed list of replies: on every request it reads what it was sent — the prompt
(its first line tells a review round, a triage, a reply and a second opinion apart), the tools it was
offered and the results of the tool calls it already made — and decides its next turn from that. It
works on the demo sample repository (``orchestrator.demo``: ``stats.py`` with a buggy ``median``):

- as a reviewer it reads ``stats.py`` with ``read_file`` and reports the median bug (``FINDING``/
  ``WHERE``, the line taken from the numbered tool output) only while the file it read still has it;
- as the judge it reads the file the claim names, writes a regression test (``write_file``), runs the
  declared check to see the test fail (the reproduction), fixes the code (``edit_file``), runs the check
  again and answers with the JSON verdict carrying what it saw; it rejects what it cannot reproduce;
- as a reply seat it answers ``NO CONTEST``; as a second opinion it runs the declared check and answers
  ``NOT REFUTED``/``REFUTED`` from its exit code.

The models cannot see Jury's config: the declared check they run is given to them (``check``), as a
real model would need to be told (Jury's prompts do not list the declared checks).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.chat_server import Brain, Recorded, Reply, answer, status, tool_call

BUG = "    return ordered[middle]\n"
FIXED = "    if len(ordered) % 2 == 0:\n        return (ordered[middle - 1] + ordered[middle]) / 2\n" + BUG
UNUSED_IMPORT = "\nimport os\n"

TEST_MEDIAN = """import unittest

from stats import median


class MedianTest(unittest.TestCase):
    def test_even_length_is_the_mean_of_the_middle_pair(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)

    def test_odd_length_is_the_middle_value(self):
        self.assertEqual(median([3, 1, 2]), 2)
"""

TEST_IMPORTS = """import ast
import pathlib
import unittest


class ImportsTest(unittest.TestCase):
    def test_every_import_of_stats_is_used(self):
        tree = ast.parse(pathlib.Path("stats.py").read_text())
        imported = {
            alias.asname or alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        self.assertEqual(imported - used, set())
"""


# --- reading a request -------------------------------------------------------------------------------


@dataclass
class ToolTurn:
    """One tool call the model made earlier in the conversation, and what came back."""

    name: str
    args: dict[str, Any]
    result: str

    @property
    def refused(self) -> bool:
        return self.result.startswith("REFUSED:")


@dataclass
class Conversation:
    """What a chat-completions request tells the model."""

    system: str
    prompt: str
    offered: set[str]
    turns: list[ToolTurn] = field(default_factory=list)

    @classmethod
    def of(cls, body: dict[str, Any]) -> Conversation:
        messages = body.get("messages") or []
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        prompt = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        results = {m.get("tool_call_id"): m.get("content") or "" for m in messages if m.get("role") == "tool"}
        turns = []
        for m in messages:
            calls = (m.get("tool_calls") or []) if m.get("role") == "assistant" else []
            for call in calls:
                fn = call.get("function") or {}
                raw = fn.get("arguments") or "{}"
                try:
                    args = json.loads(raw) if isinstance(raw, str) else dict(raw)
                except ValueError:
                    args = {"raw": raw}
                turns.append(ToolTurn(fn.get("name") or "", args, results.get(call.get("id"), "")))
        return cls(system, prompt, offered, turns)

    @property
    def kind(self) -> str:
        first = self.prompt.splitlines()[0] if self.prompt else ""
        for prefix, kind in (
            ("# Jury review", "review"),
            ("# Jury triage", "triage"),
            ("# Jury reply", "reply"),
            ("# Jury second opinion", "refute"),
        ):
            if first.startswith(prefix):
                return kind
        return "unknown"

    def field(self, name: str) -> str:
        """The text after ``NAME:`` on the prompt's line starting with it ('' when absent)."""
        for line in self.prompt.splitlines():
            if line.startswith(f"{name}:"):
                return line[len(name) + 1 :].strip()
        return ""

    def done(self, name: str, **args: Any) -> list[ToolTurn]:
        """The earlier calls of tool ``name`` whose arguments include ``args``."""
        return [t for t in self.turns if t.name == name and all(t.args.get(k) == v for k, v in args.items())]


def unnumber(text: str) -> str:
    """The file text back from ``read_file``'s numbered lines (``N<TAB>line``)."""
    lines = []
    for line in text.splitlines():
        number, tab, rest = line.partition("\t")
        if not tab or not number.isdigit():
            return ""  # not a file listing: an error or a refusal
        lines.append(rest)
    return "\n".join(lines) + "\n" if lines else ""


def line_of(numbered: str, needle: str) -> int | None:
    """The line number ``read_file`` gave the first line equal to ``needle``."""
    for line in numbered.splitlines():
        number, _, rest = line.partition("\t")
        if number.isdigit() and rest == needle:
            return int(number)
    return None


def tail(text: str, lines: int = 6) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _exit_code(run_output: str) -> int | None:
    found = re.search(r"^exit code (-?\d+)$", run_output, re.MULTILINE)
    return int(found.group(1)) if found else None


# --- what the judge knows how to fix -------------------------------------------------------------------


@dataclass(frozen=True)
class Fix:
    """A bug the judge can recognize from a claim, see in the code, test, fix and verify."""

    keywords: tuple[str, ...]  # any of them in the claim
    path: str
    present: Callable[[str], bool]  # the bug is in this file text
    old: str
    new: str
    test_path: str
    test_body: str
    test: str  # what the test checks
    reason: str

    @property
    def test_command(self) -> str:
        module = self.test_path.removesuffix(".py").replace("/", ".")
        return f"python3 -m unittest {module}"


FIXES: tuple[Fix, ...] = (
    Fix(
        keywords=("median",),
        path="stats.py",
        present=lambda text: BUG in text and "ordered[middle - 1]" not in text,
        old=BUG,
        new=FIXED,
        test_path="tests/test_median.py",
        test_body=TEST_MEDIAN,
        test="median of an even-length list is the mean of the two middle values",
        reason="median() returned the upper middle value for even lengths; it now averages the middle pair",
    ),
    Fix(
        keywords=("F401", "imported but unused"),
        path="stats.py",
        present=lambda text: UNUSED_IMPORT in text and "os." not in text,
        old=UNUSED_IMPORT,
        new="",
        test_path="tests/test_imports.py",
        test_body=TEST_IMPORTS,
        test="every name stats.py imports is used",
        reason="stats.py imported os without using it; the import is removed",
    ),
)


# --- the model ----------------------------------------------------------------------------------------


def _usage(body: dict[str, Any], reply_text: str) -> dict[str, int]:
    """Token counts like a real server's: about four characters a token."""
    return {
        "prompt_tokens": len(json.dumps(body.get("messages") or [])) // 4,
        "completion_tokens": max(1, len(reply_text) // 4),
    }


@dataclass
class ScriptedModel:
    """A brain for ``ChatServer.think``: a model that reviews, judges, replies and refutes as above.

    ``check`` is the declared check command it runs; ``mischief`` are tool calls it makes first in every
    review, whatever it was offered (a reviewer that tries to write, or to read outside its worktree);
    ``usage`` fixes the token counts it reports (default: about four characters a token).
    """

    check: str = ""
    mischief: Sequence[tuple[str, dict[str, Any]]] = ()
    usage: dict[str, int] | None = None

    def __call__(self, request: Recorded) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        convo = Conversation.of(body)
        turn = {
            "review": self.review,
            "triage": self.judge,
            "reply": self.reply,
            "refute": self.refute,
        }.get(convo.kind)
        if turn is None:
            raise ValueError(f"cannot tell what the prompt asks: {convo.prompt[:80]!r}")
        step = turn(convo)
        call_id = f"call_{len(convo.turns) + 1}"
        if isinstance(step, str):
            return answer(step, usage=self.usage or _usage(body, step))
        name, args = step
        return tool_call(name, args, call_id=call_id, usage=self.usage or _usage(body, json.dumps(args)))

    # --- roles -------------------------------------------------------------------------------------

    def review(self, convo: Conversation) -> str | tuple[str, dict[str, Any]]:
        if len(convo.turns) < len(self.mischief):
            return self.mischief[len(convo.turns)]
        reads = convo.done("read_file", path="stats.py")
        if not reads:
            return ("read_file", {"path": "stats.py"})
        listing = reads[-1].result
        line = line_of(listing, BUG.rstrip("\n"))
        if line is not None and FIXES[0].present(unnumber(listing)):
            return (
                "FINDING: median() of an even-length list returns the upper middle value\n"
                f"WHERE: stats.py:{line}\n"
                "ordered[len // 2] is the upper of the two middle values: median([1, 2, 3, 4]) gives 3, "
                "not 2.5."
            )
        return "NO NEW FINDINGS"

    def judge(self, convo: Conversation) -> str | tuple[str, dict[str, Any]]:
        claim = convo.field("CLAIM")
        fix = next((f for f in FIXES if any(k in claim for k in f.keywords)), None)
        if fix is None:
            return self.verdict(
                "rejected", False, f"I do not know how to reproduce: {claim}", "no reproduction"
            )
        reads = convo.done("read_file", path=fix.path)
        if not reads:
            return ("read_file", {"path": fix.path})
        if not fix.present(unnumber(reads[0].result)):
            return self.verdict(
                "rejected",
                False,
                "the code does not have the problem",
                f"{fix.path} as read:\n{reads[0].result}",
            )
        if not convo.done("write_file", path=fix.test_path):
            return ("write_file", {"path": fix.test_path, "content": fix.test_body})
        runs = convo.done("run_command", command=self.check)
        if not runs:
            return ("run_command", {"command": self.check})
        before = runs[0].result
        if _exit_code(before) in (0, None) or fix.test_path.split("/")[-1][:-3] not in before:
            return self.verdict(
                "rejected",
                False,
                "the new test passes on the unfixed code",
                f"`{self.check}`:\n{tail(before)}",
            )
        edits = convo.done("edit_file", path=fix.path)
        if not edits:
            return ("edit_file", {"path": fix.path, "old": fix.old, "new": fix.new})
        if len(runs) < 2:
            return ("run_command", {"command": self.check})
        after = runs[1].result
        evidence = (
            f"before the fix `{self.check}` failed:\n{tail(before)}\n"
            f"after the fix: exit code {_exit_code(after)}"
        )
        if _exit_code(after) != 0 or edits[0].result.startswith(("ERROR", "REFUSED")):
            return self.verdict("deferred", True, "the fix did not make the test pass", evidence, fix)
        return self.verdict("accepted", True, fix.reason, evidence, fix)

    def verdict(
        self, verdict: str, reproduced: bool, reason: str, evidence: str, fix: Fix | None = None
    ) -> str:
        data = {
            "verdict": verdict,
            "reproduced": reproduced,
            "reason": reason,
            "evidence": evidence,
            "test": fix.test if fix else None,
            "test_command": fix.test_command if fix else None,
        }
        said = "I reproduced it, fixed it and ran the tests." if reproduced else "I could not reproduce it."
        return f"{said}\n\n{json.dumps(data)}"

    def reply(self, convo: Conversation) -> str:
        return "NO CONTEST"

    def refute(self, convo: Conversation) -> str | tuple[str, dict[str, Any]]:
        runs = convo.done("run_command", command=self.check)
        if not runs:
            return ("run_command", {"command": self.check})
        out = runs[-1].result
        code = _exit_code(out)
        if code == 0:
            return (
                f"I ran `{self.check}` on this tree.\nNOT REFUTED: `{self.check}` passes here (exit code 0)"
            )
        return f"REFUTED: `{self.check}` fails on this tree (exit code {code}): {tail(out, 3)}"


def with_key(secret: str, brain: Brain) -> Brain:
    """``brain`` behind a bearer-key check, like a real endpoint: 401 without the right key."""

    def guarded(request: Recorded) -> Reply:
        sent = next((v for k, v in request.headers.items() if k.lower() == "authorization"), None)
        if sent != f"Bearer {secret}":
            return status(401, body='{"error": "invalid api key"}')
        return brain(request)

    return guarded


def always(reply: Callable[[], Reply]) -> Brain:
    """A brain that answers every request with ``reply()`` (a model that keeps failing)."""
    return lambda _request: reply()
