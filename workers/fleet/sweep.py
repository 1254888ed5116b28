"""Sweeps: one run for every matching open PR of many repositories, enqueued from one process.

``jury sweep`` and the scheduler's firings call ``sweep``. It costs what the PRs need, not a process per
PR: one forge listing per repository, one Redis pipeline to learn which PR heads already have a run, one
``git fetch`` per repository for every PR head and base branch the new runs review (``resolve_pulls``),
the runs' first events built here, and one pipeline that starts them all. Each start is atomic in Redis
(``LiveStore.start_swept``): the PR head is claimed for the run with the rest of the run's start, so two
sweeps at once never start two runs for one head, and a run is never started without its claim.

What a sweep does with a PR whose head (forge, repository, PR, head sha) already has a run:

- in flight (queued or reviewing): skipped;
- converged: skipped;
- ended ``human``, ``failed`` or ``cancelled``: skipped, and the reason says so; with ``retry`` a new run
  takes the head over (the reason names the run it retries). Not by default: such a run needs a person
  (a round cap, a finding the judge could not settle, an agent that could not run) or was stopped by one,
  and a nightly sweep would pay for the same outcome every night;
- no longer in the store (its keys expired after ``JURY_RETENTION``): skipped, reviewed before.

A PR whose head moved while a run of an earlier head is still in flight (queued or reviewing) gets its new
run, and the earlier run is cancelled (superseded, ``_supersede``): it would go on paying for a head
nobody will merge. Its end note says ``superseded by <new run>: the PR's head moved to <sha>``, the row
lists it in ``superseded``.

A PR whose head moved since its last converged run gets a new run that starts from what that run settled:
a ``run.carried`` event names the earlier run and carries its settled findings (and what it carried
itself), which every round's prompt lists as settled.

Swept PRs are reviewed as PR URLs: untrusted unless the operator's ``[trust] repos`` lists them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import httpx
from pydantic import BaseModel

from orchestrator.cancel import cancel_run
from orchestrator.config import RepoConfig, Settings, load_config, operator_config_file
from orchestrator.decide import carry_over
from orchestrator.domain import Event, RunCarried
from orchestrator.errors import JuryError, UsageError
from orchestrator.forge import (
    ETagCache,
    ForgeError,
    ForgeRef,
    ForgeSettings,
    PullRequest,
    load_forge_settings,
)
from orchestrator.forge.select import make_forge, parse_ref
from orchestrator.run_reader import fold_run
from orchestrator.spec import TERMINAL_STATES, Target
from orchestrator.start import RunOptions, StartRequest, check_options, first_events, jury_config, start_runs
from orchestrator.store.base import LiveStore, PullHead, pull_head
from orchestrator.store.files import FileStore
from orchestrator.target import make_slug, parse_pr_url, resolve_pulls

Outcome = Literal["enqueued", "would enqueue", "skipped", "error"]
Kick = Callable[[Sequence[str]], None]


@dataclass(frozen=True)
class SweepFilters:
    """Which open PRs a sweep takes: every label in ``labels``, the base branch ``base`` (any when None),
    drafts only when asked."""

    labels: tuple[str, ...] = ()
    base: str | None = None
    include_drafts: bool = False


@dataclass
class SweepOptions:
    """The runs' options (``jury review``'s), and whether a head whose run ended without converging
    (human, failed, cancelled) is run again."""

    run: RunOptions = field(default_factory=RunOptions)
    retry: bool = False


class SweepRow(BaseModel):
    """What the sweep did with one PR (``number`` None: the repository itself could not be listed)."""

    repo: str  # "github:acme/app"
    number: int | None = None
    head: str | None = None
    title: str = ""
    outcome: Outcome
    slug: str | None = None  # the run enqueued, or the run that holds the head
    reason: str = ""
    carried_from: str | None = None
    carried: int = 0
    # The PR's runs still in flight for an earlier head, cancelled because a run holds this head now
    # (a dry run: the ones it would cancel).
    superseded: list[str] = []


class SweepReport(BaseModel):
    rows: list[SweepRow]
    dry_run: bool
    seconds: float  # the sweep's wall time, listing to the last kick

    def having(self, outcome: Outcome) -> list[SweepRow]:
        return [r for r in self.rows if r.outcome == outcome]

    @property
    def enqueued(self) -> list[str]:
        return [r.slug for r in self.rows if r.outcome == "enqueued" and r.slug]

    def summary(self) -> str:
        """One line: how many PRs were enqueued (would be, in a dry run), skipped, and failed, and how many
        runs of earlier heads were cancelled (would be)."""
        word: Outcome = "would enqueue" if self.dry_run else "enqueued"
        superseded = sum(len(r.superseded) for r in self.rows)
        return (
            f"{word} {len(self.having(word))}, skipped {len(self.having('skipped'))}, "
            f"errors {len(self.having('error'))}"
            + (f", {'would cancel' if self.dry_run else 'cancelled'} {superseded}" if superseded else "")
            + f" ({self.seconds:.2f} s)"
        )


@dataclass
class _Plan:
    """One PR the sweep will start a run for."""

    row: SweepRow
    ref: ForgeRef
    pr: PullRequest
    replace: str | None = None
    carry: RunCarried | None = None
    target: Target | None = None
    events: list[Event] = field(default_factory=list)
    slug: str = ""


@dataclass
class _Stale:
    """A listed PR's runs in flight for heads other than its current one (``_plan``)."""

    row: SweepRow
    runs: list[str]


def parse_repos(repos: Sequence[str], forge_settings: ForgeSettings) -> list[ForgeRef]:
    """The repositories named on the command line (see ``orchestrator.forge.select``), each once."""
    if not repos:
        raise UsageError(
            "name at least one repository: OWNER/REPO, github:OWNER/REPO or gitlab:GROUP/PROJECT"
        )
    refs: dict[tuple[str, str], ForgeRef] = {}
    for text in repos:
        ref = parse_ref(text, forge_settings)
        if ref.number is not None:
            raise UsageError(f"{text}: a sweep takes repositories, not one PR (review it with `jury review`)")
        refs.setdefault((ref.kind, ref.repo.lower()), ref)
    return list(refs.values())


def sweep(
    settings: Settings,
    repos: Sequence[str],
    filters: SweepFilters,
    options: SweepOptions,
    *,
    store: LiveStore,
    kick: Kick,
    dry_run: bool = False,
    forge_settings: ForgeSettings | None = None,
    http: httpx.Client | None = None,
    etag_cache: ETagCache | None = None,
    claim_in: FileStore | None = None,
) -> SweepReport:
    """Enqueue one run per matching open PR of ``repos`` whose head has no run yet, and cancel the PR's
    runs still in flight for an earlier head (see the module docstring); ``kick`` sends the coordinator
    of each run started or cancelled. ``dry_run``: say what would be enqueued, skipped and cancelled, and
    change nothing (no fetch, no claim, no run, no cancel). ``etag_cache``: where the listings' ETags
    are kept between sweeps (``workers.fleet.forge_cache``; None: in memory, for this sweep only).
    ``claim_in``: the state directory's files where each slug is claimed too (``FileStore.claim``), for a
    sweep whose store is its own private Redis: other commands on that directory share no store with it."""
    t0 = time.monotonic()
    check_options(options.run)
    fs = forge_settings or load_forge_settings()
    refs = parse_repos(repos, fs)
    operator_file = operator_config_file(settings, options.run.config)
    rows: list[SweepRow] = []
    listed: list[tuple[ForgeRef, PullRequest]] = []
    client = http or httpx.Client(timeout=30.0)
    try:
        for ref in refs:
            forge = make_forge(ref.kind, fs, client, cache=etag_cache)
            try:
                prs = forge.list_open(
                    ref.repo, base=filters.base, labels=filters.labels, include_drafts=filters.include_drafts
                )
            except ForgeError as exc:
                rows.append(SweepRow(repo=str(ref), outcome="error", reason=str(exc)))
                continue
            listed += [(ref, pr) for pr in sorted(prs, key=lambda p: p.number)]
    finally:
        if http is None:
            client.close()
    plans, stale = _plan(store, listed, options, rows, dry_run=dry_run)
    if not dry_run and plans:
        _prepare(settings, plans, options.run, operator_file)
        _start(settings, store, kick, [p for p in plans if p.events], claim_in)
    _supersede(store, kick, stale, dry_run=dry_run)
    return SweepReport(rows=rows, dry_run=dry_run, seconds=round(time.monotonic() - t0, 3))


def _plan(
    store: LiveStore,
    listed: list[tuple[ForgeRef, PullRequest]],
    options: SweepOptions,
    rows: list[SweepRow],
    *,
    dry_run: bool,
) -> tuple[list[_Plan], list[_Stale]]:
    """Which PRs get a run, and what the others are skipped for: one lookup of every head, one read of
    the states of the runs it names. Also each PR's swept runs in flight for another head than its
    current one (the holder of a head is the only run of it that can be in flight: a retry replaces an
    ended one), for ``_supersede``."""
    heads = [_head(ref, pr) for ref, pr in listed]
    found = store.sweep_lookup(heads)
    named = {s for f in found for s in [f.holder, *f.runs] if s}
    states = store.run_states(sorted(named))
    plans: list[_Plan] = []
    stale: list[_Stale] = []
    for (ref, pr), swept in zip(listed, found, strict=True):
        row = SweepRow(repo=str(ref), number=pr.number, head=pr.head_sha, title=pr.title, outcome="skipped")
        earlier_live = [s for s in swept.runs if s != swept.holder and _in_flight(states.get(s))]
        if earlier_live:
            stale.append(_Stale(row, earlier_live))
        replace = None
        if swept.holder is not None:
            state = states.get(swept.holder)
            row.slug = swept.holder
            if state is None:
                row.reason = f"reviewed by run {swept.holder} (no longer in the store)"
            elif state not in TERMINAL_STATES:
                row.reason = f"in flight: run {swept.holder} ({state})"
            elif state == "converged":
                row.reason = f"converged: run {swept.holder}"
            elif not options.retry:
                row.reason = f"run {swept.holder} ended {state} for this head; --retry runs it again"
            else:
                replace = swept.holder
                row.reason = f"retries run {swept.holder} ({state})"
            if replace is None:
                rows.append(row)
                continue
        row.outcome, row.slug = "would enqueue" if dry_run else "enqueued", None
        plan = _Plan(row=row, ref=ref, pr=pr, replace=replace)
        earlier = next((s for s in swept.runs if s != swept.holder and states.get(s) == "converged"), None)
        if earlier is not None:
            previous = fold_run(store, earlier)
            plan.carry = RunCarried(
                eid="carried:0", from_run=earlier, from_head=previous.target.head, items=carry_over(previous)
            )
            row.carried_from, row.carried = earlier, len(plan.carry.items)
            note = f"head moved since run {earlier} converged: carries its {row.carried} settled findings"
            row.reason = f"{row.reason}; {note}" if row.reason else note
        elif not row.reason:
            row.reason = "new head"
        rows.append(row)
        plans.append(plan)
    return plans, stale


def _in_flight(state: str | None) -> bool:
    return state is not None and state not in TERMINAL_STATES


def _note(row: SweepRow, text: str) -> None:
    row.reason = f"{row.reason}; {text}" if row.reason else text


def _supersede(store: LiveStore, kick: Kick, stale: list[_Stale], *, dry_run: bool) -> None:
    """Cancel each listed PR's runs still in flight for an earlier head, once a run holds its current
    head (started now, or before: a sweep that died between the two steps is made good by the next one).
    A PR whose current head has no run (its row is an error) keeps its earlier run going.

    With ``jury cancel``'s function (``orchestrator.cancel.cancel_run``): a ``run.cancel`` event whose
    reason becomes the run's end note, then the cancel flag; the coordinators are kicked at the end, in
    one batch (each ends its run ``cancelled``, under the run's lock). The event's id names the run that
    supersedes (and the run's epoch), so two sweeps at once (which agree on it: the head's claim is
    atomic) append it once; a run being cancelled already is left to end. A ``jury review`` of the PR's
    URL is among the PR's runs too (``orchestrator.start.start_run`` claims its head as a sweep does),
    so it is superseded alike: one run of a PR in flight, whoever started it."""
    if dry_run:
        for x in stale:
            if x.row.outcome != "error":
                x.row.superseded = list(x.runs)
                _note(x.row, f"would cancel run {', '.join(x.runs)}, in flight for an earlier head")
        return
    todo = [x for x in stale if x.row.slug and x.row.outcome in ("enqueued", "skipped")]
    if not todo:
        return
    states = store.run_states(sorted({s for x in todo for s in x.runs}))  # again: some may have ended
    cancelled: list[str] = []
    for x in todo:
        holder, sha = x.row.slug or "", x.row.head or "?"
        reason = f"superseded by {holder}: the PR's head moved to {sha}"
        for slug in (s for s in x.runs if _in_flight(states.get(s))):
            try:
                # the run's epoch in the event's id: a run resumed after it was superseded is cancelled anew
                done = cancel_run(store, slug, who="sweep", reason=reason, superseded_by=holder)
            except JuryError as exc:
                _note(x.row, f"could not cancel run {slug}, in flight for an earlier head: {exc}")
                continue
            if done.outcome != "cancelled":
                continue  # cancelled already (an earlier sweep, a person: it is ending), or ended meanwhile
            x.row.superseded.append(slug)
            cancelled.append(slug)
        if x.row.superseded:
            _note(x.row, f"cancelled run {', '.join(x.row.superseded)}, in flight for an earlier head")
    kick(cancelled)


def _head(ref: ForgeRef, pr: PullRequest, sha: str | None = None) -> PullHead:
    return pull_head(ref.kind, ref.repo, pr.number, sha or pr.head_sha)


def _fail(plan: _Plan, reason: str) -> None:
    plan.row.outcome, plan.row.reason, plan.events = "error", reason, []


def _prepare(settings: Settings, plans: list[_Plan], opts: RunOptions, operator_file: Path | None) -> None:
    """Each plan's target (every PR of a repository fetched at once) and first events; a PR that cannot
    be fetched or configured fails alone, its row saying why."""
    resolved = resolve_pulls([(p.pr.web_url, p.pr.base) for p in plans], settings.dir, settings.forge_hosts)
    configs: dict[str, RepoConfig] = {}
    for plan, done in zip(plans, resolved, strict=True):
        if isinstance(done, JuryError):
            _fail(plan, str(done))
            continue
        target, repo_file = done
        named = parse_pr_url(plan.pr.web_url, settings.forge_hosts)
        if named.project.lower() != plan.ref.repo.lower() or int(named.number) != plan.pr.number:
            _fail(plan, f"the forge gave {plan.pr.web_url} for {plan.ref}#{plan.pr.number}")
            continue
        try:
            key = repo_file.model_dump_json()  # PRs that share the trunk-side jury.toml share its config
            cfg = configs.get(key)
            if cfg is None:
                cfg = configs[key] = load_config(repo_file, operator_file)
            jury = jury_config(settings, cfg, target, opts)
        except JuryError as exc:
            _fail(plan, str(exc))
            continue
        plan.target = target
        plan.row.head = target.head
        plan.events = [*first_events(target, jury), *([plan.carry] if plan.carry else [])]


def _start(
    settings: Settings, store: LiveStore, kick: Kick, plans: list[_Plan], claim_in: FileStore | None = None
) -> None:
    """Start the runs through ``orchestrator.start.start_runs`` (the service every run is started by: one
    pipeline, a slug taken meanwhile gets the next suffix, each PR head claimed with its run) and kick
    their coordinators in one batch."""
    requests = [
        StartRequest(
            _base_slug(p.target or Target()),
            p.events,
            head=_head(p.ref, p.pr, p.target.head if p.target else None),
            replace=p.replace,
        )
        for p in plans
    ]
    # The files record is left to the coordinator's first pass, on the host that runs it: writing a
    # hundred records here (an fsync each) would double the sweep's time for nothing the store lacks.
    results = start_runs(store, requests, kick, state_dir=settings.dir, claim_in=claim_in)
    for plan, started in zip(plans, results, strict=True):
        if started.outcome == "started":
            plan.row.slug = plan.slug = started.slug or ""
        elif started.outcome == "held":
            plan.row.outcome, plan.row.slug = "skipped", started.holder
            plan.row.reason = f"in flight: run {started.holder} (started meanwhile)"
        else:
            _fail(plan, started.refusal)


def _base_slug(t: Target) -> str:
    return make_slug(t.repo or "repo", t.id or "run", t.attempt or "")
