#!/usr/bin/env python3
"""A fake agent CLI for the fleet tests (tests/e2e/test_fleet.py).

    fleet_agent.py --state DIR --tag TAG [--sleep S] [--slow-runs N] [--child] [--ignore-term] [--gate FILE]
                   MODE PROMPT

Every invocation first appends one line ``<pid> [<child pid>]`` to ``DIR/TAG.pids`` (so a test can count
how often the agent ran and check that none of its processes outlived the run), then sleeps ``S``
seconds (only in its first ``N`` invocations with ``--slow-runs N``; ``--child``: with a grandchild
sleeping alongside it in its process group; ``--ignore-term``: deaf to SIGTERM), waits until ``FILE``
exists with ``--gate FILE`` (the test opens the gate when it has seen what it wanted), then answers as
MODE says. It reads the prompt's first line to tell a review round, a
triage and a reply apart.

On the demo sample repository (``stats.py`` with a buggy ``median``) MODE is one of the modes of
``tests/fakes/agent.py`` (``find``, ``clean``, ``fix``, ...), which answers.

On the three-bug repository of ``make_three_bug_repo`` (three independent bugs in three files):

  find3   review: one FINDING/WHERE per bug still in the tree; NO NEW FINDINGS when none is left
  fix3    triage: fixes the one bug the prompt's ``CLAIM:``/``WHERE:`` lines name, adds a regression test
          for it, and accepts; a reply: NO CONTEST
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import runpy
import signal
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent

# name -> (file, buggy line, fixed line, claim, regression test, test module)
BUGS: dict[str, tuple[str, str, str, str, str, str]] = {
    "clamp": (
        "clamp.py",
        "    return max(lo, min(value, lo))",
        "    return max(lo, min(value, hi))",
        "clamp() compares the value with lo instead of hi, so it always returns lo",
        "from clamp import clamp\n\n\nclass ClampTest(unittest.TestCase):\n"
        "    def test_inside(self):\n        self.assertEqual(clamp(5, 0, 10), 5)\n",
        "tests.test_clamp",
    ),
    "last": (
        "seq.py",
        "    return items[len(items)]",
        "    return items[-1]",
        "last() indexes one past the end and raises IndexError on every list",
        "from seq import last\n\n\nclass LastTest(unittest.TestCase):\n"
        "    def test_last(self):\n        self.assertEqual(last([1, 2, 3]), 3)\n",
        "tests.test_last",
    ),
    "cents": (
        "money.py",
        "    return int(dollars * 10)",
        "    return round(dollars * 100)",
        "cents() multiplies by 10 instead of 100, so 1.25 dollars become 12 cents",
        "from money import cents\n\n\nclass CentsTest(unittest.TestCase):\n"
        "    def test_cents(self):\n        self.assertEqual(cents(1.25), 125)\n",
        "tests.test_cents",
    ),
}


def pid_token(pid: int) -> str:
    """``pid`` as the test can find it on the host: inside Jury's sandbox pids are those of its own pid
    namespace, so each is written as ``<pid namespace inode>:<pid>`` (the test maps it to the host's)."""
    ns = os.readlink("/proc/self/ns/pid")  # "pid:[4026532345]"
    return f"{ns[ns.index('[') + 1 : -1]}:{pid}"


def record(state: pathlib.Path, tag: str, child: int | None) -> int:
    """Append this invocation's pids to ``state/TAG.pids``; how many invocations it holds now."""
    line = pid_token(os.getpid()) + (f" {pid_token(child)}" if child else "")
    path = state / f"{tag}.pids"
    with open(path, "a") as f:
        f.write(line + "\n")
    return len(path.read_text().splitlines())


def review3() -> None:
    found = False
    for file, bug, _fixed, claim, _test, _module in BUGS.values():
        lines = pathlib.Path(file).read_text().splitlines()
        if bug in lines:
            found = True
            print(f"FINDING: {claim}")
            print(f"WHERE: {file}:{lines.index(bug) + 1}")
            print("Found by reading the diff.")
            print()
    if not found:
        print("NO NEW FINDINGS")


def triage3(prompt: str) -> None:
    claim = re.search(r"^CLAIM: (.*)$", prompt, re.M)
    where = re.search(r"^WHERE: (\S+?)(?::\d+)?$", prompt, re.M)
    name = next(
        (n for n, b in BUGS.items() if claim and where and b[3] == claim[1] and b[0] == where[1]), None
    )
    if name is None:
        print(json.dumps({"verdict": "rejected", "reproduced": False, "reason": "no such bug here"}))
        return
    file, bug, fixed, _claim, test, module = BUGS[name]
    src = pathlib.Path(file)
    src.write_text(src.read_text().replace(bug, fixed))
    pathlib.Path(f"tests/test_{name}.py").write_text(f"import unittest\n\n{test}")
    print(f"Reproduced {name} before fixing it.")
    print(
        json.dumps(
            {
                "verdict": "accepted",
                "reproduced": True,
                "reason": f"{name} fixed",
                "evidence": f"tests/test_{name}.py failed before the fix",
                "test": f"{name} regression",
                "test_command": f"python3 -m unittest {module}",
            }
        )
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--state", required=True, type=pathlib.Path)
    p.add_argument("--tag", required=True)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--slow-runs", type=int, default=None)
    p.add_argument("--child", action="store_true")
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--gate", type=pathlib.Path, default=None)
    p.add_argument("mode")
    p.add_argument("prompt_file")
    args = p.parse_args()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = None
    if args.child:
        child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({args.sleep + 300})"]).pid
    runs = record(args.state, args.tag, child)
    if args.sleep and (args.slow_runs is None or runs <= args.slow_runs):
        time.sleep(args.sleep)
    deadline = time.monotonic() + 300
    while args.gate is not None and not args.gate.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    prompt = pathlib.Path(args.prompt_file).read_text()
    kind = prompt.splitlines()[0] if prompt else ""
    if args.mode in ("find3", "fix3"):
        if kind.startswith("# Jury triage"):
            triage3(prompt)
        elif kind.startswith("# Jury reply"):
            print("NO CONTEST")
        elif args.mode == "find3":
            review3()
        else:
            print("NO NEW FINDINGS")
        return
    sys.argv = [str(HERE / "agent.py"), args.mode, args.prompt_file]
    runpy.run_path(str(HERE / "agent.py"), run_name="__main__")


if __name__ == "__main__":
    main()
