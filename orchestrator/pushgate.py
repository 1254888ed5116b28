"""Whether a run's fixes may be pushed to a PR's repository (pure; git and the forge are in
workers/runtime/push.py).

``jury review <PR URL> --push`` (and sweeps and schedules with ``push``) push the PR's head with Jury's
fixes on top to the base repository as ``jury/<slug>``. A push runs the base repository's CI on that
branch, with its secrets: a fork's head that adds ``.github/workflows/evil.yml`` (``on: push``), or just
changes code a base workflow runs on push, would run inside the base repository (the "pwn request").
So the push is gated:

- Only a head the forge says comes from the base repository is pushed. Without the forge's answer (no
  token, an error, a malformed answer) the head is foreign.
- A commit not written by Jury in ``<merge-base>..<pushed head>`` that touches CI configuration refuses
  the push when the head is not from the base repository (said in its own words, beside the first rule).
- Jury's own commits never touch CI configuration: a fix that does (a judge talked into it by the code
  it read) refuses the push whatever the head.

A refused push is no failure of the run: the fixes are kept as the run's patch artifact and the run's
end note (and so the PR's review and check) says why they were not pushed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

# CI configuration: a directory prefix (ends with "/", from the top of the tree), a file name (no "/",
# matched at any depth: Jenkinsfile and azure-pipelines.yml live anywhere the CI is pointed at), or a
# path or glob from the top. The operator adds to these (JURY_CI_PATHS); nobody takes any away.
DEFAULT_CI_PATHS: tuple[str, ...] = (
    ".github/workflows/",
    ".github/actions/",  # composite actions: the workflows run them
    ".gitlab-ci.yml",
    ".gitea/workflows/",
    ".forgejo/",
    ".circleci/",
    "Jenkinsfile",
    "azure-pipelines.yml",
)
FIXES_PATCH = "fixes.patch"  # the run's artifact holding the fixes when they are not pushed


@dataclass(frozen=True)
class HeadOrigin:
    """What the forge said of the PR's head: from the base repository or not, and in what words."""

    from_base: bool
    why: str


@dataclass(frozen=True)
class Touch:
    """A commit of the pushed range and a CI configuration path it changes."""

    sha: str
    path: str


def is_ci_path(path: str, extra: Iterable[str] = ()) -> bool:
    """Whether ``path`` (repository-relative, ``/``-separated) is CI configuration."""
    clean = path.strip().lstrip("/")
    name = clean.rsplit("/", 1)[-1]
    for pattern in (*DEFAULT_CI_PATHS, *extra):
        pattern = pattern.strip().lstrip("/")
        if not pattern:
            continue
        if pattern.endswith("/"):
            if clean.startswith(pattern):
                return True
        elif "/" not in pattern:
            if fnmatchcase(name, pattern):
                return True
        elif fnmatchcase(clean, pattern) or clean.startswith(pattern + "/"):
            return True
    return False


def ci_touches(changes: Iterable[tuple[str, Sequence[str]]], extra: Iterable[str] = ()) -> list[Touch]:
    """The CI configuration paths among ``(commit, paths it changes)``, in order."""
    patterns = tuple(extra)
    return [Touch(sha, p) for sha, paths in changes for p in paths if is_ci_path(p, patterns)]


def push_refusal(origin: HeadOrigin, foreign: Sequence[Touch], own: Sequence[Touch]) -> str | None:
    """Why the fixes must not be pushed, or None when they may.

    ``foreign``: CI paths touched by commits not written by Jury; ``own``: by Jury's own commits.
    """
    reasons: list[str] = []
    if not origin.from_base:
        reasons.append(f"the PR's head is not from the base repository ({origin.why})")
        if foreign:
            first = foreign[0]
            more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
            reasons.append(
                f"commit {first.sha[:12]}, not Jury's, changes CI configuration ({first.path}{more})"
            )
    if own:
        reasons.append(f"Jury's fix {own[0].sha[:12]} changes CI configuration ({own[0].path})")
    return "; ".join(reasons) or None


def held_note(refusal: str, slug: str) -> str:
    """The run's word on fixes that were not pushed: why, and where they are instead."""
    return (
        f"not pushed: {refusal}; the fixes are the run's {FIXES_PATCH} artifact "
        f"(`jury fetch {slug}` makes them a local branch)"
    )
