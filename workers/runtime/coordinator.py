"""The coordinator and the task wrapper: fold, decide, integrate, dispatch; leases, reaping, crashes.

``coordinate`` runs under the run's lock. ``run_task`` runs one action under a lease with a heartbeat
and marks it done after its events are appended, so a task Redis delivers twice, or hands to a second
worker while the first is still at it, runs its agent once. A task whose ``[limits]`` slot is full, or
whose model sends it back (``RateLimited``), is put back with a countdown, undone (``put_back``).
``reap`` hands out again the actions whose worker died (taken, then the lease expired with no done
marker), sends again, with a growing back-off, those whose message may have been lost (never taken since
they were sent), and kicks every active run with nothing in flight.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

import redis
import structlog

from orchestrator.actions import failure_events as failure_of
from orchestrator.decide import DispatchAction, Emit, Integrate, StartRound, awaiting_publish, decide
from orchestrator.domain import (
    ActionDeferred,
    ActionDispatched,
    CommitPushed,
    Event,
    FindingReopened,
    RoundStart,
    TargetEvent,
)
from orchestrator.errors import GitError, StoreError
from orchestrator.fold import RunState, apply, fold, snapshot, tick
from orchestrator.prompts import round_start
from orchestrator.run_reader import read_state
from orchestrator.spec import TERMINAL_STATES, Target
from orchestrator.store.files import record
from orchestrator.store.redis_archive import ArchivingStore
from workers.agents.run import RateLimited
from workers.fleet import reaping
from workers.isolation.limits import (
    MAX_BACKOFFS,
    admit,
    slot_wait,
    waiter_id,
)
from workers.isolation.sandbox import SandboxUnavailable
from workers.isolation.worktree import commit_deterministic, update_ref
from workers.runtime.context import (
    BudgetExhausted,
    Job,
    LeaseLost,
    Runtime,
    TaskInterrupt,
    finish,
    jury_branch,
    throttled,
)
from workers.runtime.jobs import TASKS
from workers.runtime.lease import Claim
from workers.runtime.put_back import handing_back, put_back, rate_limited, wake_waiters
from workers.runtime.wake import due

log = structlog.get_logger()

COORDINATE_LOCK_SECONDS = 20.0  # well above a coordinate pass (fold, git integration, file mirror)
# The longest the reaper waits between two sendings of an action nobody takes (its message most likely
# still queued behind others): its back-off doubles from ``reap_after`` up to this (or the visibility
# timeout, if shorter).
REQUEUE_AT_MOST = 600.0
REAP_BATCH = 500  # active runs a reaper pass reads at once: a round trip each for their folds, marks, leases


# --- the coordinator ---------------------------------------------------------------------------


def coordinate(rt: Runtime, slug: str) -> RunState:
    """Fold the log, append what decide emits until it only dispatches, dispatch each action once."""
    # A short lock: a coordinator that dies holding it stalls the run only this long.
    with rt.store.lock(slug, timeout=COORDINATE_LOCK_SECONDS):
        rt.store.clear_kick(slug)  # before reading: what is appended from now on gets a pass of its own
        state, position, origin, new = load(rt, slug)
        if state.events == 0:  # its keys were deleted (or expired): nothing to decide, nothing to keep alive
            rt.store.deactivate(slug)
            log.warning("run.vanished", slug=slug)
            return state
        # What decide emits is folded here at once and appended in one batch with the dispatches that
        # follow from it, before any task is sent: a task reads the log, which then holds all of it. A
        # pass that dies before the append leaves nothing; the next one decides the same again.
        pending: list[Event] = []
        for _ in range(200):
            actions = decide(state)
            emits = [a.event for a in actions if isinstance(a, Emit)]
            emits += [round_start(a) for a in actions if isinstance(a, StartRound)]  # the prompt, in words
            for step in (a for a in actions if isinstance(a, Integrate)):
                emits += integrate(rt, state, step.findings, step.sha)
            if not emits:
                break
            for event in emits:
                if isinstance(event, RoundStart) and event.prompt_file:
                    rt.store.put_artifact(slug, event.prompt_file, event.prompt.encode())
                apply(state, event)
            pending += emits
        dispatches = [a for a in actions if isinstance(a, DispatchAction)]
        for d in dispatches:
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
            apply(state, ev)
            pending.append(ev)
        if pending:
            rt.store.append(slug, pending)
        fresh = not begun(state)  # a run none of whose actions was taken: its work is new work
        for d in dispatches:
            send(rt, d.kind, slug, d.key, new=fresh)
            log.info("action.dispatched", slug=slug, key=d.key, kind=d.kind)
        state, position, new = catch_up(rt, state, position, new)
        doc = snapshot(state, position, origin) if position is not None else None
        if doc is not None:  # what the reaper reads of the run instead of the whole fold
            doc["reap"] = reaping.digest(state)
        for t in rt.store.alive(slug):  # shown in run.json, never in the snapshot: ticks are not in the log
            tick(state, t)
        # The files record first; then run.json with the snapshot, once the record holds what it covers (a
        # pass that dies before then reads the same tail again).
        state, run_doc = record(rt.store, rt.files, slug, state, new)
        if doc is None:
            rt.store.write_state(slug, run_doc)
        else:
            rt.store.write_fold(slug, run_doc, doc)
        if state.state in TERMINAL_STATES and not awaiting_publish(state):
            rt.store.deactivate(slug)
            # Its keys go JURY_RETENTION after it ended; the files record stays.
            rt.store.expire_run(slug, rt.settings.retention)
            archive_ended(rt, slug)  # and with JURY_ARCHIVE, its record leaves Redis now
        else:  # running, or ended and still to be published: the reaper keeps an eye on it
            rt.store.activate(slug)  # and a resumed run's keys, set to expire when it ended, are kept again
    if state.state in TERMINAL_STATES:
        log.info("run.ended", slug=slug, state=state.state, reason=state.target.state_note)
    return state


def archive_ended(rt: Runtime, slug: str) -> None:
    """Move the ended run's record to the fleet's archive (``ArchivingStore.archive_run``). A failure
    leaves the run whole in Redis until its retention ends: logged, never a failed pass."""
    if isinstance(rt.store, ArchivingStore):
        try:
            rt.store.archive_run(slug)
        except StoreError as exc:
            log.warning("run.archive_failed", slug=slug, error=str(exc))


def load(rt: Runtime, slug: str) -> tuple[RunState, str | None, str | None, list[Event]]:
    """The run's fold, the log position it covers, the log's origin and the events folded now
    (``orchestrator.run_reader.read_state``: from the coordinator's snapshot and the events after it)."""
    return read_state(rt.store, slug)


def catch_up(
    rt: Runtime, state: RunState, position: str | None, new: list[Event]
) -> tuple[RunState, str | None, list[Event]]:
    """The fold, its position and the events folded in this pass, once the pass has appended its own.

    The log after ``position`` holds the pass's events, in the order the pass folded them, and any other
    writer's (a worker's report): those after ours are folded now; one before any of ours (its fold would
    come first) or a position gone from the log means the fold no longer equals the log's, so it is
    folded again from the whole log (rare: the pass holds the run's lock, workers append in between).
    """
    after = rt.store.read_after(slug := state.slug, position) if position is not None else None
    interleaved, foreign = after is None, False
    for _, e in after or []:
        foreign = foreign or e.eid not in state.seen
        interleaved = interleaved or (foreign and e.eid in state.seen)
    if after is None or interleaved:
        log.info("fold.again", slug=slug, reason="gone" if after is None else "interleaved")
        every = rt.store.read_after(slug, None) or []
        return fold((e for _, e in every), slug), every[-1][0] if every else None, [e for _, e in every]
    for _, e in after:
        apply(state, e)
    return state, after[-1][0] if after else position, new + [e for _, e in after]


def integrate(rt: Runtime, state: RunState, findings: list[str], sha: str) -> list[Event]:
    """Commit accepted fixes onto ``sha`` in the given order, deterministically, and move ``jury/<slug>``
    (in this host's repository of the run: a PR's mirror here, where ``sha`` is rebuilt if another host
    made it; each ``commit.pushed`` records its parent, patch and message for the next host).

    A patch that no longer applies reopens its finding for a new triage against the new tree.
    Runs in the coordinator, under the run's lock.
    """
    slug, repo = state.slug, rt.repo(state.slug, state.target, [sha])  # a PR's: this host's mirror
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
        events.append(
            CommitPushed(
                eid=eid,
                sha=new,
                pushed=False,
                subject=subject,
                branch=branch,
                finding=fid,
                # what it is made of: any host rebuilds the same sha (workers/isolation/mirror.py)
                parent=tip,
                patch=f.patch,
                message=message,
            )
        )
        tip = new
    if tip != sha:
        update_ref(repo, f"refs/heads/{branch}", tip)
    return events


def failure_events(job: Job, exc: BaseException) -> list[Event]:
    """What a task that crashed leaves in the log, so the run never waits on it forever: its kind's
    ``on_failure`` (``orchestrator.actions``) with the reason."""
    return failure_of(job.action, f"the worker failed: {type(exc).__name__}: {exc}"[:500])


def run_task(rt: Runtime, kind: str, slug: str, key: str) -> None:
    """Run one action once: under its lease (renewed while it runs), skipped when done or held elsewhere.

    A crash is recorded against the action instead of leaving the run waiting; a refused budget ends
    the action without running its agent (the coordinator then ends the run); a worker that cannot
    sandbox the action's agent or code ends the run ``human`` without running anything. It takes its
    ``[limits]`` slots under its lease's token, or none when one is full and then puts the action back,
    in line for that slot; the slots it gave back when it ends wake the tasks waiting for them
    (``wake_waiters``).
    Once its lease is taken, the action's sent mark says so (``mark_taken``): should the lease lapse
    without a done marker, the reaper knows a worker died with it, not that its message waits in a queue.
    """
    handler = TASKS[kind]  # a kind no handler is bound to fails here, before any lease is taken
    name = f"{slug}:{key}"
    if rt.leases.is_done(name):
        # A copy of a message whose action ran (a redelivery, the reaper's re-send of a queued one): the
        # run was kicked when the action ended (and a lost kick is the reaper's, once nothing is in
        # flight), so another coordinate task here would only add to a busy queue.
        log.info("task.already_done", slug=slug, key=key)
        return None
    lease = rt.leases.lease(name, ttl=rt.settings.lease_ttl)
    if not lease.acquire():
        log.info("task.busy", slug=slug, key=key)  # another worker holds it; its heartbeat keeps it alive
        return None
    interrupted = TaskInterrupt(lease, throttled(lambda: rt.cancelled(slug)))
    with lease.heartbeat():
        rt.store.mark_taken(slug, key)
        if rt.leases.is_done(name):
            return rt.wake(slug)
        waiter = waiter_id(kind, slug, key)
        admission = admit(rt.slots, load(rt, slug)[0], key, lease.token, rt.settings.lease_ttl, waiter)
        if admission.full is not None:
            wait = slot_wait(rt.settings.limit_wait, rt.settings.reap_after)
            waits = f"{key}:wait:{admission.attempt}"  # one event per attempt, however often it waits
            note = f"{admission.full.what} is full"
            event = ActionDeferred(eid=waits, key=key, reason="slot", seconds=wait, note=note)
            return put_back(rt, kind, slug, event)
        try:
            end = run_handler(rt, Held(kind, slug, key, lease, admission.attempt, interrupted), handler)
        finally:
            wake_waiters(rt, admission.release())
        if end == "done":
            rt.leases.mark_done(name)
            return None
        if end == "left":
            return None
        # Marked sent (not taken) while the lease is still held: the reaper never sees it untaken-done
        # and lease-free, which would be a dead worker's action to recover.
        rt.store.mark_sent(slug, key)
    # This worker is shutting down and its grace is over: the lease is released (the heartbeat's exit),
    # and the action sent again, so another worker takes it now rather than the reaper after the TTL.
    log.warning("task.handed_back", slug=slug, key=key, kind=kind)
    rt.send(kind, slug, key)
    return None


# How a task's run of its handler ended: ``done`` (its outcome recorded: the done marker is written),
# ``left`` (nothing to mark: put back, another holder's now, the store out of reach) or ``handed back``
# (this worker is shutting down: the action is sent again for another worker).
TaskEnd = Literal["done", "left", "handed back"]


@dataclass(frozen=True)
class Held:
    """An action a task holds the lease of, admitted (``attempt``: its put-backs so far)."""

    kind: str
    slug: str
    key: str
    lease: Claim
    attempt: int
    interrupted: TaskInterrupt


def run_handler(rt: Runtime, held: Held, handler: Callable[..., None]) -> TaskEnd:
    """Run the action's handler; what it raises decides the end (``TaskEnd``). A lease lost at any point
    (the handler, or the recording of its failure) records nothing, unless this worker is handing its
    actions back, when the lease is still its own to hand."""
    try:
        return _handled(rt, held, handler)
    except LeaseLost:
        # Frozen past the lease's TTL (or cut off from Redis): the action went to another holder, or
        # will go once the reaper sees it unclaimed. Record nothing, mark nothing.
        if not handing_back(held.lease):
            log.warning("task.lease_lost", slug=held.slug, key=held.key)
            return "left"
        return "handed back"


def _handled(rt: Runtime, held: Held, handler: Callable[..., None]) -> TaskEnd:
    slug, key, interrupted = held.slug, held.key, held.interrupted
    try:
        handler(rt, slug, key, interrupted)
    except RateLimited as exc:
        return _rate_limited_end(rt, held, exc)
    except (StoreError, redis.RedisError) as exc:
        # The log itself is out of reach (Redis restarting?): record nothing, mark nothing; the
        # lease lapses and the reaper hands the action out again once the store is back.
        log.warning("task.store_unavailable", slug=slug, key=key, error=str(exc))
        return "left"
    except BudgetExhausted as exc:
        log.warning("task.budget_refused", slug=slug, key=key, reason=str(exc))
        record_failure(rt, slug, key, None, interrupted)
    except SandboxUnavailable as exc:
        log.warning("task.sandbox_unavailable", slug=slug, key=key, reason=str(exc))
        record_no_sandbox(rt, slug, key, f"sandbox unavailable: {exc}", interrupted)
    except LeaseLost:
        raise
    except Exception as exc:
        log.exception("task.crashed", slug=slug, key=key, kind=held.kind)
        record_failure(rt, slug, key, exc, interrupted)
    return "done"


def _rate_limited_end(rt: Runtime, held: Held, exc: RateLimited) -> TaskEnd:
    """The model refused the action: put back with a back-off, or, refused ``MAX_BACKOFFS`` times (a
    spent quota, not a pause), ended as a failure; a worker handing back leaves it to its next attempt."""
    leaving = handing_back(held.lease)
    if held.interrupted.lost() and not leaving:
        return "left"  # the action is another holder's now
    if held.attempt + 1 < MAX_BACKOFFS:  # a worker handing back puts it back itself
        put_back(rt, held.kind, held.slug, rate_limited(rt, held.key, held.attempt, exc))
        return "left"
    if leaving:
        return "handed back"  # its next attempt, on another worker, ends it
    log.warning("task.rate_limit_spent", slug=held.slug, key=held.key, refusals=MAX_BACKOFFS)
    reason = f"rate-limited {MAX_BACKOFFS} times, the last: {exc.note}"
    record_failure(rt, held.slug, held.key, None, held.interrupted, reason=reason)
    return "done"


def record_failure(
    rt: Runtime,
    slug: str,
    key: str,
    exc: BaseException | None,
    interrupted: TaskInterrupt | None = None,
    *,
    reason: str | None = None,
) -> None:
    """The action ends undone: with its kind's failure events for ``exc`` (or ``reason``), else none."""
    state = read_state(rt.store, slug)[0]
    action = state.actions.get(key)
    if action is not None and not action.done:
        job = Job(slug=slug, state=state, action=action, interrupted=interrupted or (lambda: False))
        if exc is not None:
            events = failure_events(job, exc)
        else:
            events = failure_of(action, reason) if reason is not None else []
        finish(rt, job, events, ok=False)
    else:
        rt.wake(slug)


def record_no_sandbox(rt: Runtime, slug: str, key: str, reason: str, interrupted: TaskInterrupt) -> None:
    """No sandbox, no run: the action ends undone and the run ends ``human`` with ``reason``."""
    state = read_state(rt.store, slug)[0]
    action = state.actions.get(key)
    if action is None or action.done:
        return rt.wake(slug)
    job = Job(slug=slug, state=state, action=action, interrupted=interrupted)
    end = TargetEvent(eid=f"{key}:no-sandbox", target=Target(state="human", state_note=reason))
    finish(rt, job, [end], ok=False)
    return None


def reap(rt: Runtime, holding: Callable[[], bool] = lambda: True) -> list[str]:
    """Hand out again every action whose worker is gone, send again those whose message may be lost, and
    kick every active run that has nothing in flight. Idempotent. Returns the actions recovered from dead
    workers (only those: ``jury_leases_recovered_total`` counts them).

    An action dispatched in the log and not done, whose lease nobody holds and which has no done marker:

    - taken since it was last sent (``SentMark.taken``: a worker acquired its lease) is a dead worker's
      (or a frozen one's, or one cut off from Redis): it is sent again at once, whatever its age, so a
      dead worker's actions go out again within ``lease_ttl`` and one reap period;
    - never taken since it was sent is most likely still queued behind others (a backlog), but its
      message may be lost (Redis restarted without its AOF, a worker died holding it prefetched): it is
      sent again once it has been due (its put-back's countdown over) for ``reap_after``, then after twice
      that, four times ... up to ``REQUEUE_AT_MOST`` (``requeue_after``), so a long queue is not flooded
      with copies of what it holds; a run whose mark is gone counts as never taken. When the broker can
      say (``Runtime.queued``), one whose task still waits in a queue is not sent again at all: it will
      be delivered, and only a message that is in no queue may be lost.

    The runs are read ``REAP_BATCH`` at a time, each read one round trip for the whole batch (the runs'
    folds, then their actions' marks, then their leases), so a pass costs a few round trips per batch,
    not several per run. Before each batch the pass asks ``holding`` (the reaper's lock is still this
    worker's, and the pass within its bound: ``workers.fleet.reaper``): when not, it stops, the rest waiting
    for the next pass, which starts at another place in the active set (``rotated``), so no run always waits.
    """
    recovered: list[str] = []
    queues = _Queues(rt)
    slugs = rotated(active_runs(rt))
    for start in range(0, len(slugs), REAP_BATCH):
        if not holding():
            log.warning("reap.cut_short", done=start, left=len(slugs) - start)
            break
        recovered += _reap_batch(rt, slugs[start : start + REAP_BATCH], queues)
    return recovered


def rotated(slugs: list[str]) -> list[str]:
    """``slugs`` from a random place on, round to the start: a pass cut short leaves other runs each time."""
    at = random.randrange(len(slugs)) if slugs else 0
    return slugs[at:] + slugs[:at]


class _Queues:
    """The actions waiting in the broker's queues, read once a pass and only when an action may need
    sending again (``queued_tasks``)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt, self.looked, self.waiting = rt, False, cast(set[tuple[str, str]] | None, None)

    def holds(self, slug: str, key: str) -> bool:
        if not self.looked:
            self.waiting, self.looked = queued_tasks(self.rt), True
        return self.waiting is not None and (slug, key) in self.waiting


def _reap_batch(rt: Runtime, slugs: list[str], queues: _Queues) -> list[str]:
    """``reap`` of a batch of runs: each read once for all of them."""
    recovered: list[str] = []
    idle: list[str] = []
    busy: list[tuple[str, list[tuple[str, str]]]] = []
    # From the digest of each run's snapshot when nothing was logged after it, else from the snapshot and
    # the events after it (``workers.fleet.reaping``): a pass costs neither each run's log nor its whole fold.
    for slug, view in zip(slugs, reaping.views(rt.store, slugs), strict=True):
        if view.state in TERMINAL_STATES and not view.publishing:
            rt.store.deactivate(slug)
        elif view.inflight:
            busy.append((slug, view.inflight))
        else:
            # Nothing of it is in flight: no task will kick its coordinator when it ends, so a kick that
            # was lost (or a pass that died before it dispatched) would leave it waiting. A run with
            # actions in flight is kicked by each of them as it ends (or, lost, sent again below).
            idle.append(slug)
    for slug in due(rt.store, idle, rt.settings.reap_after):  # as ``Runtime.wake``: one pass waits at most
        rt.kick(slug)
    # The marks before the leases: a mark that says taken, read before a lease found lapsed, is the
    # taker's that lapsed (a taker marks after it acquires; a put-back or hand-back marks the action
    # sent again before it lets its lease go). Each read at once for every action in flight of the batch.
    marks = rt.store.sent_marks_of([(slug, [key for _, key in inflight]) for slug, inflight in busy])
    lapsed = set(rt.leases.expired_without_done(f"{slug}:{key}" for slug, run in busy for _, key in run))
    for (slug, inflight), run_marks in zip(busy, marks, strict=True):
        for (kind, key), mark in zip(inflight, run_marks, strict=True):
            name = f"{slug}:{key}"
            if name not in lapsed:
                continue
            if mark is not None and mark.taken:
                send(rt, kind, slug, key)
                recovered.append(name)
                log.warning("reap.recovered", slug=slug, key=key, kind=kind)
                continue
            if mark is not None and mark.age < requeue_after(rt, mark.resends):
                continue
            if queues.holds(slug, key):
                continue  # still in its queue: it will be delivered, and a copy would lengthen the backlog
            resends = rt.store.mark_resent(slug, key)
            rt.send(kind, slug, key)
            log.info("reap.requeued", slug=slug, key=key, kind=kind, resends=resends)
    return recovered


def queued_tasks(rt: Runtime) -> set[tuple[str, str]] | None:
    """The actions waiting in the broker's queues, or None when that is not known (no way to ask, a
    backlog too long to read, or the broker not answering: then the reaper goes by the marks' age)."""
    if rt.queued is None:
        return None
    try:
        return rt.queued()
    except redis.RedisError as exc:
        log.warning("reap.queues_unread", error=str(exc))
        return None


def requeue_after(rt: Runtime, resends: int) -> float:
    """Seconds an action nobody took must have been due before the reaper sends it again, after it sent it
    ``resends`` times already: ``reap_after`` x 2^resends, at most ``REQUEUE_AT_MOST`` (or the visibility
    timeout, if shorter)."""
    cap = min(REQUEUE_AT_MOST, float(rt.settings.visibility_timeout))
    return min(rt.settings.reap_after * 2 ** min(resends, 32), max(cap, rt.settings.reap_after))


def active_runs(rt: Runtime) -> list[str]:
    return rt.store.active_runs()


def begun(state: RunState) -> bool:
    """Whether any action of the run has been taken (its agent launched) or has ended: its next work
    continues a run under way, which goes before the first work of new runs (``send``)."""
    return any(a.done or a.launches for a in state.actions.values())


def send(rt: Runtime, kind: str, slug: str, key: str, *, new: bool = False) -> None:
    """Enqueue an action's task and remember when, for the reaper. ``new``: the run has not begun, so the
    task waits behind every task of runs under way (``Runtime.send_new``): at a sweep's thousands of PRs,
    a started run's next reviews are not queued behind every other run's first ones."""
    rt.store.mark_sent(slug, key)
    if new and rt.send_new is not None:
        rt.send_new(kind, slug, key)
    else:
        rt.send(kind, slug, key)
