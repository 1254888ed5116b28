"""Scripted reviewer: reports the median bug of the demo repository while it is in the tree."""

import pathlib
import sys

prompt = pathlib.Path(sys.argv[1]).read_text()
first = prompt.splitlines()[0] if prompt else ""
if first.startswith("# Jury reply"):
    print("The outcomes look right to me.\nNO CONTEST")
    sys.exit(0)

source = pathlib.Path("stats.py").read_text()
lines = source.splitlines()
buggy = "return ordered[middle]" in source and "ordered[middle - 1]" not in source
if buggy:
    line = next(i for i, text in enumerate(lines, 1) if "return ordered[middle]" in text)
    print("Reviewed the change to stats.py.\n")
    print(
        "FINDING: median() of an even-length sequence returns the upper middle value, not the mean of the two"
    )
    print(f"WHERE: stats.py:{line}")
    print("median([1, 2, 3, 4]) returns 3; the median is 2.5.")
else:
    print("Checked median() for odd and even lengths; both are right now.\n")
    print("NO NEW FINDINGS")
