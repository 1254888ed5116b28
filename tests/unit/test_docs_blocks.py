"""tests/docs_blocks.py, the runner of the docs pages' shell blocks: which blocks run, in what order,
in one bash; which are written as files; which info strings it refuses."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.docs_blocks import blocks, run_page

PAGE = """# A page

```bash
export GREETING=hello
mkdir -p out
```

```python
# file: out/say.py
import os
print(os.environ["GREETING"], "from say.py")
```

```{.bash not-run="needs a machine of its own"}
touch should-not-exist
```

```text
echo this is output, never run
```

```bash
python3 out/say.py > out/said.txt
echo "$GREETING again"
```
"""


def page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text)
    return path


def test_bash_blocks_run_in_order_in_one_shell_with_the_files_written_at_their_place(tmp_path: Path) -> None:
    where = tmp_path / "run"
    where.mkdir()
    done = run_page(page(tmp_path, PAGE), where, {"PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 0, done.stdout
    assert (where / "out" / "said.txt").read_text() == "hello from say.py\n"  # an export of block 1
    assert done.stdout == "### page.md:3\n### page.md:22\nhello again\n"
    assert not (where / "should-not-exist").exists()
    assert (where / "out" / "say.py").read_text().startswith("import os")  # the file line dropped


def test_a_failing_block_stops_the_page(tmp_path: Path) -> None:
    text = "```bash\nfalse\n```\n\n```bash\ntouch after\n```\n"
    done = run_page(page(tmp_path, text), tmp_path, {"PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode != 0 and not (tmp_path / "after").exists()


def test_what_is_left_running_in_the_background_is_stopped(tmp_path: Path) -> None:
    text = "```bash\nsleep 300 > /dev/null 2>&1 &\necho $! > pid\n```\n"
    done = run_page(page(tmp_path, text), tmp_path, {"PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 0
    pid = (tmp_path / "pid").read_text().strip()
    state = subprocess.run(["ps", "-o", "stat=", "-p", pid], capture_output=True, text=True).stdout.strip()
    assert state in ("", "Z"), state


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("```sh\nls\n```\n", "write ```bash"),
        ("```console\n$ ls\n```\n", "write ```bash"),
        ('```{.bash not-run=""}\nls\n```\n', "only ```bash or"),
        ("```bash -x\nls\n```\n", "only ```bash or"),
        ('```{.bash not-run="needs `this`"}\nls\n```\n', "backtick"),
        ("```bash\nls\n", "never closed"),
    ],
)
def test_blocks_that_would_escape_the_test_are_refused(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        blocks(page(tmp_path, text))
