"""Every fenced shell block of README.md and docs/*.md runs as written, or says on its fence why not.

A fenced block whose language is ``bash``, ``sh``, ``shell`` or ``console`` is a shell block. The test runs
each one with ``bash -euo pipefail``, in a fresh temporary directory, with the checkout's ``.venv/bin``
first on PATH, a private HOME and ``JURY_DIR`` and none of the caller's ``JURY_*`` settings (no shared
Redis: a command that needs one starts its own embedded Redis), under a timeout; it must exit 0. A
``console`` block runs only its ``$ `` lines (the rest is output).

A block that cannot run here (it needs root, the network, an agent CLI with credentials, a long-lived
server, or it would run this very suite) is tagged on its fence, in the attribute form of the info string,
with the reason::

    ```{.bash not-run="apt-get needs root and the network"}

Why that form and not ``bash not-run: reason``: MkDocs renders fences with Python-Markdown, which takes an
info string only as one word (``bash``) or as ``{...}`` attributes; any other info string turns the block
into inline text. GitHub and other CommonMark renderers show the attribute form as a plain code block. So
each page is also rendered here as MkDocs renders it, and every fence must come out as a code block.

Every fence names its language, so a shell command cannot hide in a bare block. Each runnable script is a
test of its own (``README.md:42``), so a slow one, ``jury demo`` (about 20 s), does not hold up the others;
blocks with the very same script (the README repeats a few of the pages' blocks) run once, in the test
named after the first of them, its message naming them all.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import markdown
import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
SHELLS = ("bash", "sh", "shell", "console")
BLOCK_TIMEOUT = 300.0  # seconds one block may run: `jury demo` takes about 20
# The attribute form of an info string: {.lang key="value" ...}
_ATTRS_RE = re.compile(r"^\{(?P<body>[^}]*)\}$")
_CLASS_RE = re.compile(r"(?:^|\s)\.(?P<name>[\w#+-]+)")
_KEY_RE = re.compile(r'(?P<key>[\w-]+)="(?P<value>[^"]*)"')
# The Markdown extensions mkdocs.yml names: a page is rendered here as the site renders it.
SITE_EXTENSIONS = ("toc", "tables", "fenced_code")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts (1-based line of its opening fence), its language, the reason it
    is not run (None: it runs) and its text."""

    path: Path
    line: int
    info: str
    lang: str
    not_run: str | None
    text: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.line}"

    @property
    def is_shell(self) -> bool:
        return self.lang in SHELLS


def parse_info(info: str) -> tuple[str, dict[str, str]]:
    """(language, attributes) of a fence's info string: ``bash`` or ``{.bash not-run="why"}``."""
    info = info.strip()
    found = _ATTRS_RE.match(info)
    if found is None:
        return (info.split()[0] if info else ""), {}
    body = found.group("body")
    classes = [m.group("name") for m in _CLASS_RE.finditer(body)]
    return (classes[0] if classes else ""), {m.group("key"): m.group("value") for m in _KEY_RE.finditer(body)}


def blocks_of(text: str, path: Path) -> list[Block]:
    """The fenced blocks of one Markdown text, in order, as a CommonMark parser (GitHub's kind) reads them."""
    found = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type != "fence" or token.map is None:
            continue
        lang, attrs = parse_info(token.info)
        found.append(
            Block(path, token.map[0] + 1, token.info.strip(), lang, attrs.get("not-run"), token.content)
        )
    return found


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def all_blocks() -> list[Block]:
    return [b for page in pages() for b in blocks_of(page.read_text(encoding="utf-8"), page)]


def script_of(block: Block) -> str:
    """What bash runs: the block as written, or a console block's ``$ `` lines without their prompt."""
    if block.lang != "console":
        return block.text
    return "".join(line[2:] + "\n" for line in block.text.splitlines() if line.startswith("$ "))


def venv_bin() -> Path:
    """The checkout's .venv/bin (where ``jury`` and ``mkdocs`` are), else the running interpreter's."""
    own = ROOT / ".venv" / "bin"
    return own if (own / "python").exists() else Path(sys.executable).parent


def run_block(
    block: Block, workdir: Path, timeout: float = BLOCK_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run one block's script with ``bash -euo pipefail`` in ``workdir``, with a private HOME and JURY_DIR."""
    home, state = workdir / "home", workdir / "jury"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JURY_")}
    env.update(HOME=str(home), JURY_DIR=str(state), PATH=f"{venv_bin()}{os.pathsep}{env.get('PATH', '')}")
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script_of(block)],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def failure(block: Block, result: subprocess.CompletedProcess[str]) -> str | None:
    """Why a block that ran failed, with its output (None: it exited 0)."""
    if result.returncode == 0:
        return None
    return (
        f"{block.name}: the block exited {result.returncode}; fix it, or tag its fence"
        f' {{.{block.lang} not-run="<why>"}}\n--- script\n{script_of(block)}'
        f"--- stdout\n{result.stdout[-4000:]}--- stderr\n{result.stderr[-4000:]}"
    )


# Pages whose bash blocks build on each other (exports, a server started with &): each runs as one
# script, in page order, by a test of its own (tests/docs_blocks.py), not block by block here.
WHOLE_PAGE_TESTS = {
    "sweeps-offline.md": "tests/e2e/test_docs_sweeps_offline.py",
    "writing-an-agent.md": "tests/e2e/test_docs_agent_walkthrough.py",
}


def runnable() -> dict[str, list[Block]]:
    """The scripts of the blocks that run, each once: script -> the blocks that hold it."""
    found: dict[str, list[Block]] = {}
    for block in all_blocks():
        if block.path.name in WHOLE_PAGE_TESTS:
            continue
        if block.is_shell and block.not_run is None:
            found.setdefault(script_of(block), []).append(block)
    return found


@pytest.mark.timeout(BLOCK_TIMEOUT + 30)
@pytest.mark.parametrize("same", list(runnable().values()), ids=lambda same: same[0].name)
def test_the_shell_block_runs(same: list[Block], tmp_path: Path) -> None:
    problem = failure(same[0], run_block(same[0], tmp_path))
    assert problem is None, f"{problem}\n(the same block is at {', '.join(b.name for b in same)})"


def test_there_are_blocks_to_run_and_blocks_tagged_not_run() -> None:
    """The extractor finds the README's `jury demo` and its tagged set-up commands: a parser that found no
    block would let every check here pass."""
    readme = [b for b in all_blocks() if b.path.name == "README.md"]
    assert any(b.not_run is None and "jury demo" in b.text for b in readme)
    assert any(b.not_run and "pip install -e '.[dev]'" in b.text for b in readme)


def test_every_whole_page_has_its_test() -> None:
    for page, test in WHOLE_PAGE_TESTS.items():
        assert (ROOT / "docs" / page).is_file() and (ROOT / test).is_file(), (page, test)
        assert page in (ROOT / test).read_text(encoding="utf-8"), f"{test} does not run {page}"


def test_every_not_run_tag_gives_a_reason() -> None:
    bare = [b.name for b in all_blocks() if b.not_run is not None and not b.not_run.strip()]
    assert bare == [], f"not-run without a reason: {bare}"


def test_every_fence_names_its_language() -> None:
    """A bare fence would hide shell commands from this test: each must say what it holds."""
    bare = [b.name for b in all_blocks() if not b.lang]
    assert bare == [], f"fences without a language (```bash, ```toml, ```text ...): {bare}"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fence_renders_as_code_on_the_site(page: Path) -> None:
    """Python-Markdown, as MkDocs runs it, makes each fence a code block: none is lost to an info string
    it does not take, or to a fence it does not see (inside a list item)."""
    text = page.read_text(encoding="utf-8")
    html = markdown.markdown(text, extensions=list(SITE_EXTENSIONS))
    assert html.count("<pre>") + html.count("<pre ") == len(blocks_of(text, page))


# --- the extractor and the runner, on blocks made here ---------------------------------------------


def test_an_untagged_failing_block_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```bash\ntrue\nfalse\necho after\n```\n", encoding="utf-8")
    (block,) = blocks_of(page.read_text(), page)
    assert block.is_shell and block.not_run is None and block.line == 3
    result = run_block(block, tmp_path)
    problem = failure(block, result)
    assert problem is not None and "exited 1" in problem and "after" not in result.stdout


def test_a_failure_inside_a_pipe_or_an_unset_variable_fails(tmp_path: Path) -> None:
    for script in ("false | cat\n", 'echo "$NOT_SET_ANYWHERE"\n'):
        block = Block(tmp_path / "p.md", 1, "bash", "bash", None, script)
        assert failure(block, run_block(block, tmp_path)) is not None, script


def test_a_passing_block_runs_in_its_directory_with_the_venv_first(tmp_path: Path) -> None:
    block = Block(tmp_path / "p.md", 1, "sh", "sh", None, 'pwd\necho "$JURY_DIR"\ncommand -v jury\n')
    result = run_block(block, tmp_path)
    assert failure(block, result) is None
    assert result.stdout.splitlines() == [str(tmp_path), str(tmp_path / "jury"), str(venv_bin() / "jury")]


def test_the_tag_is_read_from_the_attribute_form(tmp_path: Path) -> None:
    text = '```{.bash not-run="apt-get needs root"}\napt-get install x\n```\n\n```sh\nls\n```\n'
    tagged, plain = blocks_of(text, tmp_path / "p.md")
    assert (tagged.lang, tagged.not_run) == ("bash", "apt-get needs root")
    assert (plain.lang, plain.not_run) == ("sh", None)
    html = markdown.markdown(text, extensions=list(SITE_EXTENSIONS))
    assert html.count("<pre>") == 2


def test_an_info_string_the_site_cannot_render_is_caught(tmp_path: Path) -> None:
    """The form the site drops: Python-Markdown makes this fence inline text, so the page check fails."""
    text = "```bash not-run: needs root\napt-get install x\n```\n"
    assert len(blocks_of(text, tmp_path / "p.md")) == 1
    assert "<pre>" not in markdown.markdown(text, extensions=list(SITE_EXTENSIONS))


def test_a_console_block_runs_its_prompt_lines_only(tmp_path: Path) -> None:
    block = Block(tmp_path / "p.md", 1, "console", "console", None, "$ echo one\none\n$ echo two\ntwo\n")
    assert script_of(block) == "echo one\necho two\n"
    assert run_block(block, tmp_path).stdout == "one\ntwo\n"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict` (as .ci/run runs it): a broken link or anchor, or a page left out of the nav,
    fails. Not ``--quiet``: it hides the warnings that --strict counts, and the build passes."""
    result = subprocess.run(
        [str(venv_bin() / "mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()
