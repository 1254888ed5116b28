"""The agent tasks: review, triage (with mechanical verification), reply, refute (push:
workers/runtime/push.py).

Each is ``(runtime, slug, key, interrupted)``: it reads its action back from the log by key and ends by
appending its result events in one batch (``finish``).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

import structlog

from orchestrator.domain import (
    AgentReport,
    AgentWrote,
    Event,
    FindingRaised,
    FindingRefused,
    FindingReopened,
    FindingReproduced,
    FindingResolved,
    FindingTurn,
    JudgeSession,
    ReplyAnswered,
    ReplySent,
    VerifyRan,
    refutation_event,
)
from orchestrator.fold import FindingState, RunState
from orchestrator.logs import redactor
from orchestrator.parse import (
    JudgeVerdict,
    acceptance_refusal,
    parse_reply,
    parse_review,
    parse_verdict,
    summarize,
)
from orchestrator.prompts import SettledItem, refute_prompt, reply_prompt, triage_prompt
from orchestrator.publishing import JUDGE_COULD_NOT_RUN
from orchestrator.refute.commands import classify_command, commands_in_task
from orchestrator.refute.families import independence, spec_family
from orchestrator.refute.record import RefutationRecord
from orchestrator.refute.signals import Signal, gate
from orchestrator.refute.verdicts import ParsedRefutation, parse_refutation
from orchestrator.spec import agent_timeout
from orchestrator.transcript import broken_reason, codex_failure
from workers.agents.patch_secrets import FIX_HOLDS_SECRET, fix_holds_secret, patch_holds_secret
from workers.agents.run import AgentRun
from workers.isolation.names import safe_name
from workers.isolation.supervise import Interrupted
from workers.isolation.worktree import changed_paths, commit_deterministic, diff_patch
from workers.runtime.actions import HANDLERS, handles
from workers.runtime.context import (
    Job,
    Runtime,
    agent_worktree,
    call_cost,
    finish,
    holder_name,
    load_job,
    log_refutation,
    run_failure,
    stderr_tail,
)
from workers.runtime.seating import run_agent
from workers.verification.runs import CommandRun, signals_of
from workers.verification.verify import run_checks, verify_fix
from workers.verification.verify_record import ArtifactCache, table_event

log = structlog.get_logger()


def report_event(
    job: Job, run: AgentRun, name: str, verdict: Literal["clean", "found", "error"], error: str | None
) -> AgentReport:
    """The ``agent.report`` of the job's agent run, in codejury's shape."""
    a = job.action
    return AgentReport(
        eid=f"{a.key}:report",
        agent=a.agent or "",
        round=a.round,
        verdict=verdict,
        seconds=round(run.proc.seconds, 1),
        summary=error or summarize(run.report),
        report=run.report[-20000:],
        session_id=run.session_id,
        raw_file=f"{name}.stdout.txt",
        raw_bytes=run.proc.stdout_bytes,
        role="judge" if a.kind == "triage" else "reviewer",
        key=a.key,
        error=error,
        exit_code=run.proc.exit_code,
        model=run.model,
        host=this_host() if run.session_id else None,
    )


def resumable(s: RunState, agent: str, can_resume: bool, host: str) -> bool:
    """Whether ``agent``'s reply resumes its review's session on ``host``.

    A session lives in the agent's own state (its HOME's state dirs) on the host that ran it: another
    host asks afresh, with a reply prompt that holds the outcomes it needs, rather than resuming a session
    it does not have (a log written before hosts were recorded resumes, as it always did).
    """
    held_here = s.session_hosts.get(agent) in (None, host)
    return bool(s.sessions.get(agent) and can_resume and held_here)


def this_host() -> str:
    """This host's name: where an agent's session (kept in its HOME's state dirs) can be resumed."""
    return socket.gethostname()


# --- review -----------------------------------------------------------------------------------


@handles("review")
def review(rt: Runtime, slug: str, key: str, interrupted: Interrupted) -> None:
    job = load_job(rt, slug, key, interrupted)
    if job is None:
        return rt.wake(slug)
    a, s = job.action, job.state
    agent, n = a.agent or "", a.round
    rnd = s.round(n)
    assert rnd is not None
    name = f"round-{n}.{agent}"
    with agent_worktree(rt, job, a.sha or rnd.sha) as wt:
        run = run_agent(rt, job, role="reviewer", prompt=rnd.prompt, worktree=wt, name=name)
        # What it wrote, asked of git unless the kernel held its tree read-only (a sandboxed CLI reviewer)
        wrote = [] if run.tree_untouched else changed_paths(wt)
    events: list[Event] = []
    if wrote:
        events.append(AgentWrote(eid=f"{key}:wrote", agent=agent, round=n, paths=wrote))
    parsed = parse_review(run.report)
    error = run_failure(run)
    if error is None and parsed.verdict == "unparseable":
        code = run.proc.exit_code
        error = (
            f"exited {code}: {codex_failure(run.stdout) or stderr_tail(run)}"  # codex --json: on stdout
            if code
            else "nothing parseable in its report: no FINDING/WHERE pair and no stop token"
        )
    verdict: Literal["clean", "found", "error"] = (
        "error" if error or parsed.verdict == "unparseable" else parsed.verdict
    )
    if verdict == "clean" and (broken := broken_reason(run.commands, agent)):
        # It saw nothing through its commands: "nothing found" from it is no review and no vote to
        # converge. Findings from such a run still go to the judge, who must reproduce them anyway.
        verdict, error = "error", broken
    events.append(report_event(job, run, name, verdict, error))
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


@handles("triage")
def triage(rt: Runtime, slug: str, key: str, interrupted: Interrupted) -> None:
    job = load_job(rt, slug, key, interrupted)
    if job is None:
        return rt.wake(slug)
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
        refusals=[*f.refusals, *f.reopens],
    )
    with agent_worktree(rt, job, a.sha) as wt:
        run = run_agent(rt, job, role="judge", prompt=prompt, worktree=wt, name=name)
        secrets = redactor()  # the judge's among them: run_agent registered them
        leaked = fix_holds_secret(wt, secrets)  # before staging: a staged file is a blob in the repository
        patch = b"" if leaked else diff_patch(wt)
        leaked = leaked or patch_holds_secret(patch, secrets)
    events: list[Event] = []
    verdict = parse_verdict(run.report)
    error = run_failure(run)
    if error is None and verdict is not None and verdict.verdict == "rejected":
        error = broken_reason(run.commands, judge)  # "does not reproduce" when nothing could run
    events.append(report_event(job, run, name, "error" if error or verdict is None else "clean", error))
    if run.session_id:
        events.append(JudgeSession(eid=f"{key}:session", agent=judge, session_id=run.session_id, round=n))

    def refuse(reason: str) -> None:
        events.append(FindingRefused(eid=f"{key}:refused", id=f.id, reason=reason, who=judge, round=n))

    if error:
        refuse(f"{JUDGE_COULD_NOT_RUN}: {error}")
    elif verdict is None:
        refuse("the judge's answer has no JSON object with a verdict key")
    elif verdict.verdict == "accepted" and leaked:  # a patch cannot be redacted: it would be pushed as is
        events.append(
            FindingResolved(
                eid=f"{key}:resolved", id=f.id, verdict="deferred", reason=FIX_HOLDS_SECRET, who="jury"
            )
        )
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
        name=holder_name(job, "verify"),
        timeout=agent_timeout(cfg.timeout, job.spec),
        out_dir=rt.run_dir(job.slug),
        sandbox=cfg.sandbox,
        checks=cfg.checks,
        suite_cache=ArtifactCache(rt.store, job.slug),
    )
    events += [verify_event(f"{key}:verify:{i}", f.id, run) for i, run in enumerate(check.runs)]
    events.append(table_event(f"{key}:verify:table", f.id, check))
    if not check.ok:
        reason = check.reason or "verification failed"
        signals = signals_of(check.runs, "verification")
        refutation = RefutationRecord.from_verification(False, reason, signals[-1] if signals else None)
        events += [
            refutation_event(refutation, eid=f"{key}:refuted", id=f.id),
            FindingReopened(eid=f"{key}:reopened", id=f.id, reason=reason, who="jury", source="verification"),
        ]
        log_refutation(rt, job.slug, refutation.log_line(f.id))
    return events


# --- reply ------------------------------------------------------------------------------------


@handles("reply")
def reply(rt: Runtime, slug: str, key: str, interrupted: Interrupted) -> None:
    job = load_job(rt, slug, key, interrupted)
    if job is None:
        return rt.wake(slug)
    a, s = job.action, job.state
    agent, n = a.agent or "", a.round
    spec = job.spec
    fs = [s.findings[i] for i in a.findings if i in s.findings]
    outcomes = [SettledItem(id=f.id, verdict=f.status, claim=f.claim, loc=f.loc, reason=f.reason) for f in fs]
    prompt = reply_prompt(round_n=n, agent=agent, outcomes=outcomes)
    session = s.sessions.get(agent)
    resume = resumable(s, agent, bool(spec.resume_argv), this_host())
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


# --- refute -----------------------------------------------------------------------------------


def claim_text(job: Job) -> str:
    """The claim the refuter is asked to break, in plain words."""
    s, fid = job.state, job.action.finding
    if fid is None:
        t = s.target
        return (
            f"The change under review ({t.branch or t.url}, head {str(t.head)[:12]}) together with the "
            f"jury's accepted fixes (tree {str(job.action.sha)[:12]}) is correct: every reviewer found "
            "nothing more, and the declared checks pass."
        )
    f = s.findings[fid]
    if f.status == "rejected":
        return (
            f"Finding {f.id} at {f.loc} does not reproduce. The finding said: {f.claim}. "
            f"The judge rejected it: {f.reason}"
        )
    changes = (f.verification_table or {}).get("configChanges") or []
    shown = f" The fix also changes how tests run or existing tests: {'; '.join(changes)}." if changes else ""
    return (
        f"Finding {f.id} at {f.loc} is real and fixed: {f.claim}. The judge reproduced it and fixed it "
        f"({f.reason}); its regression test ({f.test}) is run by `{f.test_command}`, which fails without the "
        f"fix and passes with it.{shown}"
    )


def tree_of(rt: Runtime, job: Job, work: Path) -> str:
    """The commit the claim is about: the tip, plus the finding's fix when it is not integrated yet."""
    a, s = job.action, job.state
    f = s.findings.get(a.finding or "")
    if f is None or f.status != "accepted" or f.integrated or not f.patch:
        return a.sha or s.tip or ""
    patch = rt.store.get_artifact(job.slug, f.patch) or b""
    return commit_deterministic(
        job.repo, parent=a.sha or "", patch=patch, message=f"jury: candidate fix {f.id}", work=work
    )


def _verification_signals(f: FindingState | None) -> list[Signal]:
    """The signals among the finding's verification runs: a test or check command's, never a plain
    program run's."""
    signals: list[Signal] = []
    for v in f.verification if f is not None else []:
        kind = classify_command(v["command"])
        if kind is None:
            continue  # a plain program run is not a signal
        signals.append(
            Signal(
                kind=kind,
                command=v["command"],
                exit_code=v.get("exitCode"),
                source="verification",
                output_tail=v.get("outputTail", ""),
                tree=v.get("tree"),
            )
        )
    return signals


def _check_signals(runs: list[CommandRun]) -> list[Signal]:
    """The signals of the declared checks' runs, then of the commands the task names (``task-<n>``)."""
    declared = signals_of([r for r in runs if not (r.check or "").startswith("task-")], "declared")
    return declared + signals_of([r for r in runs if (r.check or "").startswith("task-")], "task")


def _refuter_verdict(run: AgentRun, agent: str) -> ParsedRefutation:
    """The refuter's verdict, "unclear" when it could not run (or could run nothing to break the claim)."""
    error = run_failure(run)
    verdict = parse_refutation(run.report)
    if error is None and verdict.outcome == "not_refuted":
        error = broken_reason(run.commands, agent)  # "could not break it" when nothing could run
    if error:
        verdict = verdict.model_copy(
            update={"outcome": "unclear", "reason": f"the refuter could not run: {error}"}
        )
    return verdict


def _refutation_record(
    job: Job, run: AgentRun, verdict: ParsedRefutation, signal: Signal | None
) -> RefutationRecord:
    """The record of the refutation: its cost as the ledger settles it, and whether the refuter is
    independent of the judge (another family)."""
    cfg, spec = job.state.config, job.spec
    assert cfg is not None
    judge_family = spec_family(cfg.agents[cfg.judge]) if cfg.judge in cfg.agents else None
    return RefutationRecord.from_verdict(
        verdict,
        cost_usd=call_cost(run, spec),  # None: unknown
        reviewer_model=run.model or spec.model,
        reviewer_agent=job.action.agent,
        independent=independence(judge_family, spec_family(spec, run.model)),
        signal=signal,
    )


@handles("refute")
def refute(rt: Runtime, slug: str, key: str, interrupted: Interrupted) -> None:
    """The second opinion: gate on a real signal first, then an agent of another family tries to break
    the claim, reading and running only the declared checks and read-only git. It never writes."""
    import tempfile

    job = load_job(rt, slug, key, interrupted)
    if job is None:
        return rt.wake(slug)
    a, s, cfg = job.action, job.state, job.state.config
    assert cfg is not None
    f = s.findings.get(a.finding or "")
    fid = f.id if f else None
    events: list[Event] = []
    signals = _verification_signals(f)
    task_cmds = {f"task-{i}": c for i, c in enumerate(commands_in_task(cfg.task or ""), 1)}
    commands = {**cfg.checks, **task_cmds}
    timeout = agent_timeout(cfg.timeout)  # the checks run for no agent
    with tempfile.TemporaryDirectory(prefix="jury-refute-") as work:
        tree = tree_of(rt, job, Path(work))
    if commands:
        runs = run_checks(
            job.repo,
            tree,
            commands,
            worktrees=rt.worktrees,
            name=holder_name(job, "checks"),
            timeout=timeout,
            out_dir=rt.run_dir(slug),
            sandbox=cfg.sandbox,
        )
        events += [verify_event(f"{key}:check:{i}", fid, r) for i, r in enumerate(runs)]
        signals += _check_signals(runs)
    g = gate(signals)
    if not g.open:
        skipped = RefutationRecord.skipped(g.reason)
        events.append(refutation_event(skipped, eid=f"{key}:skipped", id=fid))
        log_refutation(rt, slug, skipped.log_line(fid))
        return finish(rt, job, events)
    allowed = {**commands, **({"test_command": f.test_command} if f and f.test_command else {})}
    prompt = refute_prompt(
        claim=claim_text(job),
        finding_id=fid,
        signals=g.signals,
        commands=list(allowed.values()),
        base=s.target.base,
    )
    with agent_worktree(rt, job, tree) as wt:
        run = run_agent(
            rt,
            job,
            role="refuter",
            prompt=prompt,
            worktree=wt,
            name=f"refute.{safe_name(key)}",
            checks=allowed,
        )
        wrote = changed_paths(wt)
    if wrote:
        events.append(AgentWrote(eid=f"{key}:wrote", agent=a.agent or "", round=a.round, paths=wrote))
    verdict = _refuter_verdict(run, a.agent or "")
    refutation = _refutation_record(job, run, verdict, g.signals[0] if g.signals else None)
    events.append(refutation_event(refutation, eid=f"{key}:verdict", id=fid))
    if verdict.outcome == "refuted" and f is not None:
        events.append(
            FindingReopened(
                eid=f"{key}:reopened",
                id=f.id,
                who=a.agent or "",
                source="refuter",
                reason=f"refuted by {a.agent}: {verdict.reason}",
            )
        )
    log_refutation(rt, slug, refutation.log_line(fid))
    finish(rt, job, events)


def verify_event(eid: str, fid: str | None, run: CommandRun) -> VerifyRan:
    return VerifyRan(
        eid=eid,
        id=fid,
        command=run.command,
        tree=run.tree,
        sha=run.sha,
        exit_code=run.exit_code,
        seconds=round(run.seconds, 2),
        output_tail=run.output_tail[-2000:],
        error=run.error,
    )


from workers.runtime import publish as _publish  # noqa: E402, F401  (binds the ``publish`` handler)
from workers.runtime import push as _push  # noqa: E402, F401  (binds the ``push`` handler)

TASKS = HANDLERS  # every action kind's handler, bound by ``@handles`` above (see workers/runtime/actions.py)
