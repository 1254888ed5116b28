"""Scripted reviewer that never finds anything."""

import pathlib
import sys

prompt = pathlib.Path(sys.argv[1]).read_text()
if prompt.startswith("# Jury reply"):
    print("NO CONTEST")
else:
    print("I read the diff and found nothing to report.\n\nNO NEW FINDINGS")
