"""Publishing an ended run to its PR: one review (a summary and inline comments on the diff's lines) and the
``jury`` check on the PR's head, through the forge clients (``orchestrator/forge``).

What is said comes from the fold (``orchestrator.publishing.plan``); here it is placed and sent. The
forge clients find Jury's earlier review, comments and check of the same run by their markers and update
them, so publishing again never piles up new ones. A finding's line goes inline only when the PR's diff
shows it (the diff is read from the run's repository with git; without it, the forge's own refusal of a
line outside its diff sends that comment to the summary instead).

Two callers: the ``publish`` action (a run with ``publish`` on, once it ended) and ``publish_run`` (``jury
publish SLUG``, the console's re-publish). Both record a ``run.published`` event: what was posted (ids,
URLs) or why publishing failed, never silently. Tokens stay in the forge clients: the recorded error is
redacted of them.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import structlog

from orchestrator.decide import publish_key
from orchestrator.domain import RunPublished
from orchestrator.errors import GitError, JuryError, UsageError
from orchestrator.fold import RunState
from orchestrator.forge import (
    Forge,
    ForgeSettings,
    InlineComment,
    ReviewDraft,
    forge_for,
    load_forge_settings,
)
from orchestrator.logs import add_secret, redact
from orchestrator.publishing import Plan, accepted_count, fix_commits, plan
from orchestrator.run_reader import fold_run, read_state
from orchestrator.store.base import EventStore
from orchestrator.store.files import FileStore, mirror
from workers.isolation.supervise import Interrupted
from workers.isolation.worktree import git
from workers.runtime.actions import handles
from workers.runtime.context import Job, Runtime, finish
from workers.runtime.fix_checks import CheckPlace, fixes_in_history, set_checks

log = structlog.get_logger()

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
MAX_DIFF_FILES = 3000


def diff_lines(repo: Path, base: str, head: str) -> dict[str, dict[int, int | None]] | None:
    """The new-side lines the PR's diff shows per path (added and context lines, three of context as the
    forges show them), each with its old-side number when it is an unchanged line (None when added), or
    None when the repository cannot tell (then the forge decides)."""
    try:
        text = git(
            ["diff", "--no-ext-diff", "--no-color", "--no-renames", "--unified=3", f"{base}...{head}"], repo
        )
    except (GitError, OSError) as exc:
        log.info("publish.no_diff", repo=str(repo), error=str(exc)[:200])
        return None
    lines: dict[str, dict[int, int | None]] = {}
    path: str | None = None
    old = new = old_left = new_left = 0
    for row in text.splitlines():
        if old_left > 0 or new_left > 0:  # inside a hunk: its counts say where it ends
            mark = row[:1]
            if mark in (" ", "") and path is not None:
                lines[path][new] = old
            elif mark == "+" and path is not None:
                lines[path][new] = None
            old, old_left = (old + 1, old_left - 1) if mark in (" ", "", "-") else (old, old_left)
            new, new_left = (new + 1, new_left - 1) if mark in (" ", "", "+") else (new, new_left)
        elif row.startswith("+++ "):
            name = row[4:]
            path = name[2:] if name.startswith("b/") and len(lines) < MAX_DIFF_FILES else None
            if path is not None:
                lines.setdefault(path, {})
        elif found := _HUNK_RE.match(row):
            old, old_left = int(found[1]), int(found[2] if found[2] is not None else 1)
            new, new_left = int(found[3]), int(found[4] if found[4] is not None else 1)
    return lines


def _secrets(settings: ForgeSettings) -> list[str]:
    return [t.get_secret_value() for t in (settings.github_token, settings.gitlab_token) if t is not None]


@dataclass
class _Failures:
    """What went wrong publishing one run, each reason redacted of the forge's tokens (``secrets``, once
    the settings are read) and of every registered secret."""

    slug: str
    key: str
    secrets: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def add(self, what: str, exc: Exception) -> None:
        why = str(exc)
        for secret in self.secrets:
            why = why.replace(secret, "[redacted]")
        self.errors.append(f"{what}: {redact(why)[:600]}")
        log.warning("publish.failed", slug=self.slug, key=self.key, what=what, error=self.errors[-1])


def _post_review(
    forge: Forge, project: str, number: int, head: str, slug: str, draft_plan: Plan
) -> dict[str, Any]:
    """Post (or update) the run's review on the PR; what the event records of it."""
    draft = ReviewDraft(
        run=slug,
        body=draft_plan.body,
        comments=tuple(
            InlineComment(path=n.path, line=n.line, body=n.body, key=n.key, old_line=n.old_line)
            for n in draft_plan.comments
        ),
    )
    review = forge.publish_review(project, number, head, draft)
    counts: dict[str, int] = {}
    for c in review.comments:
        counts[c.action] = counts.get(c.action, 0) + 1
    return {
        "review_id": review.id,
        "review_url": review.url,
        "review_created": review.created,
        "comments": counts,
    }


def publish_state(
    s: RunState,
    key: str,
    *,
    settings: ForgeSettings | None = None,
    client: httpx.Client | None = None,
    repo: Path | None = None,
) -> RunPublished:
    """Publish the ended run ``s`` to its PR and say what happened (the event is not appended here).

    Never raises for the forge: a refusal, a missing token or an unreachable API is a ``run.published``
    with ``ok`` false and the reason. The review and the check are tried each on its own, so a refused
    review still leaves the check set (and recorded), and the other way round.
    """
    base: dict[str, Any] = {"eid": f"{key}:published", "key": key, "state": s.state, "epoch": s.epoch}
    url, head = s.target.url, s.target.head
    if not url or not head:
        why = "the run's target is not a PR/MR URL, so there is no PR to publish to"
        return RunPublished.model_validate({**base, "ok": False, "error": why})
    repo = repo or (Path(s.target.path) if s.target.path else None)  # a worker's own mirror, if given
    fixes = fix_commits(s)
    on_head = bool(fixes) and repo is not None and fixes_in_history(repo, head, fixes)
    diff = diff_lines(repo, s.target.base, head) if repo and s.target.base else None
    draft_plan = plan(s, diff, fixes_on_head=on_head)
    found: dict[str, Any] = {
        "conclusion": draft_plan.conclusion,
        "head": head,
        "off_diff": len(draft_plan.off_diff),
        "fixes_on_head": on_head if accepted_count(s) else None,
    }
    own = client is None
    http = client or httpx.Client()
    failures = _Failures(s.slug, key)
    try:
        settings = settings or load_forge_settings()
        failures.secrets = _secrets(settings)
        for secret in failures.secrets:
            add_secret(secret)  # whatever is logged from here on never shows it
        forge, project, number = forge_for(url, settings, client=http)
        if number is None:
            raise UsageError(f"{url} names no pull or merge request")
        found |= {"forge": forge.kind, "repo": project, "number": number}
    except (JuryError, httpx.HTTPError, ValueError) as exc:
        failures.add("the forge", exc)
        if own:
            http.close()
        return RunPublished.model_validate(
            {**base, **found, "ok": False, "error": "; ".join(failures.errors)}
        )
    # The review and the check each on their own: one refused never keeps the other from being set.
    try:
        found |= _post_review(forge, project, number, head, s.slug, draft_plan)
    except (JuryError, httpx.HTTPError, ValueError) as exc:
        failures.add("the review", exc)
    try:
        found |= set_checks(s, CheckPlace(forge, project, number, head), draft_plan)
    except (JuryError, httpx.HTTPError, ValueError) as exc:
        failures.add("the check", exc)
    finally:
        if own:
            http.close()
    if failures.errors:
        return RunPublished.model_validate(
            {**base, **found, "ok": False, "error": "; ".join(failures.errors)}
        )
    log.info("publish.done", slug=s.slug, key=key, conclusion=draft_plan.conclusion)
    return RunPublished.model_validate({**base, **found, "ok": True})


def publish_run(
    store: EventStore,
    slug: str,
    *,
    files: FileStore | None = None,
    settings: ForgeSettings | None = None,
) -> RunPublished:
    """(Re-)publish run ``slug`` of ``store`` by hand (``jury publish``, the console's button): its review
    and check are updated in place; the ``run.published`` event is appended (and mirrored into ``files``,
    the record under the state directory, when given) and returned.

    ``UsageError`` when the run does not exist, has not ended (a running run's verdict is not known) or
    has no PR (a local branch's run): nothing is appended then.
    """
    s = fold_run(store, slug)
    if s.events == 0:
        raise UsageError(f"no run named {slug} (see `jury runs`)")
    if s.state not in ("converged", "human", "failed", "cancelled"):
        raise UsageError(f"run {slug} is {s.state}: publish it once it has ended")
    if not s.target.url or not s.target.head:  # publish_state's own refusal, before anything is logged:
        # a failure logged would stay in the run's summary for ever, with a retry that cannot succeed
        raise UsageError(
            f"run {slug}'s target is not a PR/MR URL (a local branch): it has no PR to publish to"
        )
    key = f"hand:{publish_key(s).removeprefix('publish:')}:{uuid.uuid4().hex[:8]}"
    event = publish_state(s, key, settings=settings)
    store.append(slug, [event])
    if files is not None:
        mirror(store, files, slug)
    return event


def publish_named(state_dir: Path, redis_url: str | None, slug: str) -> RunPublished:
    """(Re-)publish run ``slug`` as a user names it (``jury publish``, the console): from the fleet's
    live store when ``redis_url`` is set and holds it (or the files record does not), else from the files
    record under ``state_dir``; the outcome is mirrored into that record too."""
    from orchestrator.store.redis_archive import open_store

    files = FileStore(state_dir)
    store: EventStore = files
    if redis_url:
        live = open_store(redis_url)
        if live.exists(slug) or not files.exists(slug):
            store = live
    return publish_run(store, slug, files=files)


@handles("publish")
def publish_action(rt: Runtime, slug: str, key: str, interrupted: Interrupted) -> None:
    """The ``publish`` action: the run has ended (``load_job`` would refuse it for that), so the action
    is read back here; done already or unknown, nothing is sent again."""
    s = read_state(rt.store, slug)[0]
    action = s.actions.get(key)
    if action is None or action.done:
        return rt.wake(slug)
    job = Job(slug=slug, state=s, action=action, interrupted=interrupted)
    try:  # the diff's lines from this host's mirror of the PR (no host reads another's disk)
        # the fixes' commits too: whether the head holds them is read from them (``fix_checks``)
        repo: Path | None = rt.repo(slug, s.target, [s.target.base, s.target.head, *fix_commits(s)])
    except (JuryError, OSError) as exc:
        log.info("publish.no_mirror", slug=slug, error=str(exc)[:200])
        repo = None
    event = publish_state(s, key, repo=repo)
    finish(rt, job, [event])
    return None
