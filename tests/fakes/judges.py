#!/usr/bin/env python3
"""Fake judges that cheat, for the second-opinion tests: ``judges.py MODE PROMPT_FILE``, run in the
judge's worktree of the demo sample repository (``stats.py`` with a buggy ``median``).

Every mode fixes ``median`` for real and claims a reproduced, tested fix; what differs is the proof:

  odd-only  its regression test checks only an odd-length list: it passes without the fix too
  weaken    a real regression test, but it also rewrites the existing assertion of
            tests/test_stats.py to a wrong value (``mean([1, 2, 3]) == 3``)
  plain     a real check, but as a plain program (``python3 tests/check_median.py``), not a test runner
  skip      a real regression test, but the "fix" also breaks ``mean`` and hides its failing test with
            ``@unittest.skip`` on the existing test class
  marker    the "fix" also writes ``fixed.marker`` and the test only checks that the marker exists: it
            never runs ``median``
  codejury  an honest fix with a pytest regression test, answered in codejury's verdict schema
            (``"reproduced"`` is the observation, a string)

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
elif mode == "skip":
    pathlib.Path("tests/test_median.py").write_text(
        UNIT + "        self.assertEqual(median([4, 1, 3, 2]), 2.5)\n"
    )
    src.write_text(src.read_text().replace("return sum(values) / len(values)", "return max(values)"))
    old = pathlib.Path("tests/test_stats.py")
    old.write_text(old.read_text().replace("class MeanTest", '@unittest.skip("flaky")\nclass MeanTest'))
elif mode == "marker":
    pathlib.Path("fixed.marker").write_text("median fixed\n")
    pathlib.Path("tests/test_median.py").write_text(
        "import os\nimport unittest\n\n\nclass MedianTest(unittest.TestCase):\n"
        "    def test_median(self):\n        self.assertTrue(os.path.exists('fixed.marker'))\n"
    )
elif mode == "codejury":
    pathlib.Path("tests/test_median_even.py").write_text(
        "from stats import median\n\n\ndef test_even_length_averages_the_middle():\n"
        "    assert median([4, 1, 3, 2]) == 2.5\n"
    )
    command = f"{sys.executable} -m pytest -q tests/test_median_even.py"
else:
    sys.exit(f"unknown mode {mode}")
print("Reproduced: median([1, 2, 3, 4]) == 3")
answer = {
    "verdict": "accepted",
    "reproduced": True,
    "reason": "even lengths now average the middle",
    "evidence": "median([1, 2, 3, 4]) == 3 before the fix",
    "test": "median regression test",
    "test_command": command,
}
if mode == "codejury":  # its schema: the observation is "reproduced" itself, and there is no "evidence"
    del answer["evidence"]
    answer["reproduced"] = "median([1, 2, 3, 4]) returned 3, not 2.5"
print(json.dumps(answer))
