"""Run a docs page: its fenced shell blocks, in order, in one bash, with the files it shows written first.

The convention a page follows (and the docs pages' tests rely on):

- A block whose info string is ``bash`` runs. Every such block of a page runs, in page order, in ONE bash
  process (``set -euo pipefail``), as a reader typing them into one terminal would: what one block
  exports or starts in the background (``&``) the next one has.
- ``{.bash not-run="<reason>"}``: shown, never run; the reason is required (``not_run``).
- A block of any other language whose first line is ``# file: PATH`` (``// file: PATH`` too) is a file
  the reader writes: it is written to PATH (relative to the run's folder, the comment line dropped) at its
  place in the page, before the bash blocks after it run.
- Every other block (``text`` output, ``toml`` examples without a file line) is shown only. ``sh``,
  ``shell``, ``console`` and ``zsh`` are refused (``blocks``): a shell block either runs or says why not.
  A backtick in an info string is refused too (CommonMark would not read it as a fence).

A test may swap a text in every block before the run (``replace``: the fixed port a page names, for a
free one) and gives the environment (``page_env``: a private ``JURY_DIR``); the venv's ``bin`` comes
first on PATH.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

FENCE_OPEN = re.compile(r"^ {0,3}(?P<fence>```+)(?P<info>.*)$")
FILE_LINE = re.compile(r"^(?:#|//) file: (?P<path>[^\s]+)\s*$")
NOT_RUN = re.compile(r'^\{\.bash not-run="(?P<reason>[^"]*\S[^"]*)"\}$')  # the site renders only this form
REFUSED = {"sh", "shell", "console", "zsh"}
VENV_BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Block:
    info: str
    body: str
    line: int  # the fence's line in the page (1-based)

    @property
    def lang(self) -> str:
        info = self.info.strip()
        if info.startswith("{."):  # the attribute form: {.bash not-run="..."}
            return info[2:].split(maxsplit=1)[0].rstrip("}")
        return info.split(maxsplit=1)[0] if info else ""

    @property
    def runs(self) -> bool:
        return self.info.strip() == "bash"

    @property
    def not_run(self) -> str | None:
        """The reason a ``{.bash not-run="<reason>"}`` block gives; None for any other block."""
        found = NOT_RUN.match(self.info.strip())
        return found["reason"] if found else None

    @property
    def file(self) -> str | None:
        """The path a file block is written to (``# file: PATH`` on its first line), else None."""
        if self.lang == "bash":
            return None
        first = self.body.split("\n", 1)[0]
        found = FILE_LINE.match(first)
        return found["path"] if found else None

    @property
    def content(self) -> str:
        return self.body.split("\n", 1)[1] if self.file else self.body


def fenced(page: Path) -> list[Block]:
    """Every fenced block of the page, line by line as CommonMark reads backtick fences: an opening line
    of three or more backticks and an info string, a closing line of as many backticks or more. An info
    string holding a backtick does not open a fence in CommonMark, so it is an error here, as is a fence
    never closed: either would hide blocks from the test."""
    found: list[Block] = []
    opened: tuple[str, str, int] | None = None  # the fence, its info string, its line
    body: list[str] = []
    for number, line in enumerate(page.read_text().splitlines(keepends=True), start=1):
        row = line.rstrip("\n")
        if opened is None:
            if (start := FENCE_OPEN.match(row)) is not None:
                if "`" in start["info"]:
                    raise ValueError(f"{page.name}:{number}: a backtick in a fence's info string")
                opened, body = (start["fence"], start["info"].strip(), number), []
        elif row.strip().startswith(opened[0]) and not row.strip().strip("`"):
            found.append(Block(opened[1], "".join(body), opened[2]))
            opened = None
        else:
            body.append(line)
    if opened is not None:
        raise ValueError(f"{page.name}:{opened[2]}: a fence never closed")
    return found


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks; a ``bash`` block with another info string than ``bash`` or ``{.bash
    not-run="<reason>"}``, or a shell block of another name, is an error."""
    found = fenced(page)
    for block in found:
        where = f"{page.name}:{block.line}"
        if block.lang in REFUSED:
            raise ValueError(
                f'{where}: a ```{block.lang} block: write ```bash (or ```{{.bash not-run="<reason>"}})'
            )
        if block.lang == "bash" and not block.runs and block.not_run is None:
            raise ValueError(f'{where}: ```{block.info}: only ```bash or ```{{.bash not-run="<reason>"}}')
    return found


def script(page: Path, replace: dict[str, str] | None = None) -> str:
    """One bash script of the page: each file block written, each ``bash`` block run, in page order,
    each preceded by a marker line naming where it is in the page (``### page:line``). ``replace``: text
    swapped in every block first (a port the page names, for a free one)."""
    parts = ["set -euo pipefail"]
    for found in blocks(page):
        block = found
        for old, new in (replace or {}).items():
            block = Block(block.info, block.body.replace(old, new), block.line)
        if block.file is not None:
            path = shlex.quote(block.file)
            write = f"cat > {path} <<'JURY_DOCS_EOF'\n{block.content}JURY_DOCS_EOF"
            parts.append(f'mkdir -p "$(dirname {path})"\n{write}')
        elif block.runs:
            parts.append(f"echo '### {page.name}:{block.line}'\n{block.body}")
    return "\n".join(parts) + "\n"


def run_page(
    page: Path, where: Path, env: dict[str, str], timeout: float, replace: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``script(page)`` in ``where`` with ``env`` (the venv's bin first on PATH), in a session of its
    own: whatever it left running (a server it started with ``&`` and did not stop, the run failed
    midway) is killed with that session's process group when it ends."""
    full = dict(env, PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', os.defpath)}")
    proc = subprocess.Popen(
        ["bash", "-c", script(page, replace)],
        cwd=where,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        out += f"\n(timed out after {timeout} s)"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def free_port() -> int:
    """A TCP port nothing listens on now, on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def page_env(where: Path) -> dict[str, str]:
    """A page's environment: the test's, without the developer's Jury settings (``JURY_*``), a forge
    token or git settings of their own, with a private state directory under ``where``."""
    from tests.conftest import outside_env

    env = {k: v for k, v in outside_env().items() if k not in ("GITHUB_TOKEN", "GITLAB_TOKEN")}
    env = {k: v for k, v in env.items() if not k.startswith("GIT_CONFIG")}
    return dict(env, JURY_DIR=str(where / "state"))
