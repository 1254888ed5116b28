#!/usr/bin/env python3
"""Install the agent CLIs an image is built with (``docker build --build-arg AGENTS="codex claude"``).

    install_agents.py [--catalog DIR] [--dry-run] AGENT...

Each AGENT is a file of Jury's catalog (``config/agents/<agent>.toml``) whose ``install`` hint is an npm
package (``npm install -g <package>``); it is installed with npm, as an argument vector, once, when the
image is built. A hint of another form (a ``curl ... | sh`` installer) is refused rather than run: such
an agent goes in an image of your own built ``FROM`` this one. No AGENT: nothing to install.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

NPM_HINT = re.compile(r"npm install -g (?P<package>@?[a-z0-9][a-z0-9._/-]*(?:@[a-z0-9.^~-]+)?)")
NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


def package_of(catalog: Path, agent: str) -> str:
    """The npm package of ``agent``'s install hint; ``SystemExit`` naming what is wrong otherwise."""
    if not NAME.fullmatch(agent):
        raise SystemExit(f"AGENTS: {agent!r} is not an agent name (lower-case letters, digits, '-')")
    path = catalog / f"{agent}.toml"
    if not path.is_file():
        known = " ".join(sorted(p.stem for p in catalog.glob("*.toml")))
        raise SystemExit(f"AGENTS: no agent {agent!r} in the catalog; known: {known}")
    entry = tomllib.loads(path.read_text()).get("agents", {}).get(agent, {})
    hint = str(entry.get("install") or "")
    found = NPM_HINT.fullmatch(hint.strip())
    if found is None:
        raise SystemExit(
            f"AGENTS: {agent}'s install hint is not an npm package ({hint or 'none'}); it is not run at "
            "build time: install it in an image of your own built FROM this one"
        )
    return found.group("package")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--catalog", type=Path, default=Path(__file__).resolve().parents[1] / "config" / "agents")
    p.add_argument("--dry-run", action="store_true", help="print the npm command, run nothing")
    p.add_argument("agents", nargs="*")
    args = p.parse_args()
    packages = [package_of(args.catalog, a) for a in dict.fromkeys(args.agents)]
    if not packages:
        return
    argv = ["npm", "install", "--global", "--no-audit", "--no-fund", *packages]
    print(" ".join(argv), flush=True)
    if not args.dry_run:
        sys.exit(subprocess.run(argv, check=False).returncode)


if __name__ == "__main__":
    main()
