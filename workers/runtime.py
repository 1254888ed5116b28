"""What the tasks do, as plain functions over a ``Runtime``: testable without Celery.

Each function reads the run's log, folds it, does its one piece of work and appends its result events
in one batch, ending with ``action.done``; then it kicks the coordinator. Event ids derive from the
action key, so a redelivered task that runs again appends nothing new.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import structlog

from orchestrator.config import Settings
from orchestrator.decide import Dispatch, Emit, Integrate, decide
from orchestrator.domain import (
    TERMINAL_STATES,
    ActionDispatched,
    ActionDone,
    AgentAlive,
    AgentLaunch,
    AgentReport,
    AgentSpec,
    AgentWrote,
    CommitPushed,
    Event,
    FindingRaised,
    FindingRefused,
    FindingReopened,
    FindingReproduced,
    FindingResolved,
    FindingTurn,
    JudgeSession,
    RefuteVerdict,
    ReplyAnswered,
    ReplySent,
    Role,
    RoundStart,
    VerifyRan,
)
from orchestrator.errors import GitError
from orchestrator.fold import Dispatched, RunState, apply, fold, run_json
from orchestrator.parse import (
    JudgeVerdict,
    acceptance_refusal,
    parse_reply,
    parse_review,
    parse_verdict,
    summarize,
)
from orchestrator.prompts import SettledItem, reply_prompt, triage_prompt
from orchestrator.store.base import EventStore
from orchestrator.store.files import FileStore
from workers.agents.cli import AgentRun, run_cli_agent
from workers.verify import signals_of, verify_fix
from workers.worktree import Worktrees, changed_paths, commit_deterministic, diff_patch, git, update_ref

log = structlog.get_logger()

Send = Callable[[str, str, str], None]  # (kind, slug, key): enqueue the task of that kind


@dataclass
class Runtime:
    settings: Settings
    store: EventStore  # the live log (Redis)
    files: FileStore  # the plain-file record under settings.dir
    send: Send
    kick: Callable[[str], None]  # enqueue coordinate(slug)

    @property
    def worktrees(self) -> Worktrees:
        return Worktrees(self.settings.dir / "worktrees")

    def run_dir(self, slug: str) -> Path:
        d = self.settings.dir / "runs" / slug
        d.mkdir(parents=True, exist_ok=True)
        return d


def jury_branch(slug: str) -> str:
    return f"jury/{slug}"


# --- the coordinator ---------------------------------------------------------------------------


def coordinate(rt: Runtime, slug: str) -> RunState:
    """Fold the log, append what decide emits until it only dispatches, dispatch each action once."""
    with rt.store.lock(slug):
        state = fold(rt.store.read(slug), slug)
        for _ in range(200):
            actions = decide(state)
            emits = [a.event for a in actions if isinstance(a, Emit)]
            for step in (a for a in actions if isinstance(a, Integrate)):
                emits += integrate(rt, state, step.findings, step.sha)
            if not emits:
                break
            for event in emits:
                if isinstance(event, RoundStart) and event.prompt_file:
                    rt.store.put_artifact(slug, event.prompt_file, event.prompt.encode())
            rt.store.append(slug, emits)
            for event in emits:
                apply(state, event)
        for d in (a for a in actions if isinstance(a, Dispatch)):
            ev = ActionDispatched(
                eid=f"dispatch:{d.key}",
                key=d.key,
                kind=d.kind,
                round=d.round,
                epoch=state.epoch,
                agent=d.agent,
                finding=d.finding,
                findings=d.findings,
                sha=d.sha,
            )
            rt.store.append(slug, [ev])
            apply(state, ev)
            rt.send(d.kind, slug, d.key)
            log.info("action.dispatched", slug=slug, key=d.key, kind=d.kind)
        sync_files(rt, slug, state)
    if state.state in TERMINAL_STATES:
        log.info("run.ended", slug=slug, state=state.state, reason=state.target.state_note)
    return state


def sync_files(rt: Runtime, slug: str, state: RunState | None = None) -> RunState:
    """Mirror the live log into the plain-file record and rewrite ``run.json`` (the fold)."""
    events = rt.store.read(slug)
    if state is None or state.events != len({e.eid for e in events}):
        state = fold(events, slug)
    rt.files.append(slug, events)
    doc = run_json(state)
    rt.files.write_state(slug, doc)
    rt.store.write_state(slug, doc)
    return state


# --- shared pieces of the agent tasks ------------------------------------------------------------


@dataclass
class Job:
    """One dispatched action, read back from the log."""

    slug: str
    state: RunState
    action: Dispatched

    @property
    def spec(self) -> AgentSpec:
        assert self.state.config is not None and self.action.agent is not None
        return self.state.config.agents[self.action.agent]

    @property
    def repo(self) -> Path:
        return Path(self.state.target.path or ".")

    def done(self, ok: bool = True) -> ActionDone:
        return ActionDone(eid=f"{self.action.key}:done", key=self.action.key, ok=ok)


def load_job(rt: Runtime, slug: str, key: str) -> Job | None:
    """The action to run, or None when it already ran or the run has ended (then it is marked done)."""
    state = fold(rt.store.read(slug), slug)
    action = state.actions.get(key)
    if action is None:
        log.warning("action.unknown", slug=slug, key=key)
        return None
    if action.done:
        log.info("action.already_done", slug=slug, key=key)
        return None
    job = Job(slug=slug, state=state, action=action)
    if state.state in TERMINAL_STATES:
        rt.store.append(slug, [job.done(ok=False)])
        return None
    return job


def safe_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", key)


@contextmanager
def agent_worktree(rt: Runtime, job: Job, sha: str) -> Iterator[Path]:
    with rt.worktrees.checkout(job.repo, sha, name=f"{job.slug}.{safe_name(job.action.key)}") as wt:
        yield wt


def run_agent(
    rt: Runtime,
    job: Job,
    *,
    role: Role,
    prompt: str,
    worktree: Path,
    name: str,
    session: str | None = None,
    resume: bool = False,
) -> AgentRun:
    """Run the job's agent, with ``agent.launch`` first and ``agent.alive`` while it runs."""
    cfg = job.state.config
    assert cfg is not None and job.action.agent is not None
    agent, rnd, key = job.action.agent, job.action.round, job.action.key
    rt.store.append(
        job.slug,
        [
            AgentLaunch(
                eid=f"{key}:launch", agent=agent, round=rnd, role=role, key=key, finding=job.action.finding
            )
        ],
    )
    ticks = 0

    def alive(seconds: float, quiet: float) -> None:
        nonlocal ticks
        ticks += 1
        rt.store.append(
            job.slug,
            [
                AgentAlive(
                    eid=f"{key}:alive:{ticks}",
                    agent=agent,
                    round=rnd,
                    seconds=round(seconds, 1),
                    quiet_seconds=round(quiet, 1),
                    key=key,
                )
            ],
        )

    spec = job.spec
    run = run_cli_agent(
        spec,
        role=role,
        prompt=prompt,
        worktree=worktree,
        out_dir=rt.run_dir(job.slug),
        name=name,
        session=session,
        resume=resume,
        timeout=cfg.timeout or spec.default_timeout(),
        grace=rt.settings.kill_grace,
        tick_every=cfg.alive_every,
        on_tick=alive,
    )
    for suffix, data in ((".stdout.txt", run.stdout), (".stderr.txt", run.stderr)):
        rt.store.put_artifact(job.slug, name + suffix, data.encode())
    log.info(
        "agent.ran",
        slug=job.slug,
        key=key,
        agent=agent,
        exit_code=run.proc.exit_code,
        timed_out=run.proc.timed_out,
        seconds=round(run.proc.seconds, 1),
    )
    return run


def run_failure(run: AgentRun) -> str | None:
    """Why the agent run failed, or None when it ran to completion."""
    p = run.proc
    if p.error:
        return p.error
    if p.timed_out:
        return f"timed out (killed with its process group after {p.seconds:.0f}s)"
    if p.cancelled:
        return "cancelled"
    return None


def stderr_tail(run: AgentRun) -> str:
    return run.stderr.strip()[-300:]


def finish(rt: Runtime, job: Job, events: list[Event], ok: bool = True) -> None:
    rt.store.append(job.slug, [*events, job.done(ok)])
    rt.kick(job.slug)


# --- review -----------------------------------------------------------------------------------


def review(rt: Runtime, slug: str, key: str) -> None:
    job = load_job(rt, slug, key)
    if job is None:
        return rt.kick(slug)
    a, s = job.action, job.state
    agent, n = a.agent or "", a.round
    rnd = s.round(n)
    assert rnd is not None
    name = f"round-{n}.{agent}"
    with agent_worktree(rt, job, a.sha or rnd.sha) as wt:
        run = run_agent(rt, job, role="reviewer", prompt=rnd.prompt, worktree=wt, name=name)
        wrote = changed_paths(wt)
    events: list[Event] = []
    if wrote:
        events.append(AgentWrote(eid=f"{key}:wrote", agent=agent, round=n, paths=wrote))
    parsed = parse_review(run.report)
    error = run_failure(run)
    if error is None and parsed.verdict == "unparseable":
        code = run.proc.exit_code
        error = (
            f"exited {code}: {stderr_tail(run)}"
            if code
            else "nothing parseable in its report: no FINDING/WHERE pair and no stop token"
        )
    verdict = "error" if error else parsed.verdict
    events.append(
        AgentReport(
            eid=f"{key}:report",
            agent=agent,
            round=n,
            verdict=verdict,
            seconds=round(run.proc.seconds, 1),
            summary=error or summarize(run.report),
            report=run.report[-20000:],
            session_id=run.session_id,
            raw_file=f"{name}.stdout.txt",
            raw_bytes=run.proc.stdout_bytes,
            role="reviewer",
            key=key,
            error=error,
            exit_code=run.proc.exit_code,
        )
    )
    if not error:
        for i, f in enumerate(parsed.findings, start=1):
            fid = f"r{n}-{agent}-{i}"
            events.append(
                FindingRaised(
                    eid=f"raised:{fid}", id=fid, round=n, agent=agent, claim=f.claim, loc=f.loc, body=f.body
                )
            )
    finish(rt, job, events)


# --- triage -----------------------------------------------------------------------------------


def triage(rt: Runtime, slug: str, key: str) -> None:
    job = load_job(rt, slug, key)
    if job is None:
        return rt.kick(slug)
    a, s = job.action, job.state
    assert a.finding is not None and a.sha is not None and a.agent is not None
    f = s.findings[a.finding]
    judge, n = a.agent, a.round
    name = f"triage.{f.id}.{f.triages}"
    prompt = triage_prompt(
        finding_id=f.id,
        agent=f.agent,
        claim=f.claim,
        loc=f.loc,
        body=f.body,
        base=s.target.base or "",
        turns=[(t.who, t.text) for t in f.turns],
        refusals=f.refusals,
    )
    with agent_worktree(rt, job, a.sha) as wt:
        run = run_agent(rt, job, role="judge", prompt=prompt, worktree=wt, name=name)
        patch = diff_patch(wt)
    events: list[Event] = []
    verdict = parse_verdict(run.report)
    error = run_failure(run)
    events.append(
        AgentReport(
            eid=f"{key}:report",
            agent=judge,
            round=n,
            verdict="error" if error or verdict is None else "clean",
            seconds=round(run.proc.seconds, 1),
            summary=error or summarize(run.report),
            report=run.report[-20000:],
            session_id=run.session_id,
            raw_file=f"{name}.stdout.txt",
            raw_bytes=run.proc.stdout_bytes,
            role="judge",
            key=key,
            error=error,
            exit_code=run.proc.exit_code,
        )
    )
    if run.session_id:
        events.append(JudgeSession(eid=f"{key}:session", agent=judge, session_id=run.session_id, round=n))

    def refuse(reason: str) -> None:
        events.append(FindingRefused(eid=f"{key}:refused", id=f.id, reason=reason, who=judge, round=n))

    if error:
        refuse(f"the judge could not run: {error}")
    elif verdict is None:
        refuse("the judge's answer has no JSON object with a verdict key")
    elif verdict.verdict == "accepted":
        refusal = acceptance_refusal(verdict) or ("" if patch else "accepted, but the judge changed no file")
        if refusal:
            refuse(refusal)
        else:
            events += accept(rt, job, patch, verdict)
    else:
        if verdict.reproduced:
            events.append(
                FindingReproduced(
                    eid=f"{key}:reproduced",
                    id=f.id,
                    evidence=verdict.evidence or "",
                    test=verdict.test,
                    who=judge,
                )
            )
        reason = verdict.reason or ""
        if verdict.evidence:
            reason = f"{reason} Evidence: {verdict.evidence}".strip()
        events.append(
            FindingResolved(
                eid=f"{key}:resolved",
                id=f.id,
                verdict=verdict.verdict,
                reason=reason or "(no reason given)",
                who=judge,
            )
        )
    finish(rt, job, events)


def accept(rt: Runtime, job: Job, patch: bytes, verdict: JudgeVerdict) -> list[Event]:
    """An acceptance that passed the gate: keep its patch, then prove it with its own test.

    The judge's ``test_command`` must pass on the fixed tree and fail with the fix reverted (the test
    kept), and the fix must not weaken existing tests. A fix that fails this is refuted without any model
    and goes back to the judge with the evidence; it never reaches the run's tree.
    """
    a, s = job.action, job.state
    f = s.findings[a.finding or ""]
    key, judge = a.key, a.agent or ""
    patch_name = f"patches/{f.id}.{f.triages}.patch"
    rt.store.put_artifact(job.slug, patch_name, patch)
    events: list[Event] = [
        FindingReproduced(
            eid=f"{key}:reproduced", id=f.id, evidence=verdict.evidence or "", test=verdict.test, who=judge
        ),
        FindingResolved(
            eid=f"{key}:resolved",
            id=f.id,
            verdict="accepted",
            reason=verdict.reason or "",
            test=verdict.test,
            test_command=verdict.test_command,
            who=judge,
            patch=patch_name,
        ),
    ]
    cfg = s.config
    if cfg is None or not cfg.verify:
        return events
    check = verify_fix(
        job.repo,
        a.sha or "",
        patch,
        verdict.test_command or "",
        worktrees=rt.worktrees,
        name=f"{job.slug}.{safe_name(key)}.verify",
        timeout=cfg.timeout or job.spec.default_timeout(),
        out_dir=rt.run_dir(job.slug),
    )
    for i, run in enumerate(check.runs):
        events.append(
            VerifyRan(
                eid=f"{key}:verify:{i}",
                id=f.id,
                command=run.command,
                tree=run.tree,
                sha=run.sha,
                exit_code=run.exit_code,
                seconds=round(run.seconds, 2),
                output_tail=run.output_tail[-2000:],
                error=run.error,
            )
        )
    if not check.ok:
        reason = check.reason or "verification failed"
        signal = signals_of(check.runs, "verification")
        events += [
            RefuteVerdict(
                eid=f"{key}:refuted",
                id=f.id,
                outcome="refuted",
                reason=reason,
                source="verification",
                signal=signal[-1].model_dump() if signal else None,
                cost_usd=0.0,
            ),
            FindingReopened(eid=f"{key}:reopened", id=f.id, reason=reason, who="jury", source="verification"),
        ]
    return events


def integrate(rt: Runtime, state: RunState, findings: list[str], sha: str) -> list[Event]:
    """Commit accepted fixes onto ``sha`` in the given order, deterministically, and move ``jury/<slug>``.

    A patch that no longer applies reopens its finding for a new triage against the new tree.
    Runs in the coordinator, under the run's lock.
    """
    slug, repo = state.slug, Path(state.target.path or ".")
    branch, tip = jury_branch(slug), sha
    events: list[Event] = []
    for fid in findings:
        f = state.findings[fid]
        eid = f"integrate:{fid}:{f.version}"
        patch = rt.store.get_artifact(slug, f.patch or "")
        if patch is None:
            events.append(
                FindingReopened(
                    eid=eid,
                    id=fid,
                    reason=f"its patch {f.patch} is missing from the store",
                    who="jury",
                    source="integration",
                )
            )
            continue
        subject = f"jury: fix {f.id}: {f.claim}"[:200]
        message = f"{subject}\n\nWHERE: {f.loc}\nTest: {f.test}\nTest command: {f.test_command}\n"
        try:
            with tempfile.TemporaryDirectory(prefix="jury-commit-") as work:
                new = commit_deterministic(repo, parent=tip, patch=patch, message=message, work=Path(work))
        except GitError as exc:
            events.append(
                FindingReopened(
                    eid=eid,
                    id=fid,
                    who="jury",
                    source="integration",
                    reason=f"its fix no longer applies on {tip[:12]}: {exc.stderr.strip()[-300:]}",
                )
            )
            continue
        tip = new
        events.append(
            CommitPushed(eid=eid, sha=new, pushed=False, subject=subject, branch=branch, finding=fid)
        )
    if tip != sha:
        update_ref(repo, f"refs/heads/{branch}", tip)
    return events


# --- reply ------------------------------------------------------------------------------------


def reply(rt: Runtime, slug: str, key: str) -> None:
    job = load_job(rt, slug, key)
    if job is None:
        return rt.kick(slug)
    a, s = job.action, job.state
    agent, n = a.agent or "", a.round
    spec = job.spec
    fs = [s.findings[i] for i in a.findings if i in s.findings]
    outcomes = [SettledItem(id=f.id, verdict=f.status, claim=f.claim, loc=f.loc, reason=f.reason) for f in fs]
    prompt = reply_prompt(round_n=n, agent=agent, outcomes=outcomes)
    session = s.sessions.get(agent)
    resume = bool(session and spec.resume_argv)
    name = f"reply-{n}.{agent}.{sum(1 for r in s.replies if r.agent == agent) + 1}"
    with agent_worktree(rt, job, s.tip or "") as wt:
        run = run_agent(
            rt,
            job,
            role="reply",
            prompt=prompt,
            worktree=wt,
            name=name,
            session=session if resume else None,
            resume=resume,
        )
    error = run_failure(run)
    contestable = {f.id for f in fs if f.status in ("rejected", "deferred")}
    contests = [] if error else [c for c in parse_reply(run.report).contests if c.id in contestable]
    events: list[Event] = [
        ReplySent(
            eid=f"{key}:sent",
            agent=agent,
            round=n,
            resumed=resume,
            session_id=session,
            text=prompt,
            findings=[f.id for f in fs],
        )
    ]
    for c in contests:
        events.append(FindingTurn(eid=f"{key}:turn:{c.id}", id=c.id, agent=agent, who=agent, text=c.text))
    events.append(
        ReplyAnswered(
            eid=f"{key}:answered",
            agent=agent,
            round=n,
            verdict="error" if error else ("contested" if contests else "clean"),
            seconds=round(run.proc.seconds, 1),
            report=run.report[-20000:],
            contests=contests,
            error=error,
        )
    )
    finish(rt, job, events)


# --- push -------------------------------------------------------------------------------------


def push(rt: Runtime, slug: str, key: str) -> None:
    """Push the run's fixes to the reviewed branch (only when the run was started with --push)."""
    job = load_job(rt, slug, key)
    if job is None:
        return rt.kick(slug)
    t = job.state.target
    branch = t.branch or ""
    remote = t.url and "origin" or "."
    try:
        git(["push", remote, f"refs/heads/{jury_branch(slug)}:refs/heads/{branch}"], job.repo)
    except GitError as exc:
        log.error("push.failed", slug=slug, error=str(exc))
        return finish(rt, job, [], ok=False)
    finish(
        rt,
        job,
        [
            CommitPushed(
                eid=f"{key}:pushed",
                sha=job.action.sha or "",
                pushed=True,
                subject=f"pushed {jury_branch(slug)} to {branch}",
                branch=branch,
            )
        ],
    )


TASKS: dict[str, Callable[[Runtime, str, str], None]] = {
    "review": review,
    "triage": triage,
    "reply": reply,
    "push": push,
}


def failure_events(job: Job, exc: BaseException) -> list[Event]:
    """What a task that crashed leaves in the log, so the run never waits on it forever."""
    a, reason = job.action, f"the worker failed: {type(exc).__name__}: {exc}"[:500]
    if a.kind == "review":
        return [
            AgentReport(
                eid=f"{a.key}:report",
                agent=a.agent or "",
                round=a.round,
                verdict="error",
                seconds=0.0,
                summary=reason,
                role="reviewer",
                key=a.key,
                error=reason,
            )
        ]
    if a.kind == "triage":
        return [
            FindingRefused(
                eid=f"{a.key}:refused", id=a.finding or "", reason=reason, who=a.agent or "", round=a.round
            )
        ]
    if a.kind == "reply":
        return [
            ReplySent(
                eid=f"{a.key}:sent",
                agent=a.agent or "",
                round=a.round,
                resumed=False,
                text="",
                findings=a.findings,
            ),
            ReplyAnswered(
                eid=f"{a.key}:answered",
                agent=a.agent or "",
                round=a.round,
                verdict="error",
                seconds=0.0,
                error=reason,
            ),
        ]
    return []


def run_task(rt: Runtime, kind: str, slug: str, key: str) -> None:
    """Run one task; a crash is recorded against its action instead of leaving the run waiting."""
    try:
        TASKS[kind](rt, slug, key)
    except Exception as exc:
        log.exception("task.crashed", slug=slug, key=key, kind=kind)
        state = fold(rt.store.read(slug), slug)
        action = state.actions.get(key)
        if action is not None and not action.done:
            job = Job(slug=slug, state=state, action=action)
            finish(rt, job, failure_events(job, exc), ok=False)
