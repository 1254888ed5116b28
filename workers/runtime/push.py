"""The ``push`` action: a run's fixes pushed when it converges (``--push``, ``push = true``), behind the
gate of ``orchestrator.pushgate``.

A local target's reviewed branch is moved to ``jury/<slug>`` in its own repository. A PR URL's fixes go
to the forge as a branch of their own, ``jury/<slug>``, pushed from this host's mirror by sha (Jury never
writes to the PR's own branch), and only when the forge says the PR's head comes from the base repository
and no commit of the range brings CI configuration it must not (``push_refusal``). When the push is
refused, the fixes are stored as the run's ``fixes.patch`` artifact and the run says why.
"""

from __future__ import annotations

import httpx
import structlog

from orchestrator.domain import CommitPushed, TargetEvent
from orchestrator.errors import GitError, JuryError
from orchestrator.forge import FORGES, forge_for, load_forge_settings
from orchestrator.logs import add_secret
from orchestrator.pushgate import FIXES_PATCH, HeadOrigin, Touch, ci_touches, held_note, push_refusal
from orchestrator.spec import Target
from workers.isolation.supervise import Interrupted
from workers.isolation.worktree import git
from workers.runtime.actions import handles
from workers.runtime.context import Job, Runtime, finish, jury_branch, load_job

log = structlog.get_logger()

FORGE_TIMEOUT = 30.0


def head_origin(url: str) -> HeadOrigin:
    """Ask the PR's forge whether its head comes from the base repository. Anything short of the forge's
    own answer (no token to ask with, an error, an answer that does not parse) is a foreign head."""
    try:
        settings = load_forge_settings()
        with httpx.Client(timeout=FORGE_TIMEOUT) as client:
            forge, project, number = forge_for(url, settings, client=client)
            kind = FORGES[forge.kind]
            token = kind.token(settings)
            if token is None:
                variable = kind.token_variable
                return HeadOrigin(False, f"no {variable} to ask {forge.kind} where the head comes from")
            add_secret(token.get_secret_value())
            if number is None:
                return HeadOrigin(False, f"{url} names no pull or merge request")
            pr = forge.get(project, number)
    except (JuryError, httpx.HTTPError, ValueError) as exc:
        return HeadOrigin(False, f"the forge could not be asked: {str(exc)[:300]}")
    if pr.is_fork:
        return HeadOrigin(False, f"{pr.forge} says {project}#{number} comes from a fork")
    return HeadOrigin(True, f"{pr.forge} says {project}#{number} comes from {project}")


def range_changes(job: Job, base: str, tip: str) -> list[tuple[str, list[str]]]:
    """``(commit, paths it changes)`` for every commit of ``base..tip``: a merge against each of its
    parents (``-m``), so what a merge brings in counts too; a rename as the path it leaves and the one
    it makes. One ``git diff-tree`` per commit: ``-z`` keeps any path, whatever bytes it holds, apart."""
    commits = git(["rev-list", f"{base}..{tip}", "--"], job.repo).split()
    changes: list[tuple[str, list[str]]] = []
    for sha in commits:
        out = git(
            ["diff-tree", "-r", "-m", "--root", "--no-commit-id", "--no-renames", "--name-only", "-z", sha],
            job.repo,
        )
        changes.append((sha, [p for p in out.split("\0") if p]))
    return changes


def refusal_for(rt: Runtime, job: Job) -> str | None:
    """Why the fixes of the PR URL run ``job`` must not be pushed, or None."""
    t, s = job.state.target, job.state
    tip = job.action.sha or ""
    jury_commits = {c.sha for c in s.commits if not c.pushed}
    extra = rt.settings.ci_paths
    try:
        changes = range_changes(job, t.base or t.head or "", tip)
    except GitError as exc:
        return f"the commits to push could not be read: {exc.stderr.strip()[-200:]}"
    foreign = ci_touches(((c, p) for c, p in changes if c not in jury_commits), extra)
    own: list[Touch] = ci_touches(((c, p) for c, p in changes if c in jury_commits), extra)
    origin = head_origin(t.url or "")
    log.info("push.head_origin", slug=job.slug, from_base=origin.from_base, why=origin.why)
    return push_refusal(origin, foreign, own)


def hold(rt: Runtime, job: Job, refusal: str) -> None:
    """Keep the fixes as the run's patch artifact instead of pushing them, and say why."""
    t = job.state.target
    patch = git(
        ["format-patch", "--stdout", "--binary", "--no-signature", f"{t.head}..{job.action.sha}"], job.repo
    )
    rt.store.put_artifact(job.slug, FIXES_PATCH, patch.encode())  # for every host (`jury fetch`)
    rt.files.put_artifact(job.slug, FIXES_PATCH, patch.encode())  # and in the run's record, to read
    note = held_note(refusal, job.slug)
    log.warning("push.refused", slug=job.slug, why=refusal)
    finish(rt, job, [TargetEvent(eid=f"{job.action.key}:held", target=Target(push_note=note))])


@handles("push")
def push(rt: Runtime, slug: str, key: str, interrupted: Interrupted) -> None:
    """Push the run's fixes (only when the run was started with --push / ``push = true``)."""
    job = load_job(rt, slug, key, interrupted)
    if job is None:
        return rt.wake(slug)
    t = job.state.target
    if t.url:
        refusal = refusal_for(rt, job)
        if refusal is not None:
            return hold(rt, job, refusal)
        branch = jury_branch(slug)
        argv = ["push", "--quiet", "origin", f"{job.action.sha}:refs/heads/{branch}"]
    else:
        branch = t.branch or ""
        argv = ["push", ".", f"refs/heads/{jury_branch(slug)}:refs/heads/{branch}"]
    try:
        git(argv, job.repo)
    except GitError as exc:
        log.error("push.failed", slug=slug, error=str(exc))
        why = push_failure(branch, slug, exc, remote=bool(t.url))
        return finish(
            rt,
            job,
            [TargetEvent(eid=f"{key}:failed", target=Target(state="failed", state_note=why))],
            ok=False,
        )
    finish(
        rt,
        job,
        [
            CommitPushed(
                eid=f"{key}:pushed",
                sha=job.action.sha or "",
                pushed=True,
                subject=f"pushed {jury_branch(slug)} to {branch}" if not t.url else f"pushed {branch}",
                branch=branch,
            )
        ],
    )


def push_failure(branch: str, slug: str, exc: GitError, remote: bool = False) -> str:
    """Why the run failed, in git's words (its ``! [rejected]`` line when it printed one), and where the
    fixes are: nothing of them is lost, and ``--resume`` pushes them once the branch can move."""
    lines = [line.strip() for line in exc.stderr.splitlines() if line.strip()]
    said = next(
        (line for line in lines if line.startswith("! [")), lines[-1] if lines else f"exit {exc.code}"
    )
    where = f"`jury fetch {slug}` makes them a local branch" if remote else f"they are on {jury_branch(slug)}"
    return f"the fixes could not be pushed to {branch}: {said[:300]}; {where}"
