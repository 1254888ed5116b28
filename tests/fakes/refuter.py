#!/usr/bin/env python3
"""A fake second opinion for the tests: ``refuter.py MODE NAME PROMPT_FILE``, run in the worktree it checks.

On a second-opinion prompt (``# Jury second opinion``) it appends one JSON line to
``$FAKE_STATE/refuter-calls`` (its name, its mode, whether the tree it sees holds the median fix) and
answers as MODE says; on any other prompt it is a quiet juror (no finding, no contest). MODE is one of
the words below, optionally followed by ``+json`` to answer in claude's ``--output-format json`` shape
with a ``total_cost_usd`` of 0.0125 (for an agent with ``report = "result-json"``):

  not-refuted   NOT REFUTED: says what it checked
  refuted       REFUTED: with evidence, every time
  refute-once   REFUTED: with evidence the first time (per $FAKE_STATE), NOT REFUTED later
  refute-final  REFUTED: with evidence on the converged claim (no finding named), NOT REFUTED on findings
  unclear       no verdict line
  bare          ``REFUTED: wrong`` (a refutation without evidence: unclear)
"""

import json
import os
import pathlib
import sys

mode, name, prompt_file = sys.argv[1], sys.argv[2], sys.argv[3]
prompt = pathlib.Path(prompt_file).read_text()
state = pathlib.Path(os.environ.get("FAKE_STATE", "."))
verdict_mode, _, wrap = mode.partition("+")
COST = 0.0125


def say(text: str) -> None:
    if wrap == "json":
        print(json.dumps({"type": "result", "result": text, "total_cost_usd": COST}))
    else:
        print(text)


if not prompt.startswith("# Jury second opinion"):
    say("NO CONTEST" if prompt.startswith("# Jury reply") else "NO NEW FINDINGS")
    sys.exit(0)

stats = pathlib.Path("stats.py")
fixed = stats.exists() and "ordered[middle - 1]" in stats.read_text()
final = "## The claim — finding" not in prompt
calls = state / "refuter-calls"
n = len(calls.read_text().splitlines()) if calls.exists() else 0
with calls.open("a") as fh:
    fh.write(json.dumps({"agent": name, "mode": mode, "fixed": fixed, "final": final}) + "\n")
(state / f"refuter-prompt-{n + 1}.md").write_text(prompt)

EVIDENCE = "median([1, 2]) returns 2 on the fixed tree, not 1.5: the even case is still wrong for two items"
if (
    verdict_mode == "refuted"
    or (verdict_mode == "refute-once" and not (state / "refuted-once").exists())
    or (verdict_mode == "refute-final" and final)
):
    (state / "refuted-once").write_text("1")
    say(f"I ran the regression test and tried more inputs.\nREFUTED: {EVIDENCE}")
elif verdict_mode in ("not-refuted", "refute-once", "refute-final"):
    say(
        "I re-ran the test command on the fixed tree and read the diff.\n"
        "NOT REFUTED: the regression test fails without the fix and passes with it; even lengths average"
    )
elif verdict_mode == "bare":
    say("REFUTED: wrong")
else:
    say("Hard to say; it might be fine, it might not.")
