"""What a fix does to the tests it did not write, read from the patch alone (no process starts).

``weakening`` flags an existing test deleted, moved out of the tests, or an assertion or test removed or
changed. ``test_config_changes`` lists what the fix changed in how tests are collected and run
(``conftest.py``, pytest's ini files, ``[tool.pytest.ini_options]``, ``tox.ini``, ``noxfile.py``, CI
files ...) and its edits of existing test files beyond added tests: the record shows them, and so does
the refuter's prompt. The suite delta (``workers.verification.suite``) catches their effect; this says where
to look.
"""

from __future__ import annotations

import re
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from orchestrator import jsonsafe
from orchestrator.errors import GitError
from workers.isolation.worktree import commit_deterministic, git, git_bytes

__all__ = ["is_test_path", "name_status", "test_config_changes", "weakening"]

_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}  # paths from the patch are paths, not globs

_TEST_DIRS = frozenset({"tests", "test", "__tests__", "spec", "specs"})
_TEST_NAME_RE = re.compile(
    r"^(?:test_.*\.py|.*_test\.py|conftest\.py|.*_test\.go|.*\.(?:test|spec)\.(?:js|ts|jsx|tsx|mjs|cjs|mts|cts)"
    r"|.*_spec\.rb|.*Tests?\.(?:java|kt|scala|cs)|.*Spec\.(?:java|kt|scala|groovy)|.*Test\.php|test_.*\.rs)$"
)


def is_test_path(path: str) -> bool:
    """Whether ``path`` (repo-relative, ``/``-separated) is a test file: under a tests/test/__tests__/spec
    directory, or named like one (``test_*.py``, ``*_test.go``, ``*.spec.ts``, ``FooTest.java`` ...)."""
    parts = path.replace("\\", "/").strip("/").split("/")
    if any(p.lower() in _TEST_DIRS for p in parts[:-1]):
        return True
    return bool(_TEST_NAME_RE.match(parts[-1]))


_ASSERTION_RE = re.compile(
    r"\bassert|\bexpect\s*\(|\bshould\b|\.should|\bt\.(?:Error|Fatal|Fail)|\brequire\.|"
    r"\b(?:CHECK|REQUIRE|EXPECT|ASSERT|STATIC_ASSERT)(?:_\w+)?\s*\(|pytest\.raises|\bverify\s*\(",
    re.IGNORECASE,
)
_TEST_DEF_RE = re.compile(
    r"^\s*(?:async\s+)?def\s+test\w*|^\s*class\s+Test\w*|^\s*func\s+Test\w*|^\s*(?:pub\s+)?fn\s+test_\w*|"
    r"^\s*(?:it|test|describe)(?:\.\w+)?\s*\(|@Test\b|#\[test\]|^\s*(?:public\s+)?void\s+test\w*\s*\("
)
_COMMENT_RE = re.compile(r"^\s*(?:#(?!\[)|//|/\*|\*|--|<!--)")


def _norm(line: str) -> str:
    return " ".join(line.split())


@dataclass
class _FileDiff:
    removed: list[tuple[int, str]]  # (line number at parent, text)
    added: set[str]  # whitespace-normalized


_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


def _file_diff(repo: Path, parent: str, new: str, old_path: str, new_path: str) -> _FileDiff:
    raw = git(
        [
            "diff",
            "-U0",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "-M",
            parent,
            new,
            "--",
            old_path,
            new_path,
        ],
        repo,
        env=_LITERAL,
    )
    out = _FileDiff(removed=[], added=set())
    old_line = 0
    in_hunks = False
    for line in raw.splitlines():
        m = _HUNK_RE.match(line)
        if m:
            old_line, in_hunks = int(m[1]), True
            continue
        if not in_hunks:
            continue
        if line.startswith("-"):
            out.removed.append((old_line, line[1:]))
            old_line += 1
        elif line.startswith("+"):
            out.added.add(_norm(line[1:]))
    return out


def name_status(repo: Path, a: str, b: str, *, renames: bool) -> list[tuple[str, str, str]]:
    """(status letter, old path, new path) of each file changed between trees/commits ``a`` and ``b``."""
    raw = git_bytes(["diff", "--name-status", "-z", "-M" if renames else "--no-renames", a, b], repo).decode(
        "utf-8", errors="surrogateescape"
    )
    fields = raw.split("\0")
    out: list[tuple[str, str, str]] = []
    i = 0
    while i < len(fields) and fields[i]:
        status = fields[i][0]
        if status in "RC":
            out.append((status, fields[i + 1], fields[i + 2]))
            i += 3
        else:
            out.append((status, fields[i + 1], fields[i + 1]))
            i += 2
    return out


def weakening(repo: Path, parent: str, patch: bytes) -> list[str]:
    """Why ``patch`` weakens tests that exist at ``parent`` (empty: it does not); each names file and line.

    Flags: an existing test file deleted (or moved to a non-test path); a removed assertion line in an
    existing test file, unless the same line (whitespace aside) is added back in that file (a move); a
    removed test function. GitError when the patch does not apply at ``parent``.
    """
    with tempfile.TemporaryDirectory(prefix="jury-weak-") as tmp:
        new = commit_deterministic(repo, parent, patch, "jury weakening check", Path(tmp))
    reasons: list[str] = []
    for status, old, path in name_status(repo, parent, new, renames=True):
        if status == "A" or not is_test_path(old):
            continue
        if status == "D":
            reasons.append(f"{old}: existing test file deleted")
            continue
        if status == "R" and not is_test_path(path):
            reasons.append(f"{old}: existing test file moved out of the tests ({path})")
            continue
        diff = _file_diff(repo, parent, new, old, path)
        for n, text in diff.removed:
            if _COMMENT_RE.match(text) or _norm(text) in diff.added:
                continue
            shown = _norm(text)[:200]
            if _TEST_DEF_RE.search(text):
                reasons.append(f"{old}:{n}: test removed: {shown}")
            elif _ASSERTION_RE.search(text):
                reasons.append(f"{old}:{n}: assertion removed or changed: {shown}")
    return reasons


# --- test configuration and edits of existing tests --------------------------------------------------

_CONFIG_NAMES = frozenset(
    {"conftest.py", "pytest.ini", "tox.ini", "noxfile.py", "setup.cfg", ".coveragerc", "Jenkinsfile"}
    | {".gitlab-ci.yml", ".travis.yml", "azure-pipelines.yml", ".mocharc.json", ".mocharc.yml"}
)
_CONFIG_RE = re.compile(r"^(?:jest|vitest|vite|karma|playwright)\.config\.\w+$")
_CI_DIRS = (".github/workflows/", ".circleci/", ".buildkite/", ".gitlab/")
# pyproject.toml and package.json count only where they configure tests.
_PYPROJECT_TABLES = ("pytest", "coverage", "tox", "nox", "hatch")
_PACKAGE_KEYS = ("jest", "vitest", "mocha", "ava", "scripts")


def _is_config(path: str) -> bool:
    name = PurePosixPath(path).name
    return name in _CONFIG_NAMES or bool(_CONFIG_RE.match(name)) or path.startswith(_CI_DIRS)


def _blob(repo: Path, tree: str, path: str) -> str | None:
    try:
        return git(["show", f"{tree}:{path}"], repo)
    except GitError:  # absent on that side (added or deleted)
        return None


def _test_tables(text: str | None, name: str) -> dict[str, object]:
    """The parts of pyproject.toml / package.json that configure tests (unreadable: the raw text)."""
    if text is None:
        return {}
    try:
        if name == "pyproject.toml":
            tool = tomllib.loads(text).get("tool", {})
            return {k: tool.get(k) for k in _PYPROJECT_TABLES if isinstance(tool, dict) and k in tool}
        doc = jsonsafe.loads(text)  # bounded: what it returns goes into the run's events
        return {k: doc.get(k) for k in _PACKAGE_KEYS if isinstance(doc, dict) and k in doc}
    except (ValueError, RecursionError):  # tomllib recurses too
        return {"unreadable": text}


_ADDED_TEST_LINE_RE = re.compile(r"^(?:@|(?:async\s+)?def\s+test|class\s+Test|func\s+Test|(?:it|test)\s*\()")


def _only_added_tests(added: list[str]) -> bool:
    """Whether a run of added lines is whole new tests: every line at its shallowest indentation starts a
    test (or decorates one), every other line is deeper (a body), blank or a comment."""
    lines = [ln for ln in added if ln.strip() and not _COMMENT_RE.match(ln)]
    if not lines:
        return True
    base = min(len(ln) - len(ln.lstrip()) for ln in lines)
    tops = [ln.strip() for ln in lines if len(ln) - len(ln.lstrip()) == base]
    if tops[-1].startswith("@"):
        return False  # a decorator on an existing test (skip, xfail ...)
    return all(_ADDED_TEST_LINE_RE.match(t) for t in tops)


def _edits_beyond_added_tests(repo: Path, old_tree: str, new_tree: str, old: str, path: str) -> str | None:
    raw = git(
        [
            "diff",
            "-U0",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "-M",
            old_tree,
            new_tree,
            "--",
            old,
            path,
        ],
        repo,
        env=_LITERAL,
    )
    removed, other = 0, 0
    hunk: list[str] = []
    for line in [*raw.splitlines(), "@@ end"]:
        if line.startswith("@@"):
            if hunk and not _only_added_tests(hunk):
                other += sum(1 for h in hunk if h.strip())
            hunk = []
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
        elif line.startswith("+") and not line.startswith("+++"):
            hunk.append(line[1:])
    if not removed and not other:
        return None
    parts = [f"{removed} line(s) removed or changed"] if removed else []
    parts += [f"{other} line(s) added outside new tests"] if other else []
    return f"{path}: existing test file edited beyond added tests ({', '.join(parts)})"


def test_config_changes(repo: Path, old_tree: str, new_tree: str) -> list[str]:
    """What the change from ``old_tree`` to ``new_tree`` does to test configuration and existing tests,
    one line each: configuration files added, changed or deleted (``pyproject.toml`` and ``package.json``
    only where their test tables changed), CI files, existing test files renamed, deleted, or edited
    beyond added tests."""
    out: list[str] = []
    verbs = {"A": "added", "M": "changed", "D": "deleted", "R": "renamed", "C": "copied", "T": "changed"}
    for status, old, path in name_status(repo, old_tree, new_tree, renames=True):
        name = PurePosixPath(path).name
        if name in ("pyproject.toml", "package.json"):
            before, after = _blob(repo, old_tree, old), _blob(repo, new_tree, path)
            if _test_tables(before, name) != _test_tables(after, name):
                out.append(f"{path}: test configuration changed")
        elif _is_config(path) or _is_config(old):
            where = f"{old} -> {path}" if old != path else path
            out.append(f"{where}: test configuration {verbs.get(status, 'changed')}")
        elif status == "A" or not is_test_path(old):
            continue
        elif status == "D":
            out.append(f"{old}: existing test file deleted")
        elif status == "R" and old != path:
            out.append(f"{old}: existing test file renamed to {path}")
        elif (edited := _edits_beyond_added_tests(repo, old_tree, new_tree, old, path)) is not None:
            out.append(edited)
    return out
