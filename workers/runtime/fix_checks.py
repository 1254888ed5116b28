"""Whether a commit holds a run's accepted fixes, and the ``jury`` checks that say so on the forge.

A check describes its commit. The fixes of a run are commits on top of the reviewed head (on
``jury/<slug>``), so the head itself lacks them unless its history brings the same patches (the fixes
merged or cherry-picked into the PR, then reviewed again). That is read with git from the run's
repository on this host; without one, or when git cannot tell, the head is taken to lack them: the check
is then never kinder than the truth (``orchestrator.publishing.verdict``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from orchestrator.errors import GitError
from orchestrator.fold import RunState
from orchestrator.forge import FORGES, Forge
from orchestrator.publishing import Plan, pushed_fixes, tip_title
from workers.isolation.worktree import git

log = structlog.get_logger()


def fixes_in_history(repo: Path, commit: str, fixes: list[str]) -> bool:
    """Every commit of ``fixes`` is in ``commit``'s history, itself or as the same patch (``git cherry``
    compares patch ids: a fix cherry-picked or rebased counts). False when git cannot tell."""
    if not fixes:
        return False
    try:
        for fix in fixes:
            if _is_ancestor(repo, fix, commit):
                continue
            said = git(["cherry", commit, fix, f"{fix}^"], repo).split()
            if said[:1] != ["-"]:  # "+ sha": no equivalent patch upstream
                return False
    except (GitError, OSError) as exc:
        log.info("publish.fixes_unknown", repo=str(repo), commit=commit, error=str(exc)[:200])
        return False
    return True


def _is_ancestor(repo: Path, older: str, newer: str) -> bool:
    try:
        git(["merge-base", "--is-ancestor", older, newer], repo)
    except GitError as exc:
        if exc.code == 1:  # answered: not an ancestor
            return False
        raise
    return True


@dataclass
class CheckPlace:
    """Where a run's checks go on its forge: the project, the PR's number and its head."""

    forge: Forge
    project: str
    number: int
    head: str


def set_checks(s: RunState, where: CheckPlace, draft: Plan) -> dict[str, Any]:
    """Set the ``jury`` check on the reviewed head and, when the head lacks the accepted fixes and they
    were pushed (``jury/<slug>`` on the forge), a ``success`` check on the fixes' commit, which holds
    them. Returns what the ``run.published`` event records; a forge's refusal raises."""
    head_ref = FORGES[where.forge.kind].head_ref_format.format(number=where.number)
    check = where.forge.set_check(
        where.project,
        where.head,
        name="jury",
        conclusion=draft.conclusion,
        title=draft.title,
        summary=draft.check_summary,
        ref=head_ref,
    )
    found: dict[str, Any] = {"check_kind": check.kind, "check_id": check.id, "check_url": check.url}
    pushed = pushed_fixes(s)
    if draft.conclusion != "action_required" or pushed is None:
        return found
    sha, branch = pushed
    tip = where.forge.set_check(
        where.project,
        sha,
        name="jury",
        conclusion="success",
        title=tip_title(s),
        summary=draft.check_summary,
        ref=branch,
    )
    return found | {"tip": sha, "tip_check_id": tip.id}
