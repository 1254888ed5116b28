"""Whether a fix can be verified at all, decided before anything of it runs: the patch applies, adds or
changes a test and some code, weakens no existing test, and its test command is one Jury can verify.
``verify_fix`` admits the patch here, then runs it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import GitError
from workers.isolation.worktree import git
from workers.verification.testcommand import TestCommand, added_test_names, read_test_command, split_command
from workers.verification.weakening import is_test_path, name_status, test_config_changes, weakening

LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}  # paths from the patch are paths, not globs


@dataclass(frozen=True)
class Admitted:
    """A patch applied (to the index) in the worktree, that may be verified."""

    tree: str  # the fixed tree
    tests: list[str]  # the test files it adds or changes
    code: list[tuple[str, str]]  # status and path of each other file it touches
    added: list[str]  # the names of the tests it adds or changes
    tc: TestCommand


def admit(
    repo: Path,
    parent: str,
    patch: bytes,
    test_command: str,
    wt: Path,
    *,
    checks: dict[str, str],
    table: dict[str, object],
) -> tuple[Admitted | str, list[str]]:
    """Apply ``patch`` in ``wt`` (checked out at ``parent``) and read what it changes, or the reason it
    cannot be verified; with the existing tests it weakens (the verdict lists them either way). ``table``
    gets the verification's ``config_changes`` and ``runner`` as soon as they are known."""
    try:
        git(["apply", "--index", "--binary", "--whitespace=nowarn", "-"], wt, input=patch)
    except GitError as exc:
        return f"the patch does not apply at {parent[:12]}: {exc.stderr.strip()[-300:]}", []
    try:
        weak = weakening(repo, parent, patch)
    except GitError as exc:
        return f"cannot check the patch for weakened tests: {exc}", []
    split = split_command(test_command)
    if isinstance(split, str):
        return f"test_command cannot be run: {split}", weak
    fixed_tree = git(["write-tree"], wt).strip()
    table["config_changes"] = test_config_changes(wt, "HEAD", fixed_tree)
    changes = name_status(wt, "HEAD", fixed_tree, renames=False)
    tests = [p for s, _, p in changes if s != "D" and is_test_path(p)]
    code = [(s, p) for s, _, p in changes if not is_test_path(p)]
    if not tests:
        return "the fix adds or changes no test file", weak
    if not code:
        return "the fix changes only test files: there is nothing to revert", weak
    added = added_test_names(
        git(["diff", "--no-color", "--no-ext-diff", "HEAD", fixed_tree, "--", *tests], wt, env=LITERAL)
    )
    tc = read_test_command(test_command, checks=checks, changed_tests=tests, added_names=added)
    if isinstance(tc, str):
        return tc, weak
    table["runner"] = tc.runner
    if weak:
        shown = "; ".join(weak[:3]) + (f" (and {len(weak) - 3} more)" if len(weak) > 3 else "")
        return f"the fix weakens existing tests: {shown}", weak
    return Admitted(fixed_tree, tests, code, added, tc), weak
