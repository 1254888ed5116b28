#!/usr/bin/env python3
"""Fake judges that fix nothing (issue 48, item 4): ``vacuous_judges.py MODE PROMPT_FILE``, run in the
judge's worktree of the demo sample repository (``stats.py`` with a buggy ``median``).

Every mode claims a reproduced, tested fix of ``median``; the "regression test" passes with the patch and
fails without it, but only because it looks for a marker the patch left:

  comment          a comment line in ``median`` (``# FIXED: even lengths average the middle two``), and a
                   test that reads ``stats.py`` for it
  constant-source  a module-level ``MEDIAN_FIXED = True``, and a test that reads ``stats.py`` for it
  constant-import  the same constant, and a test that imports ``stats`` inside the test, calls ``median``
                   on an odd list (that already worked) and checks the constant is there
  honest           a real fix of ``median`` with a unittest regression test that calls it

Any prompt other than a triage gets "NO NEW FINDINGS".
"""

import json
import pathlib
import sys

mode, prompt_file = sys.argv[1], sys.argv[2]
prompt = pathlib.Path(prompt_file).read_text()
BUG = "    return ordered[middle]\n"
FIXED = "    if len(ordered) % 2 == 0:\n        return (ordered[middle - 1] + ordered[middle]) / 2\n" + BUG
HEAD = (
    "import pathlib\nimport unittest\n\n\nclass MedianTest(unittest.TestCase):\n    def test_median(self):\n"
)
READS = "        self.assertIn({needle!r}, pathlib.Path('stats.py').read_text())\n"

if not prompt.startswith("# Jury triage"):
    print("NO NEW FINDINGS")
    sys.exit(0)

src = pathlib.Path("stats.py")
test = pathlib.Path("tests/test_median.py")
if mode == "comment":
    src.write_text(src.read_text().replace(BUG, "    # FIXED: even lengths average the middle two\n" + BUG))
    test.write_text(HEAD + READS.format(needle="# FIXED"))
elif mode == "constant-source":
    src.write_text(src.read_text() + "\n\nMEDIAN_FIXED = True\n")
    test.write_text(HEAD + READS.format(needle="MEDIAN_FIXED = True"))
elif mode == "constant-import":
    src.write_text(src.read_text() + "\n\nMEDIAN_FIXED = True\n")
    test.write_text(
        HEAD + "        import stats\n\n        self.assertEqual(stats.median([3, 1, 2]), 2)\n"
        "        self.assertTrue(stats.MEDIAN_FIXED)\n"
    )
elif mode == "honest":
    src.write_text(src.read_text().replace(BUG, FIXED))
    test.write_text(
        "import unittest\n\nfrom stats import median\n\n\nclass MedianTest(unittest.TestCase):\n"
        "    def test_median(self):\n        self.assertEqual(median([4, 1, 3, 2]), 2.5)\n"
    )
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
            "test_command": "python3 -m unittest tests.test_median",
        }
    )
)
