"""What the named tests' reports prove on each tree (pure).

On the fixed tree the named tests must have been collected, run and passed, and at least one of them must
be a test the fix added or changed. On the reverted tree (fix reverted, tests kept) such a test must have
FAILED: a module that does not import, a collection error or "no tests ran" is not the test failing and
proves nothing about the fix. A command Jury cannot read a report from (an opaque declared check) is
judged by its exit codes alone, and the record says the tests were not read.
"""

from __future__ import annotations

from pydantic import BaseModel

from workers.verification.testcommand import TestCommand, module_of
from workers.verification.testreport import TestReport, TestResult

__all__ = ["NamedTest", "fixed_problem", "named_table", "relevant", "reverted_problem"]


class NamedTest(BaseModel):
    """One named test's outcome on both trees (None: not run there, or absent from its report)."""

    id: str
    fixed: str | None = None
    reverted: str | None = None
    changed: bool = False  # in a test file the fix added or changed


def relevant(tc: TestCommand, result: TestResult, changed_tests: list[str], added: list[str]) -> bool:
    """Whether ``result`` is a test the fix added or changed."""
    if result.file is not None:
        return result.file in changed_tests
    if tc.runner == "unittest":
        return any(result.id.startswith(module_of(f) + ".") for f in changed_tests)
    if tc.runner in ("go", "cargo"):
        return any(name in result.id for name in added)
    return True  # node: the report holds only the named files


def _ids(results: list[TestResult], n: int = 3) -> str:
    shown = ", ".join(
        f"{r.id} {r.outcome}" + (f" ({r.message[:120]})" if r.message else "") for r in results[:n]
    )
    return shown + (f" and {len(results) - n} more" if len(results) > n else "")


def fixed_problem(
    tc: TestCommand, report: TestReport | None, changed_tests: list[str], added: list[str]
) -> str | None:
    """Why the fixed tree's report does not show the named tests collected, run and passed (None: it
    does). ``report`` None: a command Jury reads no report from (the exit code already passed)."""
    if report is None:
        return None
    if not report.read:
        return f"the named tests left no report with the fix ({'; '.join(report.problems[:1])})"
    if report.problems:
        return f"the named tests do not collect with the fix: {report.problems[0][:300]}"
    mine = [r for r in report.results if relevant(tc, r, changed_tests, added)]
    if not mine:
        return (
            "the named tests did not run with the fix: the runner's report has no test of "
            f"{', '.join(changed_tests)} (no tests ran, or none was collected)"
        )
    bad = [r for r in report.results if r.outcome != "passed"]
    if bad:
        return f"the named tests do not all pass with the fix: {_ids(bad)}"
    return None


def reverted_problem(
    tc: TestCommand,
    report: TestReport | None,
    exit_code: int | None,
    changed_tests: list[str],
    added: list[str],
) -> str | None:
    """Why the reverted tree does not show a test the fix added or changed FAILING (None: it does)."""
    if report is None:
        return "the test passes without the fix" if exit_code == 0 else None
    mine = [r for r in report.results if relevant(tc, r, changed_tests, added)]
    if any(r.outcome == "failed" for r in mine):
        return None
    if mine and all(r.outcome == "passed" for r in mine):
        return "the test passes without the fix"
    errors = [r for r in mine if r.outcome == "error"]
    if report.problems or errors:
        what = report.problems[0][:300] if report.problems else _ids(errors)
        return (
            "without the fix the named tests do not run, they do not fail: an import or collection error "
            f"is not the test failing ({what})"
        )
    if not report.read:
        return f"the named tests left no report without the fix ({'; '.join(report.problems[:1])})"
    if not mine:
        return "the named tests did not run without the fix (no tests ran)"
    return f"the test does not fail without the fix: {_ids(mine)}"


def named_table(
    tc: TestCommand,
    fixed: TestReport | None,
    reverted: TestReport | None,
    changed_tests: list[str],
    added: list[str],
) -> list[NamedTest]:
    """Both trees' outcomes of each test the named command ran, in the fixed tree's order."""
    rows: dict[str, NamedTest] = {}
    for side, report in (("fixed", fixed), ("reverted", reverted)):
        for r in report.results if report is not None else []:
            row = rows.setdefault(r.id, NamedTest(id=r.id, changed=relevant(tc, r, changed_tests, added)))
            setattr(row, side, r.outcome)
    return list(rows.values())[:200]
