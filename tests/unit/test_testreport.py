"""Reading test runners' own reports (issue 9, part 2): real outputs of pytest, unittest, cargo and node
kept under tests/data/reports, and hand-made go/jest ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workers.verification.testreport import (
    parse_cargo,
    parse_go_json,
    parse_jest_json,
    parse_junit,
    parse_tap,
    parse_unittest,
    read_report,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "reports"


def outcomes(report) -> dict[str, str]:
    return {r.id: r.outcome for r in report.results}


def test_pytest_junit() -> None:
    report = parse_junit((DATA / "pytest-junit.xml").read_bytes())
    assert report.read
    assert outcomes(report) == {
        "tests.test_a::test_pass": "passed",
        "tests.test_a::test_fail": "failed",
        "tests.test_a::test_skip": "skipped",
        "tests.test_a::test_xfail": "xfailed",
        "tests.test_a::test_xpass_strict": "xpassed",
        "tests.test_a::test_setup_error": "error",  # a fixture error is not the test failing
        "tests.test_a::test_import_inside": "error",  # nor an ImportError
        "tests.test_a.TestK::test_p[1]": "passed",
        "tests.test_a.TestK::test_p[2]": "passed",
    }
    assert {r.file for r in report.results} == {"tests/test_a.py"}
    # the module that did not import is a problem, not a test
    (problem,) = report.problems
    assert problem.startswith("tests.test_b: collection failure")
    assert report.by_id()["tests.test_a::test_fail"].message == "assert 1 == 2"


@pytest.mark.parametrize(
    "xml",
    [b"", b"<testsuites><testcase", b"not xml at all"],
    ids=["empty", "truncated", "garbage"],
)
def test_junit_that_does_not_parse_is_unread(xml: bytes) -> None:
    report = parse_junit(xml)
    assert not report.read and report.results == [] and "does not parse" in report.problems[0]
    assert report.summary() == "no report"


def test_unittest_verbose() -> None:
    report = parse_unittest((DATA / "unittest-v.txt").read_text())
    assert outcomes(report) == {
        "u.test_u.T.test_fail": "failed",
        "u.test_u.T.test_imp": "error",  # ModuleNotFoundError in the test: not a failure of the test
        "u.test_u.T.test_ok": "passed",  # its docstring sits between the name and the dots
        "u.test_u.T.test_raises": "failed",  # a ZeroDivisionError from the code under test is
        "u.test_u.T.test_skip": "skipped",
        "u.test_u.T.test_xf": "xfailed",
    }
    (problem,) = report.problems
    assert problem.startswith("test_broken: ModuleNotFoundError")
    assert report.summary() == "1 passed, 2 failed, 1 error, 1 skipped, 1 xfailed, 1 not collected"


def test_unittest_before_311_names() -> None:
    text = "test_a (pkg.test_m.T) ... ok\ntest_b (pkg.test_m.T) ... FAIL\n"
    assert outcomes(parse_unittest(text)) == {
        "pkg.test_m.T.test_a": "passed",
        "pkg.test_m.T.test_b": "failed",
    }


def test_cargo() -> None:
    report = parse_cargo((DATA / "cargo-test.txt").read_text())
    assert outcomes(report) == {"tests::adds": "passed", "tests::later": "skipped", "tests::wrong": "failed"}
    assert report.problems == []
    broken = parse_cargo("error: this file contains an unclosed delimiter\nerror: could not compile `rs`\n")
    assert broken.results == [] and broken.problems[0] == "this file contains an unclosed delimiter"


def test_node_tap() -> None:
    report = parse_tap((DATA / "node-tap.txt").read_text())
    assert outcomes(report) == {"adds": "passed", "bad": "failed", "sk": "skipped", "grp > inner": "passed"}
    assert report.by_id()["bad"].message.startswith("error:")


def test_node_tap_module_that_does_not_load_is_an_error() -> None:
    text = (
        "TAP version 13\n# Subtest: /repo/a.test.js\nnot ok 1 - /repo/a.test.js\n  ---\n"
        "  error: 'Cannot find module ./calc'\n  code: 'ERR_MODULE_NOT_FOUND'\n  ...\n1..1\n"
    )
    assert outcomes(parse_tap(text)) == {"/repo/a.test.js": "error"}


def test_go_json() -> None:
    lines = [
        {"Action": "run", "Package": "ex/calc", "Test": "TestAdd"},
        {"Action": "pass", "Package": "ex/calc", "Test": "TestAdd"},
        {"Action": "fail", "Package": "ex/calc", "Test": "TestMedian/even"},
        {"Action": "fail", "Package": "ex/calc", "Test": "TestMedian"},
        {"Action": "skip", "Package": "ex/calc", "Test": "TestSlow"},
        {"Action": "fail", "Package": "ex/calc"},
        {"Action": "fail", "Package": "ex/broken"},  # a build failure: no test result at all
    ]
    text = "\n".join(json.dumps(x) for x in lines) + "\nFAIL\tex/broken [build failed]\n"
    report = parse_go_json(text)
    assert outcomes(report) == {
        "ex/calc.TestAdd": "passed",
        "ex/calc.TestMedian/even": "failed",
        "ex/calc.TestMedian": "failed",
        "ex/calc.TestSlow": "skipped",
    }
    assert report.problems == ["ex/broken: failed without a test result (build failed?)"]


def test_jest_json() -> None:
    doc = {
        "testResults": [
            {
                "name": "/repo/src/calc.test.js",
                "status": "failed",
                "assertionResults": [
                    {"fullName": "median even", "status": "failed", "failureMessages": ["expected 2.5"]},
                    {"fullName": "median odd", "status": "passed"},
                    {"fullName": "later", "status": "pending"},
                ],
            },
            {
                "name": "/repo/src/broken.test.js",
                "status": "failed",
                "message": "SyntaxError",
                "assertionResults": [],
            },
        ]
    }
    report = parse_jest_json(json.dumps(doc), "/repo")
    assert outcomes(report) == {
        "src/calc.test.js::median even": "failed",
        "src/calc.test.js::median odd": "passed",
        "src/calc.test.js::later": "skipped",
    }
    assert report.results[0].file == "src/calc.test.js"
    assert report.problems == ["src/broken.test.js: SyntaxError"]
    assert not parse_jest_json("{oops").read


def test_read_report_dispatch() -> None:
    assert read_report("unittest", "test_a (m.T.test_a) ... ok\n").results[0].outcome == "passed"
    assert not read_report("mystery", "").read
