"""What the terminal shows: live progress while a run goes, and the summary of a run.

On a terminal, a rich live panel (round, each agent's state and elapsed time, findings raised and
settled); otherwise one plain line per notable event. Rich honours NO_COLOR.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from jury_cli.context import cells
from orchestrator.domain import (
    ActionDeferred,
    AgentLaunch,
    AgentReport,
    BudgetRefused,
    Event,
    FindingRaised,
    FindingRefused,
    FindingReopened,
    FindingResolved,
    FindingTurn,
    RefuteSkipped,
    RefuteVerdict,
    ReplyAnswered,
    RoundStart,
    RunCarried,
    TargetEvent,
    ToolRefused,
    VerifyRan,
    VerifyTable,
)
from orchestrator.fold import RunState

STYLE = {
    "clean": "green",
    "found": "yellow",
    "error": "red",
    "running": "cyan",
    "queued": "dim",
    "accepted": "green",
    "rejected": "magenta",
    "deferred": "yellow",
    "superseded": "dim",
    "open": "cyan",
    "converged": "bold green",
    "human": "bold yellow",
    "failed": "bold red",
    "cancelled": "bold red",
    "review": "cyan",
}


def event_line(e: Event) -> str | None:
    """One plain line for an event worth a line, else None."""
    match e:
        case RoundStart():
            return f"round {e.n} started at {e.sha[:12]}"
        case AgentLaunch():
            what = f" on {e.finding}" if e.finding else ""
            return f"  {e.agent} ({e.role}{what}) launched"
        case AgentReport():
            tail = f": {e.error}" if e.error else ""
            return f"  {e.agent} ({e.role}) {e.verdict} after {e.seconds:.0f}s{tail}"
        case FindingRaised():
            return f"  finding {e.id} raised by {e.agent}: {e.claim} ({e.loc})"
        case FindingResolved():
            return f"  finding {e.id} {e.verdict} by {e.who}: {e.reason}"
        case FindingRefused():
            return f"  finding {e.id}: triage refused: {e.reason}"
        case FindingTurn():
            return f"  finding {e.id} contested by {e.who}: {e.text}"
        case ReplyAnswered():
            return f"  {e.agent} replied: {e.verdict}"
        case FindingReopened():
            return f"  finding {e.id} reopened ({e.source}): {e.reason}"
        case VerifyRan():
            return f"  verify {e.id or 'checks'}: `{e.command}` on the {e.tree} tree exited {e.exit_code}"
        case VerifyTable():
            verdict = "verified" if e.ok else f"refuted: {e.reason}"
            return f"  verification of {e.id} ({e.runner or 'exit codes'}, {e.seconds:.1f} s): {verdict}"
        case RefuteVerdict():
            return (
                f"  second opinion on {e.id or 'the converged claim'}: {e.outcome} ({e.source}): {e.reason}"
            )
        case RefuteSkipped():
            return f"  second opinion on {e.id or 'the converged claim'}: not run: {e.reason}"
        case RunCarried():
            return f"starts from run {e.from_run}: {len(e.items)} settled findings carried over"
        case ActionDeferred():
            why = "waiting for a slot" if e.reason == "slot" else "rate-limited"
            return f"  {e.key} put back ({why}, again in {e.seconds:.0f}s): {e.note}"
        case BudgetRefused():
            return f"  budget refused {e.agent} for {e.key}: {e.reason}"
        case ToolRefused():
            return f"  refused {e.agent} ({e.role}) the tool {e.tool}: {e.reason}"
        case TargetEvent() if e.target.state:
            note = f" — {e.target.state_note}" if e.target.state_note else ""
            return f"run {e.target.state}{note}"
    return None


def counts(s: RunState) -> dict[str, int]:
    c = {"raised": len(s.findings), "open": 0, "accepted": 0, "rejected": 0, "deferred": 0, "superseded": 0}
    for f in s.findings.values():
        c[f.status] += 1
    return c


def live_view(s: RunState, started: float) -> Group:
    r = s.current
    head = Text.assemble(
        ("Jury ", "bold"),
        (s.slug, "bold"),
        "  ",
        (s.state, STYLE.get(s.state, "")),
        f"  {time.monotonic() - started:,.0f}s",
    )
    table = Table(box=None, show_header=True, header_style="bold")
    table.add_column("agent")
    table.add_column("state")
    table.add_column("elapsed", justify="right")
    table.add_column("summary", overflow="ellipsis", max_width=70)
    if r is not None:
        for name, slot in r.agents.items():
            table.add_row(
                *cells(
                    name, Text(slot.state, STYLE.get(slot.state, "")), f"{slot.seconds:.0f}s", slot.summary
                )
            )
    judging = [f.id for f in s.findings.values() if f.judging]
    c = counts(s)
    lines: list[RenderableType] = [
        head,
        Text(
            f"round {r.n if r else '-'} of {s.config.rounds if s.config else '?'}"
            + (f"   judge on {', '.join(judging)}" if judging else "")
        ),
        table,
        Text(
            f"findings: {c['raised']} raised, {c['accepted']} accepted, {c['rejected']} rejected, "
            f"{c['deferred']} deferred, {c['superseded']} duplicates, {c['open']} open"
        ),
    ]
    return Group(*lines)


def as_it_happens(e: Event) -> bool:
    """Whether the event is a milestone a terminal keeps above the live panel: a round begun, a finding
    raised, settled or reopened, the run's state. The panel shows the rest (the agents, the counts)."""
    match e:
        case RoundStart() | FindingRaised() | FindingResolved() | FindingReopened() | RunCarried():
            return True
        case TargetEvent() if e.target.state:
            return True
    return False


class Progress:
    """Shows a run as its events arrive: on a terminal, a live panel with the milestones printed above it
    as they happen; otherwise one plain line per notable event (no panel, no escape sequences).

    An agent launched again for the same action before it reported (its worker shut down and handed it
    back to the fleet, or died, and another worker took it over) is said so, not as a second launch."""

    def __init__(self, console: Console, slug: str) -> None:
        self.console, self.slug = console, slug
        self.live: Live | None = None
        self.started = time.monotonic()
        self.running: set[str] = set()  # action keys launched and not yet reported

    def handed_back(self, e: Event) -> bool:
        """Whether ``e`` launches again an action that was running (and keeps track of which are)."""
        match e:
            case AgentLaunch(key=str() as key):
                again = key in self.running
                self.running.add(key)
                return again
            case AgentReport(key=str() as key) | ActionDeferred(key=key):
                self.running.discard(key)
        return False

    def __enter__(self) -> Progress:
        if self.console.is_terminal:
            self.live = Live(console=self.console, refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def update(self, state: RunState, new: list[Event]) -> None:
        for e in new:
            if self.handed_back(e):
                assert isinstance(e, AgentLaunch)
                what = f" on {e.finding}" if e.finding else ""
                line: str | None = (
                    f"  {e.agent} ({e.role}{what}) handed back to the fleet; another worker runs it"
                )
            elif self.live is None or as_it_happens(e):
                line = event_line(e)
            else:
                line = None  # the panel shows it
            if line is not None:  # on a terminal, printed above the panel
                self.console.print(line, highlight=False, markup=False, soft_wrap=True)
        if self.live is not None:
            self.live.update(live_view(state, self.started))


def _print_header(console: Console, s: RunState) -> None:
    """The run's state, target and jury, and what its configuration set aside."""
    t = s.target
    console.print(Text.assemble(("Run ", "bold"), (s.slug, "bold"), "  ", (s.state, STYLE.get(s.state, ""))))
    if t.state_note:
        console.print(f"  {t.state_note}", markup=False)
    console.print(
        f"  target: {t.repo} {t.url or t.branch} (trunk {t.trunk}, head {str(t.head)[:12]}, "
        f"merge-base {str(t.base)[:12]})",
        markup=False,
        highlight=False,
    )
    if s.config:
        console.print(
            f"  jury: reviewers {', '.join(s.config.reviewers)}; judge {s.config.judge}", markup=False
        )
        for note in s.config.config_notes:  # what the configuration loader set aside, and trust
            console.print(f"  config: {note}", markup=False, highlight=False)
    if s.carried_from:
        console.print(
            f"  carried over: {len(s.carried)} settled findings of run {s.carried_from} (an earlier head)",
            markup=False,
        )


def _print_rounds(console: Console, s: RunState) -> None:
    """Each round's agents and what went wrong with them; the actions waiting out a countdown."""
    for r in s.rounds:
        verdicts = ", ".join(f"{a}={slot.state}" for a, slot in r.agents.items())
        console.print(f"  round {r.n} at {r.sha[:12]}: {verdicts}", markup=False, highlight=False)
        for a, slot in r.agents.items():
            if slot.error:
                console.print(f"    {a}: {slot.error}", markup=False)
            if slot.wrote:
                console.print(f"    {a} changed files (discarded): {', '.join(slot.wrote)}", markup=False)
    for waiting in s.inflight():
        if waiting.deferred:  # put back with a countdown, not yet running again
            console.print(f"  {waiting.key} waiting ({waiting.deferred})", markup=False, highlight=False)


def _print_findings(console: Console, s: RunState) -> None:
    """The findings' table, then each finding's refusals, reopenings, verification and second opinion."""
    if s.findings:
        table = Table(title="findings", box=None, header_style="bold")
        for col in ("id", "status", "loc", "claim", "reason"):
            table.add_column(col, overflow="fold")
        for f in s.findings.values():
            reason = f.reason
            if f.status == "open" and f.refusals:
                reason = f"triage refused: {f.refusals[-1]}"
            table.add_row(*cells(f.id, Text(f.status, STYLE.get(f.status, "")), f.loc, f.claim, reason))
        console.print(table)
        for f in s.findings.values():
            for i, why in enumerate(f.refusals, 1):
                console.print(f"  {f.id} triage refused ({i}): {why}", markup=False)
            for why in f.reopens:
                console.print(f"  {f.id} reopened: {why}", markup=False)
            for v in f.verification:
                console.print(
                    f"  {f.id} verify: `{v['command']}` on the {v['tree']} tree exited {v.get('exitCode')}",
                    markup=False,
                    highlight=False,
                )
            if f.verification_table is not None:
                for line in table_lines(f.id, f.verification_table):
                    console.print(line, markup=False, highlight=False)
            if f.refutation is not None:
                console.print(f"  {f.id} second opinion: {f.refutation.words()}", markup=False)


def _print_refusals(console: Console, s: RunState) -> None:
    """The tools refused to agents, and the second opinion on the converged claim."""
    for refusal in s.tool_refusals:
        who, tool, why = f"{refusal['agent']} ({refusal['role']})", refusal["tool"], refusal["reason"]
        console.print(f"  refused {who} the tool {tool}: {why}", markup=False)
    if s.final_check is not None:
        console.print(f"  second opinion on the converged claim: {s.final_check.words()}", markup=False)


def _print_spent(console: Console, s: RunState) -> None:
    """What the run spent, per agent and per finding."""
    if s.spent or s.unknown_costs or s.budget_refused:
        per_agent = ", ".join(f"{a} ${v:.4f}" for a, v in sorted(s.spent.items())) or "nothing known"
        unknown = f"; {s.unknown_costs} call(s) of unknown cost" if s.unknown_costs else ""
        console.print(f"  spent: ${s.total_spent:.4f} ({per_agent}){unknown}", markup=False)
        per_finding = ", ".join(f"{f.id} ${f.cost_usd:.4f}" for f in s.findings.values() if f.cost_usd)
        if per_finding:
            console.print(f"  spent per finding: {per_finding}", markup=False)


def _print_commits(console: Console, s: RunState) -> None:
    """The fixes committed on the run's branch and where they were pushed."""
    if s.commits:
        fixes = [c for c in s.commits if not c.pushed]
        if fixes:
            console.print(
                f"  fixes on branch jury/{s.slug}: {len(fixes)} commit(s), tip {fixes[-1].sha[:12]}"
                + (f" (in any clone: jury fetch {s.slug})" if s.target.url else ""),
                markup=False,
                highlight=False,
            )
        for c in s.commits:
            if c.pushed:
                console.print(f"  pushed to {c.branch}", markup=False)


def summary(console: Console, s: RunState, where: str | None = None) -> None:
    """The run as the CLI prints it (after a review, for a recorded run): one section after another."""
    for section in (
        _print_header,
        _print_rounds,
        _print_findings,
        _print_refusals,
        _print_spent,
        _print_commits,
    ):
        section(console, s)
    for line in publish_lines(s):
        console.print(line, markup=False, highlight=False)
    if where:
        console.print(f"  run record: {where}", markup=False, highlight=False)


def publish_lines(s: RunState) -> list[str]:
    """What publishing the run to its PR did: the latest attempt (a failure says why), the trunk
    re-verifications of its findings (``jury verify``), and a publish still to come."""
    from orchestrator.publishing import awaiting_publish

    out: list[str] = []
    if s.published:
        p = s.published[-1]
        where = f"{p.get('forge')} {p.get('repo')}#{p.get('number')}" if p.get("repo") else "its PR"
        if p.get("ok"):
            out.append(
                f"  published to {where}: review {p.get('reviewUrl') or p.get('reviewId')}, "
                f"check jury {p.get('conclusion')} ({len(s.published)} publish(es))"
            )
        else:
            out.append(f"  publish FAILED ({p.get('key')}): {p.get('error')}; retry: jury publish {s.slug}")
    if awaiting_publish(s):
        out.append("  publishing to the PR: pending")
    for f in s.findings.values():
        if f.trunk_runs:
            r = f.trunk_runs[-1]
            verdict = "passes" if r.get("passed") else f"FAILS ({r.get('problem') or r.get('error') or ''})"
            out.append(f"  {f.id} on trunk {r.get('trunk')} at {str(r.get('sha'))[:12]}: its test {verdict}")
    return out


def table_lines(fid: str, t: dict[str, Any]) -> list[str]:
    """A finding's verification table in words: the named tests on both trees, the coverage of the
    changed lines, the suite on the head and the fixed tree, the test configuration the fix changed."""
    verdict = "verified" if t.get("ok") else f"refuted: {t.get('reason')}"
    runner = t.get("runner") or "exit codes only"
    out = [f"  {fid} verification ({runner}, {t.get('seconds', 0):.1f} s): {verdict}"]
    for row in t.get("tests", [])[:10]:
        out.append(
            f"    test {row['id']}: {row.get('fixed') or 'not run'} with the fix, "
            f"{row.get('reverted') or 'not run'} without"
        )
    for c in t.get("coverage", []):
        if c["status"] == "exercised":
            what = (
                f"{len(c.get('executed', []))} of {len(c.get('changed', []))} changed lines run by the test"
            )
        elif c["status"] == "not exercised":
            what = f"NOT exercised (changed lines {c.get('changed')} not run)"
        else:
            what = c["status"] + (f" ({c['note']})" if c.get("note") else "")
        out.append(f"    coverage {c['path']}: {what}")
    if t.get("coverageNote"):
        out.append(f"    {t['coverageNote']}")
    suite = t.get("suite")
    if suite:
        out.append(f"    suite: {_suite_line(suite)}")
    for change in t.get("configChanges", []):
        out.append(f"    test configuration: {change}")
    return out


def _suite_line(d: dict[str, Any]) -> str:
    if d.get("head") is None:
        return d.get("note") or "not run"
    sides = []
    for name in ("head", "fixed"):
        side = d.get(name) or {}
        summary = side.get("summary") or "not run"
        cached = ", cached" if side.get("cached") else ""
        sides.append(f"{name} {summary} ({side.get('seconds', 0):.1f} s{cached})")
    weak = d.get("weakened") or []
    text = f"`{d.get('command')}`: " + "; ".join(sides)
    text += "; weakened: " + (", ".join(f"{w['id']} ({w['fixed']})" for w in weak[:5]) if weak else "none")
    if d.get("failing_on_head"):
        text += f"; already failing on the head (not blamed): {', '.join(d['failing_on_head'][:5])}"
    if d.get("note"):
        text += f"; {d['note']}"
    return text
