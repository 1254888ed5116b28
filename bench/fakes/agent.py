#!/usr/bin/env python3
"""The bench's fake agent: sleeps the durations the bench drew for it, then answers (no model is called).

    agent.py --review S1,S2 [--find] --reply S --triage S PROMPT_FILE

A review of round n sleeps S<n> (the last one for later rounds); with ``--find`` it reports one finding
in round 1 and none after. A triage sleeps and rejects with evidence; a reply sleeps and does not contest.
Run on the demo sample repository (``stats.py``). Sleeping is the workload: it stands for a model.
"""

import argparse
import json
import pathlib
import re
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--review", default="0")
ap.add_argument("--reply", type=float, default=0.0)
ap.add_argument("--triage", type=float, default=0.0)
ap.add_argument("--find", action="store_true")
ap.add_argument("prompt")
args = ap.parse_args()
prompt = pathlib.Path(args.prompt).read_text()
first = prompt.splitlines()[0] if prompt else ""
if first.startswith("# Jury triage"):
    time.sleep(args.triage)
    verdict = {
        "verdict": "rejected",
        "reproduced": False,
        "reason": "not a bug",
        "evidence": "median([1, 2]) ok",
    }
    print(json.dumps(verdict | {"test": None, "test_command": None}))
elif first.startswith("# Jury reply"):
    time.sleep(args.reply)
    print("NO CONTEST")
else:
    found = re.search(r"round (\d+)", first)
    rnd = int(found.group(1)) if found else 1
    sleeps = [float(s) for s in args.review.split(",")]
    time.sleep(sleeps[min(rnd, len(sleeps)) - 1])
    if args.find and rnd == 1:
        print("FINDING: median() of an even-length list returns the upper middle value")
        print("WHERE: stats.py:1")
    else:
        print("NO NEW FINDINGS")
sys.exit(0)
