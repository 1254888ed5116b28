#!/usr/bin/env python3
"""A fake judge that was handed a key and writes it into its fix: ``leak_judge.py MODE PROMPT_FILE``.

In a triage of the demo sample's median bug it fixes ``median`` for real, adds a regression test and
accepts with proof, as an honest judge does; but it also writes ``$LEAKY_API_KEY`` (passed to it through
its entry's ``env_pass``) into the fixed ``stats.py``, as MODE says:

  plain    as it is, in a constant
  base64   base64-encoded, in a constant (a patch cannot be redacted, so no spelling may be kept)

It never prints the key. Any prompt other than a triage gets "NO NEW FINDINGS".
"""

import base64
import json
import os
import pathlib
import sys

mode, prompt_file = sys.argv[1], sys.argv[2]
prompt = pathlib.Path(prompt_file).read_text()
key = os.environ.get("LEAKY_API_KEY", "")
BUG = "    return ordered[middle]\n"
FIXED = "    if len(ordered) % 2 == 0:\n        return (ordered[middle - 1] + ordered[middle]) / 2\n" + BUG

if not prompt.startswith("# Jury triage") or not key:
    print("NO NEW FINDINGS")
    sys.exit(0)

spelled = {"plain": key, "base64": base64.b64encode(key.encode()).decode()}[mode]
src = pathlib.Path("stats.py")
src.write_text(f'SERVICE_KEY = "{spelled}"\n\n' + src.read_text().replace(BUG, FIXED))
pathlib.Path("tests/test_median.py").write_text(
    "import unittest\n\nfrom stats import median\n\n\n"
    "class MedianTest(unittest.TestCase):\n    def test_median(self):\n"
    "        self.assertEqual(median([4, 1, 3, 2]), 2.5)\n"
)
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
