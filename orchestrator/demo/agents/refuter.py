"""Scripted second opinion for the demo: re-runs the judge's test on the fixed tree and reads it.

It refutes when the test does not pass, or when it no longer checks an even-length median.
"""

import pathlib
import subprocess
import sys

prompt = pathlib.Path(sys.argv[1]).read_text()
if not prompt.startswith("# Jury second opinion"):
    print("NO NEW FINDINGS")
    sys.exit(0)

run = subprocess.run([sys.executable, "-m", "unittest", "tests.test_median"], capture_output=True, text=True)
test = pathlib.Path("tests/test_median.py")
source = test.read_text() if test.exists() else ""
print(run.stderr.strip()[-400:])
if run.returncode != 0:
    print(f"REFUTED: python3 -m unittest tests.test_median exits {run.returncode} on the fixed tree")
elif "2.5" not in source:
    print("REFUTED: tests/test_median.py does not check an even-length median (no 2.5 expected)")
else:
    print(
        "NOT REFUTED: ran python3 -m unittest tests.test_median on the fixed tree (exit 0); "
        "it checks median([4, 1, 3, 2]) == 2.5"
    )
