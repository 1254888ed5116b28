#!/usr/bin/env python3
"""A fake agent CLI for the tests: ``agent.py MODE PROMPT_FILE``, run in the worktree it reviews.

It works on the demo sample repository (``stats.py`` with a buggy ``median``). It reads the prompt's
first line to tell a review round, a triage and a reply apart, and answers as MODE says:

  find       review: reports the median bug while it is in the tree
  clean      review: nothing found
  garbage    any prompt: an answer with no finding, no stop token, no JSON
  hang-once  review: the first time (per $FAKE_STATE dir), ignores SIGTERM, starts a grandchild and
             sleeps, both with a marker on their command line (in $FAKE_STATE/marker); later: nothing found
  contest    review as ``find``; in a reply, contests every rejected or deferred finding
  fix        triage: reproduces, fixes, adds a regression test, accepts
  noproof    triage: changes the code and says accepted, without reproduction, test or test_command
  reject     triage: rejects with evidence
  broken-codex   review: codex ``--json`` events whose every command failed, then NO NEW FINDINGS;
                 triage: the same failures, then a rejection
  broken-stream  review: claude stream-json whose every tool call failed, then NO NEW FINDINGS
  ok-codex       review: codex ``--json`` events with one failed and one good command, NO NEW FINDINGS
  metered-MODE   any prompt: what MODE answers, as the one message of codex ``--json`` events whose
                 ``turn.completed`` reports USAGE tokens and no dollars (so its cost is tokens x price)
  loud           review: LOUD_BYTES of chatter on stdout, then NO NEW FINDINGS
  scribble       review: tries to change stats.py and to add notes.txt in its worktree, says what
                 happened to each write, then NO NEW FINDINGS
"""

import contextlib
import io
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

mode, prompt_file = sys.argv[1], sys.argv[2]
prompt = pathlib.Path(prompt_file).read_text()
kind = prompt.splitlines()[0] if prompt else ""
state = pathlib.Path(os.environ.get("FAKE_STATE", "."))
BUG = "    return ordered[middle]\n"
FIXED = "    if len(ordered) % 2 == 0:\n        return (ordered[middle - 1] + ordered[middle]) / 2\n" + BUG


USAGE = {"input_tokens": 200_000, "cached_input_tokens": 100_000, "output_tokens": 10_000}
LOUD_BYTES = 200_000
if mode.startswith("metered-"):
    metered, mode = True, mode.removeprefix("metered-")
else:
    metered = False


def buggy() -> bool:
    source = pathlib.Path("stats.py").read_text()
    return BUG in source and "ordered[middle - 1]" not in source


SANDBOX_ERROR = "bwrap: execvp codex-linux-sandbox: No such file or directory"


def codex_events(codes: list[int], answer: str = "NO NEW FINDINGS") -> None:
    """What codex exec --json prints: one command_execution item per exit code, then the answer."""
    events: list[dict] = [{"type": "thread.started", "thread_id": "0199aaaa-fake-4000-8000-000000000001"}]
    for i, code in enumerate(codes, start=1):
        item = {"id": f"item_{i}", "type": "command_execution", "command": "/bin/bash -lc 'cat stats.py'"}
        events.append({"type": "item.started", "item": {**item, "exit_code": None, "status": "in_progress"}})
        out = SANDBOX_ERROR + "\n" if code else pathlib.Path("stats.py").read_text()
        done = {
            **item,
            "aggregated_output": out,
            "exit_code": code,
            "status": "failed" if code else "completed",
        }
        events.append({"type": "item.completed", "item": done})
    said = {"id": "item_9", "type": "agent_message", "text": answer}
    events += [{"type": "item.completed", "item": said}, {"type": "turn.completed", "usage": {}}]
    for event in events:
        print(json.dumps(event))


def stream_events() -> None:
    """What claude -p --output-format stream-json prints when every tool call fails."""
    for i, name in enumerate(["Bash", "Read"], start=1):
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {"command": "cat stats.py"}}
        print(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [use]}}))
        result = {
            "type": "tool_result",
            "tool_use_id": f"toolu_{i}",
            "content": SANDBOX_ERROR,
            "is_error": True,
        }
        print(json.dumps({"type": "user", "message": {"role": "user", "content": [result]}}))
    text = {"type": "text", "text": "NO NEW FINDINGS"}
    print(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [text]}}))
    print(json.dumps({"type": "result", "subtype": "success", "result": "NO NEW FINDINGS"}))


def review() -> None:
    if mode == "broken-codex":
        codex_events([1, 1])
    elif mode == "ok-codex":
        codex_events([1, 0])
    elif mode == "broken-stream":
        stream_events()
    elif mode == "garbage":
        print("Hmm, hard to say anything about this one.")
    elif mode in ("find", "contest") and buggy():
        line = pathlib.Path("stats.py").read_text().splitlines().index(BUG.rstrip("\n")) + 1
        print("FINDING: median() of an even-length list returns the upper middle value")
        print(f"WHERE: stats.py:{line}")
        print("median([1, 2, 3, 4]) gives 3 instead of 2.5")
    elif mode == "loud":
        line = "chatter " * 15 + "\n"
        sys.stdout.write(line * (LOUD_BYTES // len(line)))
        print("NO NEW FINDINGS")
    elif mode == "scribble":
        for path, text in (("stats.py", "broken = True\n"), ("notes.txt", "a reviewer's note\n")):
            try:
                pathlib.Path(path).write_text(text)
                print(f"wrote {path}")
            except OSError as exc:
                print(f"could not write {path}: {exc.strerror}")
        print("NO NEW FINDINGS")
    elif mode == "hang-once" and not (state / "hung").exists():
        (state / "hung").write_text("1")
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # still ignored after the exec below
        # Pids inside the sandbox's pid namespace mean nothing on the host: both processes carry a
        # marker on their command line instead, for the test to look for.
        marker = f"jury-hang-once-{os.getpid()}-{time.time_ns()}"
        sleep = [sys.executable, "-c", "import time; time.sleep(300)", marker]
        subprocess.Popen(sleep)
        (state / "marker").write_text(marker)
        os.execv(sys.executable, sleep)
    else:
        print("NO NEW FINDINGS")


def triage() -> None:
    if mode == "broken-codex":
        verdict = {"verdict": "rejected", "reproduced": False, "reason": "median looks right to me"}
        codex_events([1, 1], "I could not reproduce it.\n" + json.dumps(verdict))
        return
    if mode == "garbage":
        print("I looked at it. Probably fine? Not sure.")
        return
    if mode == "reject":
        print(
            json.dumps(
                {
                    "verdict": "rejected",
                    "reproduced": False,
                    "reason": "not a bug in my reading",
                    "evidence": "median of [1, 2, 3] is 2",
                    "test": None,
                    "test_command": None,
                }
            )
        )
        return
    src = pathlib.Path("stats.py")
    src.write_text(src.read_text().replace(BUG, FIXED))
    if mode == "noproof":
        print(
            json.dumps(
                {
                    "verdict": "accepted",
                    "reproduced": False,
                    "reason": "looks wrong, fixed it",
                    "test": "n/a",
                    "test_command": None,
                }
            )
        )
        return
    pathlib.Path("tests/test_median.py").write_text(
        "import unittest\n\nfrom stats import median\n\n\nclass MedianTest(unittest.TestCase):\n"
        "    def test_even(self):\n        self.assertEqual(median([4, 1, 3, 2]), 2.5)\n"
    )
    print("Reproduced: median([1, 2, 3, 4]) == 3")
    print(
        json.dumps(
            {
                "verdict": "accepted",
                "reproduced": True,
                "reason": "even lengths now average the middle",
                "evidence": "median([1, 2, 3, 4]) == 3 before the fix",
                "test": "median of an even list",
                "test_command": "python3 -m unittest tests.test_median",
            }
        )
    )


def reply() -> None:
    if mode == "contest":
        for fid in re.findall(r"^- (\S+) \[(?:rejected|deferred)\]", prompt, re.M):
            print(f"CONTEST {fid}: it still reproduces: median([1, 2, 3, 4]) == 3")
        return
    print("NO CONTEST")


def answer() -> None:
    if kind.startswith("# Jury triage"):
        triage()
    elif kind.startswith("# Jury reply"):
        reply()
    else:
        review()


if metered:
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        answer()
    message = {"id": "item_1", "type": "agent_message", "text": said.getvalue()}
    for event in (
        {"type": "thread.started", "thread_id": "0199aaaa-fake-4000-8000-000000000002"},
        {"type": "item.completed", "item": message},
        {"type": "turn.completed", "usage": USAGE},
    ):
        print(json.dumps(event))
else:
    answer()
