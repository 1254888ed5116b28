#!/usr/bin/env python3
"""Fake judges that cheat, for the second-opinion tests: ``judges.py MODE PROMPT_FILE``, run in the
judge's worktree of the demo sample repository (``stats.py`` with a buggy ``median``).

Every mode fixes ``median`` for real and claims a reproduced, tested fix; what differs is the proof:

  odd-only  its regression test checks only an odd-length list: it passes without the fix too
  weaken    a real regression test, but it also rewrites the existing assertion of
            tests/test_stats.py to a wrong value (``mean([1, 2, 3]) == 3``)
  plain     a real check, but as a plain program (``python3 tests/check_median.py``), not a test runner

Any prompt other than a triage gets "NO NEW FINDINGS".
"""

import json
import pathlib
import sys

mode, prompt_file = sys.argv[1], sys.argv[2]
prompt = pathlib.Path(prompt_file).read_text()
BUG = "    return ordered[middle]\n"
FIXED = "    if len(ordered) % 2 == 0:\n        return (ordered[middle - 1] + ordered[middle]) / 2\n" + BUG
UNIT = (
    "import unittest\n\nfrom stats import median\n\n\n"
    "class MedianTest(unittest.TestCase):\n    def test_median(self):\n"
)

if not prompt.startswith("# Jury triage"):
    print("NO NEW FINDINGS")
    sys.exit(0)

src = pathlib.Path("stats.py")
src.write_text(src.read_text().replace(BUG, FIXED))
command = "python3 -m unittest tests.test_median"
if mode == "odd-only":
    pathlib.Path("tests/test_median.py").write_text(UNIT + "        self.assertEqual(median([3, 1, 2]), 2)\n")
elif mode == "weaken":
    pathlib.Path("tests/test_median.py").write_text(
        UNIT + "        self.assertEqual(median([4, 1, 3, 2]), 2.5)\n"
    )
    old = pathlib.Path("tests/test_stats.py")
    old.write_text(old.read_text().replace("mean([1, 2, 3]), 2)", "mean([1, 2, 3]), 3)"))
elif mode == "plain":
    pathlib.Path("tests/check_median.py").write_text(
        "import pathlib\nimport sys\n\n"
        "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))\n"
        "from stats import median  # noqa: E402\n\nsys.exit(0 if median([4, 1, 3, 2]) == 2.5 else 1)\n"
    )
    command = "python3 tests/check_median.py"
else:
    sys.exit(f"unknown mode {mode}")
print("Reproduced: median([1, 2, 3, 4]) == 3")
print(
    json.dumps(
        {
            "verdict": "accepted",
            "reproduced": True,
            "reason": "even lengths now average the middle",
            "evidence": "median([1, 2, 3, 4]) == 3 before the fix",
            "test": "median regression test",
            "test_command": command,
        }
    )
)
