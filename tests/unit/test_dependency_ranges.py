"""The dependency ranges in pyproject.toml admit only versions the suite has run against.

Every requirement has a lower bound the installed version meets (the suite runs on what is installed)
and an upper bound below the next major of that lower bound: the next minor for a 0.x release, whose
minors break as majors do, and the next year for a calendar-versioned one. A new major is admitted by
raising the bound after the suite has run on it, never by a range that was open all along.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"
CALENDAR = 2000  # a major at or above this is a year


def requirements() -> list[Requirement]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    listed = [*project["dependencies"], *project.get("optional-dependencies", {}).get("dev", [])]
    return [Requirement(r) for r in listed]


def bounds(req: Requirement) -> tuple[Version | None, Version | None]:
    lower = [Version(s.version) for s in req.specifier if s.operator == ">="]
    upper = [Version(s.version) for s in req.specifier if s.operator == "<"]
    return (max(lower) if lower else None), (min(upper) if upper else None)


def next_major(v: Version) -> Version:
    major, minor = v.release[0], (v.release[1] if len(v.release) > 1 else 0)
    if major == 0:
        return Version(f"0.{minor + 1}")
    return Version(str(major + 1))


def test_pyproject_lists_requirements() -> None:
    names = {r.name for r in requirements()}
    assert {"celery", "pydantic", "redis", "pytest"} <= names


@pytest.mark.parametrize("req", requirements(), ids=str)
def test_each_range_has_both_bounds_and_holds_the_installed_version(req: Requirement) -> None:
    lower, upper = bounds(req)
    assert lower is not None, f"{req}: no lower bound (>=)"
    assert upper is not None, f"{req}: no upper bound (<)"
    assert upper <= next_major(lower), f"{req}: admits {next_major(lower)}, a major the suite never ran"
    if lower.release[0] >= CALENDAR:
        assert upper <= Version(str(lower.release[0] + 1)), f"{req}: admits more than a year of releases"
    try:
        installed = Version(version(req.name))
    except PackageNotFoundError:
        pytest.fail(f"{req.name} is required but not installed: the suite cannot have run against it")
    assert req.specifier.contains(installed, prereleases=True), f"{req}: the installed {installed} is outside"


@pytest.mark.parametrize(
    ("spec", "ok"),
    [
        ("pydantic>=2.14.4,<3", True),
        ("pydantic>=2.14.4", False),  # open above
        ("pydantic>=2.14.4,<4", False),  # admits a major never run
        ("typer>=0.29.2,<1", False),  # a 0.x minor breaks as a major does
        ("typer>=0.29.2,<0.30", True),
    ],
)
def test_the_rule_itself(spec: str, ok: bool) -> None:
    lower, upper = bounds(Requirement(spec))
    assert lower is not None
    assert (upper is not None and upper <= next_major(lower)) is ok
