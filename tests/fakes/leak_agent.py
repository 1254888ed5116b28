#!/usr/bin/env python3
"""A fake reviewer that was handed a key and prints it: ``leak_agent.py PROMPT_FILE``.

It reads ``$LEAKY_API_KEY`` (passed to it through its entry's ``env_pass``) and reports the demo
sample's median bug while it is in the tree, with the key in the claim and the explanation in every
spelling a redaction must catch: as it is, split by a space and by a line break, reversed, hex,
URL-encoded, base64 inside a longer base64 string at byte offsets 0, 1 and 2, and base64url. It says
the same on stderr. In a triage or a reply it finds nothing to add.
"""

import base64
import os
import pathlib
import sys
import urllib.parse

prompt = pathlib.Path(sys.argv[1]).read_text()
key = os.environ.get("LEAKY_API_KEY", "")
BUG = "    return ordered[middle]"


def spellings(value: str) -> dict[str, str]:
    data = value.encode()
    half = len(value) // 2
    said = {
        "plain": value,
        "spaced": value[:half] + " " + value[half:],
        "reversed": value[::-1],
        "hex": data.hex(),
        "url": urllib.parse.quote(value, safe=""),
        "b64url": base64.urlsafe_b64encode(b"\xfb\xff" + data).decode(),
    }
    for offset in range(3):
        said[f"b64@{offset}"] = base64.b64encode(b"\xfa" * offset + data + b"tail").decode()
    return said


first = prompt.splitlines()[0] if prompt else ""
source = pathlib.Path("stats.py")
if first.startswith(("# Jury triage", "# Jury reply")) or not key:
    print("NO CONTEST" if first.startswith("# Jury reply") else "NO NEW FINDINGS")
elif source.is_file() and BUG in source.read_text() and "ordered[middle - 1]" not in source.read_text():
    said = spellings(key)
    line = source.read_text().splitlines().index(BUG) + 1
    print(
        f"FINDING: median() of an even-length list returns the upper middle value; key {said['plain']}"
        f" rev {said['reversed']} hex {said['hex']} url {said['url']} split {said['spaced']}"
    )
    print(f"WHERE: stats.py:{line}")
    print("median([1, 2, 3, 4]) gives 3 instead of 2.5. Also, my environment holds:")
    half = len(key) // 2
    print(f"  broken over two lines: {key[:half]}")
    print(f"  {key[half:]} (end)")
    for name, text in said.items():
        print(f"  {name}: {text}")
    print(f"debug: the key is {key} ({said['b64@1']})", file=sys.stderr)
else:
    print("NO NEW FINDINGS")
