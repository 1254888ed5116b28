"""Which tests ran and how each ended, read from the test runner's own report (pure; no process starts).

An exit code says that something failed; it cannot say which test, whether the named test was collected at
all, or whether a "failure" was the test's assertion or a module that did not import. Verification reads
the runner's report instead: pytest's JUnit XML (written outside the worktree), unittest's ``-v`` lines and
tracebacks, ``go test -json`` events, ``cargo test`` result lines, node's TAP, and jest/vitest JSON.

Outcomes are one vocabulary for every runner:

- ``passed``, ``failed``: the test ran; ``failed`` is its own assertion or exception.
- ``error``: the test could not be run as a test (collection, import, setup, a build that did not compile).
  It is never counted as the test failing: a fix whose test only breaks the import proves nothing.
- ``skipped``, ``xfailed``, ``xpassed``: ran or not, but said nothing about the code.

A report is only as honest as the process that wrote it: the code under test runs in the same process as
the runner. The report guards against a judge's mistaken or lazy proof; a forged report is what the
refuter and the listed test-configuration changes are for.
"""

from __future__ import annotations

import json
import re
from typing import Literal
from xml.etree import ElementTree

from pydantic import BaseModel

__all__ = [
    "Outcome",
    "TestReport",
    "TestResult",
    "parse_cargo",
    "parse_go_json",
    "parse_jest_json",
    "parse_junit",
    "parse_tap",
    "parse_unittest",
    "read_report",
    "unread",
]

Outcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]

# A failure whose message is one of these is a module that did not import, not the test failing.
_IMPORT_ERROR_RE = re.compile(r"^\s*(?:E\s+)?(?:\w+\.)*(?:ImportError|ModuleNotFoundError)\b")


class TestResult(BaseModel):
    """One test in a report. ``id`` is stable across trees for the same test; ``file`` is repo-relative
    when the runner says which file the test is in."""

    __test__ = False  # not a pytest test class

    id: str
    outcome: Outcome
    file: str | None = None
    message: str = ""


class TestReport(BaseModel):
    """A runner's report: its tests, and ``problems`` that are not tests (a file that did not collect, a
    package that did not build). ``read`` is False when there was no report to read at all."""

    __test__ = False

    results: list[TestResult]
    problems: list[str] = []
    read: bool = True

    def by_id(self) -> dict[str, TestResult]:
        return {r.id: r for r in self.results}

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome == outcome)

    def summary(self) -> str:
        if not self.read:
            return "no report"
        parts = [f"{self.count(o)} {o}" for o in _ORDER if self.count(o)]
        if self.problems:
            parts.append(f"{len(self.problems)} not collected")
        return ", ".join(parts) or "no tests"


_ORDER: tuple[Outcome, ...] = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
_GO_OUTCOMES: dict[str, Outcome] = {"pass": "passed", "fail": "failed", "skip": "skipped"}  # go test -json


def unread(why: str) -> TestReport:
    return TestReport(results=[], problems=[why], read=False)


def _failed_or_import(message: str) -> Outcome:
    return "error" if _IMPORT_ERROR_RE.match(message) else "failed"


# --- pytest: JUnit XML ---------------------------------------------------------------------------------


def parse_junit(xml: str | bytes) -> TestReport:
    """pytest's ``--junitxml`` with ``junit_family=xunit1`` (testcases carry ``file``).

    A collection error is a testcase with an empty classname and an ``error`` child: a problem, not a
    test. A failure whose message is an ImportError is an error. ``skipped`` of type ``pytest.xfail`` is
    an xfail; a strict xpass is a failure with the message ``[XPASS(strict)]``.
    """
    try:
        # expat resolves no external entity and caps entity expansion (billion laughs) since 2.4
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError as exc:
        return unread(f"the JUnit report does not parse: {exc}")
    results: list[TestResult] = []
    problems: list[str] = []
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        file = case.get("file") or None
        child = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        tag = child.tag if child is not None else None
        message = (child.get("message", "") if child is not None else "") or ""
        if not classname and tag == "error":
            problems.append(f"{name}: {message or 'collection failed'}".strip())
            continue
        outcome: Outcome
        if tag is None:
            outcome = "passed"
        elif tag == "failure":
            outcome = "xpassed" if message.startswith("[XPASS(strict)]") else _failed_or_import(message)
        elif tag == "error":
            outcome = "error"
        elif tag == "skipped":
            outcome = "xfailed" if child is not None and child.get("type") == "pytest.xfail" else "skipped"
        else:
            outcome = "passed"
        results.append(
            TestResult(id=f"{classname}::{name}", outcome=outcome, file=file, message=message[:300])
        )
    return TestReport(results=results, problems=problems)


# --- unittest -v -----------------------------------------------------------------------------------

# 3.11+: "test_x (pkg.mod.Class.test_x) ... ok"; before: "test_x (pkg.mod.Class) ... ok". A description
# line (a docstring) may sit between the name and the dots.
_UNIT_LINE_RE = re.compile(r"^(?P<name>\w+) \((?P<where>[\w.]+)\)(?:\n.*?)?? \.\.\. (?P<status>.+)$", re.M)
_UNIT_BLOCK_RE = re.compile(r"^={20,}\n(?P<kind>ERROR|FAIL): (?P<name>\w+) \((?P<where>[\w.]+)\)", re.M)


def _unit_id(name: str, where: str) -> str:
    return where if where.endswith("." + name) else f"{where}.{name}"


def parse_unittest(text: str) -> TestReport:
    """``python -m unittest -v`` output (stderr). A module that fails to import shows as the test
    ``unittest.loader._FailedTest.<module>``: a problem, not a test. An ERROR whose traceback ends in an
    ImportError is an error; any other ERROR is the test raising, which counts as failing."""
    last_lines: dict[str, str] = {}
    blocks = list(_UNIT_BLOCK_RE.finditer(text))
    for i, m in enumerate(blocks):
        end = blocks[i + 1].start() if i + 1 < len(blocks) else len(text)
        body = text[m.end() : end].split(
            "\n----------------------------------------------------------------------\nRan "
        )[0]
        lines = [ln for ln in body.splitlines() if ln.strip() and not set(ln.strip()) <= {"-"}]
        last_lines[_unit_id(m["name"], m["where"])] = lines[-1].strip() if lines else ""
    results: list[TestResult] = []
    problems: list[str] = []
    for m in _UNIT_LINE_RE.finditer(text):
        where, status = m["where"], m["status"].strip()
        tid = _unit_id(m["name"], where)
        if where.startswith("unittest.loader._FailedTest"):
            problems.append(f"{m['name']}: {last_lines.get(tid, 'failed to import')}")
            continue
        message = last_lines.get(tid, "")
        outcome: Outcome
        if status == "ok":
            outcome = "passed"
        elif status == "FAIL":
            outcome = "failed"
        elif status == "ERROR":
            outcome = "error" if _IMPORT_ERROR_RE.match(message) else "failed"
        elif status.startswith("skipped"):
            outcome, message = "skipped", status
        elif status == "expected failure":
            outcome = "xfailed"
        elif status == "unexpected success":
            outcome = "xpassed"
        else:
            continue
        results.append(TestResult(id=tid, outcome=outcome, message=message[:300]))
    return TestReport(results=results, problems=problems)


# --- go test -json -------------------------------------------------------------------------------------


def parse_go_json(text: str) -> TestReport:
    """``go test -json`` events: the last pass/fail/skip of each (package, test). A package that failed
    without any test result (a build failure) is a problem."""
    final: dict[str, Outcome] = {}
    failed_packages: list[str] = []
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except (ValueError, RecursionError):  # a hostile line is no event
            continue
        if not isinstance(ev, dict):
            continue
        action, pkg, test = ev.get("Action"), str(ev.get("Package", "")), ev.get("Test")
        if action not in ("pass", "fail", "skip"):
            continue
        if test:
            final[f"{pkg}.{test}"] = _GO_OUTCOMES[action]
        elif action == "fail":
            failed_packages.append(pkg)
    results = [TestResult(id=k, outcome=v) for k, v in final.items()]
    tested = {k.rsplit(".", 1)[0] for k in final}
    problems = [
        f"{p}: failed without a test result (build failed?)" for p in failed_packages if p not in tested
    ]
    return TestReport(results=results, problems=problems)


# --- cargo test -------------------------------------------------------------------------------------

_CARGO_RE = re.compile(r"^test (?P<name>\S+) \.\.\. (?P<status>ok|FAILED|ignored)\b", re.M)
_CARGO_ERROR_RE = re.compile(r"^error(?:\[E\d+\])?: (?P<what>.+)$", re.M)


def parse_cargo(text: str) -> TestReport:
    """``cargo test`` result lines; a compile error is a problem."""
    outcomes: dict[str, Outcome] = {"ok": "passed", "FAILED": "failed", "ignored": "skipped"}
    results = [TestResult(id=m["name"], outcome=outcomes[m["status"]]) for m in _CARGO_RE.finditer(text)]
    problems = [m["what"] for m in _CARGO_ERROR_RE.finditer(text) if not m["what"].startswith("test failed")]
    return TestReport(results=results, problems=problems[:20])


# --- node --test (TAP) ---------------------------------------------------------------------------------

_TAP_RE = re.compile(r"^(?P<indent> *)(?P<not>not )?ok \d+ - (?P<name>.*?)(?: # (?P<dir>SKIP|TODO)\b.*)?$")
_LOAD_ERROR_RE = re.compile(r"ERR_MODULE_NOT_FOUND|Cannot find module|SyntaxError|Could not find")


def parse_tap(text: str) -> TestReport:
    """node's TAP reporter: the leaves of the subtest tree (a test with subtests is a suite, not a test);
    a leaf's id joins the names of its enclosing suites with ``" > "``. A failure whose YAML says the module
    did not load is an error."""
    lines = text.splitlines()
    # TAP prints a test's subtests, indented, before the test's own line: when an entry comes, the deeper
    # entries pending since are its children, and it is a suite.
    pending: list[tuple[int, TestResult]] = []
    for i, line in enumerate(lines):
        m = _TAP_RE.match(line)
        if not m:
            continue
        indent, name = len(m["indent"]), m["name"].strip()
        children: list[TestResult] = []
        while pending and pending[-1][0] > indent:
            children.insert(0, pending.pop()[1])
        if children:
            pending += [(indent, c.model_copy(update={"id": f"{name} > {c.id}"})) for c in children]
            continue
        detail: list[str] = []
        for follow in lines[i + 1 :]:
            if _TAP_RE.match(follow) or follow.strip().startswith("# Subtest"):
                break
            detail.append(follow.strip())
        outcome: Outcome
        if m["dir"]:
            outcome = "skipped"
        elif m["not"]:
            outcome = "error" if _LOAD_ERROR_RE.search("\n".join(detail)) else "failed"
        else:
            outcome = "passed"
        message = next((d for d in detail if d.startswith(("error:", "name:"))), "") if m["not"] else ""
        pending.append((indent, TestResult(id=name, outcome=outcome, message=message[:300])))
    return TestReport(results=[r for _, r in pending])


# --- jest / vitest JSON -------------------------------------------------------------------------------


def parse_jest_json(text: str, root: str = "") -> TestReport:
    """jest's ``--json`` (vitest's ``--reporter=json`` has the same shape). A test file that failed
    before any test ran (a syntax or import error) is a problem. ``root`` is stripped from file paths."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:  # nested past the decoder's reach: unread too
        return unread(f"the JSON report does not parse: {type(exc).__name__}: {str(exc)[:200]}")
    if not isinstance(doc, dict):
        return unread("the JSON report is not an object")
    results: list[TestResult] = []
    problems: list[str] = []
    statuses: dict[str, Outcome] = {
        "passed": "passed",
        "failed": "failed",
        "pending": "skipped",
        "skipped": "skipped",
        "todo": "skipped",
        "disabled": "skipped",
    }
    prefix = root.rstrip("/") + "/" if root else ""
    for suite in doc.get("testResults") or []:
        if not isinstance(suite, dict):
            continue
        path = str(suite.get("name") or suite.get("testFilePath") or "")
        file = path[len(prefix) :] if prefix and path.startswith(prefix) else path
        cases = suite.get("assertionResults") or []
        if not cases and suite.get("status") == "failed":
            problems.append(f"{file}: {str(suite.get('message') or 'failed to run')[:300]}")
            continue
        for case in cases:
            if not isinstance(case, dict):
                continue
            name = str(case.get("fullName") or case.get("title") or "")
            outcome = statuses.get(str(case.get("status")), "skipped")
            message = " ".join(str(m) for m in case.get("failureMessages") or [])[:300]
            results.append(TestResult(id=f"{file}::{name}", outcome=outcome, file=file, message=message))
    return TestReport(results=results, problems=problems)


def read_report(kind: str, text: str, root: str = "") -> TestReport:
    """The report of a runner's ``kind`` (``junit``, ``unittest``, ``go``, ``cargo``, ``tap``, ``jest``);
    ``root`` is the worktree, stripped from the file paths jest writes."""
    if kind == "junit":
        return parse_junit(text)
    if kind == "unittest":
        return parse_unittest(text)
    if kind == "go":
        return parse_go_json(text)
    if kind == "cargo":
        return parse_cargo(text)
    if kind == "tap":
        return parse_tap(text)
    if kind == "jest":
        return parse_jest_json(text, root)
    return unread(f"no reader for {kind} reports")
