"""``jury demo``: a sample repository with a real bug on a PR branch, and scripted agents for it.

The agents are scripts, not models: ``finder`` reports the bug while it is in the tree, ``quiet`` never
finds anything, ``judge`` reproduces the bug, writes a real fix and a regression test that fails without
it, ``refuter`` re-runs that test on the fixed tree as the second opinion.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from orchestrator.git import git
from orchestrator.spec import AgentSpec

HERE = Path(__file__).resolve().parent

STATS_MAIN = '''"""Small statistics helpers."""


def mean(values):
    """The arithmetic mean of a non-empty sequence."""
    return sum(values) / len(values)
'''

STATS_FEATURE = (
    STATS_MAIN
    + '''

def median(values):
    """The median of a non-empty sequence."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle]
'''
)

TEST_MAIN = """import unittest

from stats import mean


class MeanTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3]), 2)


if __name__ == "__main__":
    unittest.main()
"""

IDENTITY = ["-c", "user.name=Jury Demo", "-c", "user.email=demo@jury.invalid", "-c", "commit.gpgsign=false"]


def make_sample_repo(where: Path) -> Path:
    """A fresh git repository at ``where/sample``: ``main`` and a ``feature`` branch adding a buggy median."""
    repo = where / "sample"
    if repo.exists():
        shutil.rmtree(repo)
    (repo / "tests").mkdir(parents=True)
    git(["init", "--quiet", "--initial-branch=main", str(repo)], where)
    (repo / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    (repo / "stats.py").write_text(STATS_MAIN)
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "tests" / "test_stats.py").write_text(TEST_MAIN)
    git([*IDENTITY, "add", "-A"], repo)
    git([*IDENTITY, "commit", "--quiet", "-m", "stats: mean"], repo)
    git(["checkout", "--quiet", "-b", "feature"], repo)
    (repo / "stats.py").write_text(STATS_FEATURE)
    git([*IDENTITY, "commit", "--quiet", "-am", "stats: add median"], repo)
    git(["checkout", "--quiet", "main"], repo)
    return repo


def agent_script(name: str) -> Path:
    return HERE / "agents" / f"{name}.py"


def demo_agents() -> dict[str, AgentSpec]:
    """The scripted jury, run by this Python so they need nothing on PATH. Their models name made-up
    families so the second opinion comes from another family than the judge's."""
    py = sys.executable

    def spec(name: str, script: str, model: str, judge: str | None = None) -> AgentSpec:
        return AgentSpec(
            name=name,
            argv=[py, str(agent_script(script)), "{prompt_file}"],
            model=model,
            model_args=[],
            judge_argv=[py, str(agent_script(judge)), "{prompt_file}"] if judge else None,
            expect_seconds=5,
        )

    return {
        "demo-finder": spec("demo-finder", "finder", "scripted-a/finder"),
        "demo-quiet": spec("demo-quiet", "quiet", "scripted-a/quiet"),
        "demo-judge": spec("demo-judge", "quiet", "scripted-j/judge", judge="judge"),
        "demo-refuter": spec("demo-refuter", "refuter", "scripted-r/refuter"),
    }
