"""What an ended run says on its PR, decided from its fold alone (pure): the ``jury`` check's conclusion,
the review's summary and its inline comments. ``workers/runtime/publish.py`` sends it to the forge.

The check tells the run's true state on the commit it is set on, and is never kinder than it: a converged
run is ``success`` when that commit holds every accepted fix, and ``action_required`` when it lacks them
(the fixes are commits on top of the reviewed head, on ``jury/<slug>``: the head still has the bug, and
the check says where the fixes are); a run
that could not review (an agent that could not run, the budget exhausted, no sandbox, cancelled) is
``neutral`` with the reason, whatever findings it had raised, since nobody judged them; a run that ended
with findings open or deferred, or whose convergence the second opinion refuted, is ``failure``; any
other end (the round cap, a failed push) is ``neutral`` with its reason.

Everything quoted here (claims, reasons, bodies, evidence, paths, agent names) was written by agents
that read hostile code, so it enters a body only through ``orchestrator.markdown_safe``: prose escaped to
render as written (no raw HTML, link, image or autolink, no mention, no HTML comment that could pass for
Jury's own markers), code verbatim in spans and fenced blocks nothing inside can close. The check's title
is plain text on the forge (``plain``); it is escaped where the summary shows it as a heading.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from orchestrator.fold import FindingState, RunState
from orchestrator.markdown_safe import code as code_span
from orchestrator.markdown_safe import code_block, escape, fit, plain
from orchestrator.markdown_safe import text as md
from orchestrator.spec import TERMINAL_STATES

Conclusion = Literal["success", "failure", "neutral", "action_required"]

INLINE_STATUSES = ("open", "deferred", "accepted")  # what gets a comment on its line
_LOC_RE = re.compile(r"^(?P<path>[^\s:][^:]*?):(?P<line>[1-9][0-9]{0,6})(?:[-:,][0-9]+)*$")
_UNPLACEABLE = re.compile(r"[`\x00-\x1f\x7f-\x9f\u2028\u2029]")  # a path the forge shows in a code span
BODY_LIMIT = 50_000  # under the forges' limit on a body (65,536 on GitHub) with room for the unplaced list
BODY_PROSE_LIMIT = 1500  # an open finding's body, shown verbatim in its comment
_COULD_NOT_REVIEW = ("sandbox unavailable", "budget exhausted")
JUDGE_COULD_NOT_RUN = "the judge could not run"  # how a triage whose judge never answered refuses its finding


# --- the verdict ------------------------------------------------------------------------------------


def could_not_review(s: RunState) -> str | None:
    """Why the run could not do its review, or None when it could (whatever it concluded)."""
    note = s.target.state_note or ""
    if s.state == "cancelled":
        return note or "cancelled"
    if s.budget_refused is not None or any(note.startswith(p) for p in _COULD_NOT_REVIEW):
        return note or f"budget exhausted: {s.budget_refused}"
    cur = s.current
    if cur is not None and s.config is not None:
        for name in s.config.reviewers:
            seat = cur.agents.get(name)
            if seat is not None and seat.state == "error":
                return note or f"reviewer {name} could not run: {seat.error or 'error'}"
    if s.state in TERMINAL_STATES and not s.rounds:
        return note or "no review round ran"
    open_ = [f for f in s.findings.values() if f.status == "open"]
    if open_ and all(f.refusals and f.refusals[-1].startswith(JUDGE_COULD_NOT_RUN) for f in open_):
        # Nobody judged what is open (the judge is missing or broke every time): not a finding confirmed.
        return f"{open_[-1].refusals[-1]} (on {', '.join(f.id for f in open_)})"
    return None


def unresolved(s: RunState) -> list[FindingState]:
    return [f for f in s.findings.values() if f.status in ("open", "deferred")]


def accepted_count(s: RunState) -> int:
    return sum(1 for f in s.findings.values() if f.status == "accepted")


def fix_commits(s: RunState) -> list[str]:
    """The shas of the accepted findings' fix commits, oldest first."""
    accepted = {f.id for f in s.findings.values() if f.status == "accepted"}
    return [c.sha for c in s.commits if not c.pushed and c.finding in accepted and c.sha]


def pushed_fixes(s: RunState) -> tuple[str, str] | None:
    """``(sha, branch)`` of the fixes pushed to the PR's forge (``--push``), or None when they were not
    (no ``--push``, or the push was held)."""
    if not s.target.url:
        return None
    pushed = [c for c in s.commits if c.pushed and c.branch]
    return (pushed[-1].sha, pushed[-1].branch or "") if pushed else None


def fixes_home(s: RunState) -> str:
    """Where the run's accepted fixes are, in words a person acts on."""
    pushed = pushed_fixes(s)
    if pushed is not None:
        return f"they are on branch {pushed[1]}"
    return f"`jury fetch {s.slug}` makes them branch jury/{s.slug}"


def tip_title(s: RunState) -> str:
    """The title of the check on the pushed fixes' commit, which holds every accepted fix."""
    return f"Jury: converged, {accepted_count(s)} fix(es) accepted, all on this commit"


def verdict(s: RunState, fixes_on_head: bool = False) -> tuple[Conclusion, str]:
    """The ``jury`` check's conclusion and its one-line title, for the reviewed head. ``fixes_on_head``:
    the head holds every accepted fix (its patch is in the head's history); a converged run whose
    accepted fixes the head lacks is not ``success`` there, since the head still has what was fixed."""
    accepted = accepted_count(s)
    if s.state not in TERMINAL_STATES:
        return "neutral", f"Jury: the run is still {s.state}"
    if s.state == "converged":
        if accepted and not fixes_on_head:
            return "action_required", plain(
                f"Jury: converged, {accepted} fix(es) accepted, not on this commit: {fixes_home(s)}", 200
            )
        return "success", f"Jury: converged, {accepted} fix(es) accepted"
    why = could_not_review(s)
    if why is not None:
        return "neutral", plain(f"Jury could not review: {why}", 200)
    if s.final_refutation is not None and s.final_refutation.outcome == "refuted":
        return "failure", plain(
            f"Jury: the second opinion refuted the converged claim: {s.final_refutation.reason}", 200
        )
    left = unresolved(s)
    if left:
        open_n = sum(1 for f in left if f.status == "open")
        return "failure", f"Jury: {open_n} finding(s) open, {len(left) - open_n} deferred"
    return "neutral", plain(f"Jury ended {s.state}: {s.target.state_note or 'no reason given'}", 200)


# --- text -------------------------------------------------------------------------------------------


def clip(text: str, limit: int) -> str:
    """One line of untrusted prose, safe in a Markdown body (``markdown_safe.text``)."""
    return md(text, limit)


def code(text: str, limit: int = 120) -> str:
    """Untrusted text as an inline code span, verbatim (``markdown_safe.code``)."""
    return code_span(text, limit)


def parse_loc(loc: str) -> tuple[str, int] | None:
    """``(path, line)`` of a finding's WHERE (``path:line``, ``path:line-end``, ``path:line:col``), or None.
    A path that climbs or is absolute is no place on the diff."""
    found = _LOC_RE.match((loc or "").strip().strip("`").strip())
    if found is None:
        return None
    path = found["path"].strip().removeprefix("./")
    # A backtick or a control character: no file of a real diff, and it would break the code span a
    # forge client puts the path in when the forge refuses the line (the summary lists it anyway).
    if not path or path.startswith("/") or ".." in path.split("/") or _UNPLACEABLE.search(path):
        return None
    return path, int(found["line"])


@dataclass(frozen=True)
class Note:
    """One inline comment: on ``line`` of ``path`` (new side), keyed by the finding's id."""

    key: str
    path: str
    line: int
    body: str
    old_line: int | None = None  # the line on the old side, when it is an unchanged line of the diff


@dataclass(frozen=True)
class Plan:
    """Everything a publish sends: the check, the review's summary and its inline comments."""

    conclusion: Conclusion
    title: str
    check_summary: str
    body: str
    comments: list[Note] = field(default_factory=list)
    off_diff: list[Note] = field(default_factory=list)  # listed in ``body``, not placed on a line


def _sha(sha: str | None) -> str:
    return code(sha[:12], 12) if sha else "`?`"


def _evidence(f: FindingState) -> list[str]:
    """The verification of an acceptance, in a few lines: the named tests on both trees, or the runs."""
    lines: list[str] = []
    table = f.verification_table or {}
    tests = table.get("tests") or []
    for t in tests[:5]:
        lines.append(
            f"{code(str(t.get('id', '?')), 100)}: {clip(str(t.get('fixed') or '-'), 40)} with the fix, "
            f"{clip(str(t.get('reverted') or '-'), 40)} without it"
        )
    if not tests:
        for v in f.verification[:4]:
            what = code(str(v.get("command", "")), 100)
            tree, exit_code = clip(str(v.get("tree")), 40), clip(str(v.get("exitCode")), 20)
            lines.append(f"{what} on the {tree} tree: exit {exit_code}")
    if table and not table.get("ok", True):
        lines.append(f"not verified: {clip(str(table.get('reason') or ''), 200)}")
    if not lines:
        lines.append("no mechanical verification recorded")
    return lines


def comment_body(s: RunState, f: FindingState) -> str:
    head = f"**Jury** ({clip(f.agent, 60)}, round {f.round}): {clip(f.claim, 300)}"
    if f.status == "accepted":
        fix = next((c.sha for c in s.commits if c.finding == f.id and not c.pushed), f.sha)
        lines = [
            f"{head}",
            "",
            f"**Accepted and fixed** in {_sha(fix)} on {code(f'jury/{s.slug}', 220)}; regression test "
            f"{code(f.test or '?')} run by {code(f.test_command or '?')}.",
            *(f"- {line}" for line in _evidence(f)),
        ]
    elif f.status == "deferred":
        lines = [head, "", f"**Deferred**, left for a human: {clip(f.reason, 400)}"]
    else:
        why = f" Last triage refused: {clip(f.refusals[-1], 300)}" if f.refusals else ""
        lines = [head, "", f"**Open**: not settled when the run ended.{why}"]
        if f.body:  # the reviewer's own words, code and all, as written: a block nothing inside can close
            lines += ["", "What the reviewer wrote:", "", code_block(f.body, BODY_PROSE_LIMIT)]
    return fit(lines, BODY_LIMIT)


def _refuted(s: RunState) -> list[FindingState]:
    return [
        f
        for f in s.findings.values()
        if (f.refutation is not None and f.refutation.outcome == "refuted")
        or any(r.startswith("refuter:") for r in f.reopens)
    ]


def _refuted_why(f: FindingState) -> str:
    refuter = [r for r in f.reopens if r.startswith("refuter:")]
    if refuter:
        return refuter[-1]
    return f.refutation.reason or "" if f.refutation is not None else ""


def _cost(s: RunState) -> str:
    per = ", ".join(f"{clip(a, 40)} ${v:.4f}" for a, v in sorted(s.spent.items())) or "nothing known"
    unknown = f"; {s.unknown_costs} call(s) of unknown cost" if s.unknown_costs else ""
    return f"${s.total_spent:.4f} ({per}){unknown}"


def _section(title: str, items: list[str]) -> list[str]:
    return [f"**{title}** ({len(items)})", *(f"- {i}" for i in items), ""] if items else []


def _one_line(s: RunState, n: Note) -> str:
    """An off-diff finding in the summary's list: its claim on one line (its comment holds a block)."""
    f = s.findings.get(n.key)
    return f"{clip(f.agent, 60)}: {clip(f.claim, 300)} ({f.status})" if f is not None else ""


def summary_body(
    s: RunState, conclusion: Conclusion, title: str, off_diff: list[Note], fixes_on_head: bool = False
) -> str:
    t, cfg = s.target, s.config
    by = lambda status: [f for f in s.findings.values() if f.status == status]  # noqa: E731
    lines = [
        f"### {escape(title)}",  # already plain(): one line, cut, no mention
        "",
        f"Run {code(s.slug, 200)} ended **{s.state}**: {clip(t.state_note or '', 400)}",
        f"Reviewed head {_sha(t.head)} against {code(t.trunk or '?', 80)} (merge-base {_sha(t.base)})"
        + (
            f"; reviewers {', '.join(clip(r, 40) for r in cfg.reviewers)}, judge {clip(cfg.judge, 40)}"
            if cfg
            else ""
        )
        + f"; {len(s.rounds)} round(s). Check `jury`: **{conclusion}**.",
        "",
        *fixes_line(s, fixes_on_head),
    ]
    accepted = []
    for f in by("accepted"):
        fix = next((c.sha for c in s.commits if c.finding == f.id and not c.pushed), f.sha)
        accepted.append(
            f"{code(f.id, 40)} {code(f.loc, 100)} {clip(f.claim, 200)}: fixed in {_sha(fix)}, "
            f"test {code(f.test or '?')}; " + "; ".join(_evidence(f))
        )
    lines += _section("Accepted", accepted)
    item = lambda f: f"{code(f.id, 40)} {code(f.loc, 100)} {clip(f.claim, 200)}"  # noqa: E731
    lines += _section("Rejected", [f"{item(f)}: {clip(f.reason, 300)}" for f in by("rejected")])
    lines += _section("Deferred", [f"{item(f)}: {clip(f.reason, 300)}" for f in by("deferred")])
    refuted = [f"{item(f)}: {clip(_refuted_why(f), 300)}" for f in _refuted(s)]
    if s.final_refutation is not None and s.final_refutation.outcome == "refuted":
        refuted.append(f"the converged claim: {clip(s.final_refutation.reason or '', 300)}")
    lines += _section("Refuted by the second opinion", refuted)
    lines += _section("Open", [item(f) for f in by("open")])
    if off_diff:
        lines += [
            "**Not on the diff** (these lines are outside the PR's diff, so they are listed here):",
            *(f"- {code(f'{n.path}:{n.line}', 120)}: {_one_line(s, n)}" for n in off_diff),
            "",
        ]
    lines.append(f"**Cost**: {_cost(s)}")
    for note in cfg.config_notes if cfg else []:
        lines.append(f"- config: {clip(note, 300)}")
    return fit(lines, BODY_LIMIT)


def fixes_line(s: RunState, fixes_on_head: bool) -> list[str]:
    """The line saying the reviewed head lacks the accepted fixes and where they are (none when it
    holds them or nothing was accepted)."""
    n = accepted_count(s)
    if not n or fixes_on_head:
        return []
    return [f"**Not on this commit**: its {n} accepted fix(es); {clip(fixes_home(s), 400)}.", ""]


def check_summary(s: RunState, conclusion: Conclusion, fixes_on_head: bool = False) -> str:
    counts = {
        st: sum(1 for f in s.findings.values() if f.status == st)
        for st in ("accepted", "rejected", "deferred", "open")
    }
    shown = ", ".join(f"{n} {st}" for st, n in counts.items())
    return fit(
        [
            f"Run {code(s.slug, 200)} ended **{s.state}**: {clip(s.target.state_note or '', 400)}",
            "",
            *fixes_line(s, fixes_on_head),
            f"Findings: {shown or 'none'}. Cost: {_cost(s)}.",
            f"Conclusion: {conclusion}.",
        ],
        BODY_LIMIT,
    )


def plan(
    s: RunState, diff: Mapping[str, Mapping[int, int | None]] | None, fixes_on_head: bool = False
) -> Plan:
    """What to publish for ``s``. ``diff``: the PR diff's new-side lines per path (None: unknown, so every
    comment is offered to the forge, which refuses lines outside its diff). ``fixes_on_head``: the
    reviewed head holds every accepted fix (``verdict``)."""
    conclusion, title = verdict(s, fixes_on_head)
    comments: list[Note] = []
    off: list[Note] = []
    for f in s.findings.values():
        if f.status not in INLINE_STATUSES:
            continue
        where = parse_loc(f.loc)
        if where is None:
            continue  # no line to put it on; the summary lists every finding anyway
        shown = diff.get(where[0], {}) if diff is not None else {}
        old_line = shown.get(where[1])
        note = Note(key=f.id, path=where[0], line=where[1], body=comment_body(s, f), old_line=old_line)
        if diff is None or where[1] in shown:
            comments.append(note)
        else:
            off.append(note)
    return Plan(
        conclusion=conclusion,
        title=title,
        check_summary=check_summary(s, conclusion, fixes_on_head),
        body=summary_body(s, conclusion, title, off, fixes_on_head),
        comments=comments,
        off_diff=off,
    )
