#!/usr/bin/env python3
"""A fake reviewer that shows what reached it: ``env_agent.py PROMPT_FILE``.

It prints every environment variable it was given (``ENV NAME=value``) and finds nothing, so a test can
tell from the run's record whether a variable passed the scrubbed environment. In a reply it contests
nothing.
"""

import os
import pathlib
import sys

prompt = pathlib.Path(sys.argv[1]).read_text()
for name in sorted(os.environ):
    print(f"ENV {name}={os.environ[name]}")
print("NO CONTEST" if prompt.startswith("# Jury reply") else "NO NEW FINDINGS")
