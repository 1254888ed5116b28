"""The push gate (orchestrator/pushgate.py): what is CI configuration, and when a run's fixes may go to the
PR's repository."""

from __future__ import annotations

import pytest

from orchestrator.config import Settings
from orchestrator.pushgate import HeadOrigin, Touch, ci_touches, held_note, is_ci_path, push_refusal

FORK = HeadOrigin(False, "github says acme/sample#1 comes from a fork")
SAME = HeadOrigin(True, "github says acme/sample#1 comes from acme/sample")


@pytest.mark.parametrize(
    "path",
    [
        ".github/workflows/evil.yml",
        ".github/workflows/sub/x.yaml",
        ".github/actions/setup/action.yml",
        ".gitlab-ci.yml",
        ".gitea/workflows/a.yml",
        ".forgejo/workflows/a.yml",
        ".circleci/config.yml",
        "Jenkinsfile",
        "ci/Jenkinsfile",
        "azure-pipelines.yml",
        "build/azure-pipelines.yml",
    ],
)
def test_ci_configuration_is_known(path: str) -> None:
    assert is_ci_path(path)


@pytest.mark.parametrize(
    "path",
    ["src/app.py", ".github/CODEOWNERS", "docs/.github/workflows.md", "my.gitlab-ci.yml", "workflows/x.yml"],
)
def test_other_paths_are_not_ci(path: str) -> None:
    assert not is_ci_path(path)


def test_the_operator_adds_ci_paths_as_directories_names_and_globs() -> None:
    extra = ["ci/", "Makefile.ci", "deploy/*.yml"]
    assert is_ci_path("ci/run.sh", extra) and is_ci_path("x/Makefile.ci", extra)
    assert is_ci_path("deploy/prod.yml", extra) and not is_ci_path("deploy/prod.txt", extra)
    assert not is_ci_path("ci/run.sh")


def test_jury_ci_paths_setting_is_a_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURY_CI_PATHS", "ci/, deploy/*.yml ,")
    assert Settings().ci_paths == ["ci/", "deploy/*.yml"]


def test_ci_touches_lists_each_commit_and_path() -> None:
    changes = [("a" * 40, ["src/x.py", ".gitlab-ci.yml"]), ("b" * 40, ["Jenkinsfile"])]
    assert ci_touches(changes) == [Touch("a" * 40, ".gitlab-ci.yml"), Touch("b" * 40, "Jenkinsfile")]


def test_a_head_of_the_base_repository_is_pushed_whatever_its_own_commits_touch() -> None:
    assert push_refusal(SAME, [Touch("c" * 40, ".github/workflows/x.yml")], []) is None
    assert push_refusal(SAME, [], []) is None


def test_a_foreign_head_is_refused_and_its_ci_changes_named() -> None:
    assert push_refusal(FORK, [], []) == f"the PR's head is not from the base repository ({FORK.why})"
    why = push_refusal(
        FORK, [Touch("c" * 40, ".github/workflows/evil.yml"), Touch("d" * 40, "Jenkinsfile")], []
    )
    assert why is not None
    assert (
        "commit cccccccccccc, not Jury's, changes CI configuration (.github/workflows/evil.yml and 1 more)"
        in why
    )


def test_jurys_own_fix_touching_ci_is_refused_even_on_a_base_head() -> None:
    why = push_refusal(SAME, [], [Touch("e" * 40, ".github/workflows/ci.yml")])
    assert why == "Jury's fix eeeeeeeeeeee changes CI configuration (.github/workflows/ci.yml)"


def test_the_held_note_says_where_the_fixes_are() -> None:
    note = held_note("why", "run-1")
    assert note.startswith("not pushed: why;") and "fixes.patch" in note and "jury fetch run-1" in note
