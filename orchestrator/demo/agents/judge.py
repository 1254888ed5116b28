"""Scripted judge for the demo repository: reproduces the median bug, fixes it, adds a regression test.

It really runs the code: the reproduction imports the tree's stats.py, and the new test is run before
the verdict (and it fails on the unfixed tree).
"""

import json
import pathlib
import subprocess
import sys

prompt = pathlib.Path(sys.argv[1]).read_text()
claim = next((line[len("CLAIM:") :].strip() for line in prompt.splitlines() if line.startswith("CLAIM:")), "")
sys.path.insert(0, ".")


def answer(**verdict):
    print(json.dumps(verdict, indent=2))
    sys.exit(0)


if "median" not in claim:
    answer(
        verdict="rejected",
        reproduced=False,
        reason="the demo judge only knows the median bug",
        evidence="claim does not mention median()",
        test=None,
        test_command=None,
    )

import stats  # noqa: E402

got = stats.median([1, 2, 3, 4])
if got == 2.5:
    answer(
        verdict="rejected",
        reproduced=False,
        reason="median([1, 2, 3, 4]) is already 2.5",
        evidence=f"median([1, 2, 3, 4]) == {got}",
        test=None,
        test_command=None,
    )
print(f"Reproduced: median([1, 2, 3, 4]) == {got}, expected 2.5")

src = pathlib.Path("stats.py")
src.write_text(
    src.read_text().replace(
        "    return ordered[middle]\n",
        "    if len(ordered) % 2 == 0:\n"
        "        return (ordered[middle - 1] + ordered[middle]) / 2\n"
        "    return ordered[middle]\n",
    )
)
pathlib.Path("tests/test_median.py").write_text(
    "import unittest\n\nfrom stats import median\n\n\n"
    "class MedianTest(unittest.TestCase):\n"
    "    def test_even_length_is_the_mean_of_the_middle_pair(self):\n"
    "        self.assertEqual(median([4, 1, 3, 2]), 2.5)\n\n"
    "    def test_odd_length_is_the_middle_value(self):\n"
    "        self.assertEqual(median([3, 1, 2]), 2)\n"
)
run = subprocess.run([sys.executable, "-m", "unittest", "tests.test_median"], capture_output=True, text=True)
answer(
    verdict="accepted" if run.returncode == 0 else "deferred",
    reproduced=True,
    reason="median() returned the upper middle value for even lengths; it now averages the middle pair",
    evidence=f"median([1, 2, 3, 4]) == {got} before the fix; new test exit {run.returncode}",
    test="median of an even-length list is the mean of the two middle values",
    test_command="python3 -m unittest tests.test_median",
)
