"""Prompt templates: a review round, a triage, a reply to a reviewer, a second opinion.

The templates are Markdown files next to this module, rendered with ``string.Template``. Every format
example an agent might echo back (``FINDING:``/``WHERE:``, the stop token, ``CONTEST``, the JSON verdict)
sits inside a code fence, so an agent that repeats its prompt does not raise findings or stop by echo.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from string import Template

from orchestrator.decide import SettledItem, StartRound
from orchestrator.domain import RoundStart
from orchestrator.refute.signals import Signal

__all__ = ["SettledItem", "refute_prompt", "reply_prompt", "review_prompt", "round_start", "triage_prompt"]

_LINE_LIMIT = 500


@cache
def _template(name: str) -> Template:
    return Template(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))


def _one_line(text: str | None, limit: int = _LINE_LIMIT) -> str:
    """Collapse whitespace so an item stays on its own line (and cannot start a fake keyword line)."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _fence(text: str) -> str:
    """``text`` inside a code fence longer than any backtick run it holds."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    mark = "`" * max(3, longest + 1)
    return f"{mark}\n{text.rstrip()}\n{mark}"


def _item(item: SettledItem) -> str:
    line = (
        f"- {_one_line(item.id)} [{_one_line(item.verdict)}] {_one_line(item.claim)} ({_one_line(item.loc)})"
    )
    reason = _one_line(item.reason)
    return f"{line}: {reason}" if reason else line


def _items(items: list[SettledItem], empty: str) -> str:
    return "\n".join(_item(i) for i in items) if items else empty


def review_prompt(
    *,
    round_n: int,
    repo: str,
    branch: str | None,
    trunk: str | None,
    base: str,
    head: str,
    settled: list[SettledItem],
    task: str | None = None,
    carried_from: str | None = None,
) -> str:
    """The prompt every reviewer gets in round ``round_n``; ``carried_from`` names the earlier run of the
    same PR whose settled findings open the list (they were decided on an earlier head)."""
    task_text = (
        f"\nWhat the change is meant to do:\n\n{_fence(task.strip())}\n" if task and task.strip() else ""
    )
    return _template("review.md").substitute(
        round_n=round_n,
        repo=repo,
        branch=branch or "(detached)",
        trunk=trunk or "(unknown)",
        base=base,
        head=head,
        task=task_text,
        settled=_items(settled, "none yet"),
        carried=(
            f"An earlier review of this pull request (run {_one_line(carried_from)}, on an earlier head) "
            "settled the findings named after it below; they stay settled unless the new commits change "
            "what they are about.\n\n"
            if carried_from
            else ""
        ),
    )


def round_start(step: StartRound) -> RoundStart:
    """The ``round.start`` event of the round ``decide`` opens: its facts, and the reviewers' prompt
    written from them (also kept as the artifact ``round-N.prompt.md``)."""
    prompt = review_prompt(
        round_n=step.n,
        repo=step.repo,
        branch=step.branch,
        trunk=step.trunk,
        base=step.base,
        head=step.sha,
        settled=step.settled,
        task=step.task,
        carried_from=step.carried_from,
    )
    return RoundStart(
        eid=f"round.start:{step.n}",
        n=step.n,
        sha=step.sha,
        prompt=prompt,
        prompt_file=f"round-{step.n}.prompt.md",
    )


def triage_prompt(
    *,
    finding_id: str,
    agent: str,
    claim: str,
    loc: str,
    body: str,
    base: str,
    turns: list[tuple[str, str]],
    refusals: list[str],
) -> str:
    """The judge's prompt for one finding, with the reviewer's contests and earlier refusals."""
    turns_text = ""
    if turns:
        parts = [f"### {_one_line(who)}\n\n{_fence(text)}" for who, text in turns]
        turns_text = "\n## Earlier turns on this finding\n\n" + "\n\n".join(parts) + "\n"
    refusals_text = ""
    if refusals:
        lines = "\n".join(f"- {_one_line(r)}" for r in refusals)
        refusals_text = (
            "\n## Earlier answers Jury refused for this finding\n\n"
            f"{lines}\n\nDo not repeat them: reproduce, test and name the test_command this time.\n"
        )
    return _template("triage.md").substitute(
        finding_id=finding_id,
        agent=agent,
        claim=_one_line(claim),
        loc=_one_line(loc),
        base=base,
        body=_fence(body) if body.strip() else "(none)",
        turns=turns_text,
        refusals=refusals_text,
    )


def reply_prompt(*, round_n: int, agent: str, outcomes: list[SettledItem]) -> str:
    """What a reviewer is told about its findings of round ``round_n``, asking for contests."""
    return _template("reply.md").substitute(
        round_n=round_n,
        agent=agent,
        outcomes=_items(outcomes, "(no findings settled)"),
    )


def _signal(n: int, signal: Signal) -> str:
    where = f", tree {_one_line(signal.tree)}" if signal.tree else ""
    code = "did not run" if signal.exit_code is None else f"exit {signal.exit_code}"
    output = _fence(signal.output_tail) if signal.output_tail.strip() else "(no output)"
    return (
        f"### {n}. {signal.kind}: {code}{where} ({signal.source})\n\n"
        f"Command:\n\n{_fence(_one_line(signal.command))}\n\nOutput (its end):\n\n{output}"
    )


def refute_prompt(
    *,
    claim: str,
    finding_id: str | None,
    signals: list[Signal],
    commands: list[str],
    base: str | None,
) -> str:
    """The refuter's prompt: the signals first (command, tree, exit code, output tail), then the claim.

    The commands it may run are the signals' commands and ``commands``, each once. The verdict format is
    shown inside a code fence and the prompt does not end on it, so an echoed prompt reads as no verdict.
    """
    allowed: list[str] = []
    for cmd in [s.command for s in signals] + list(commands):
        line = _one_line(cmd)
        if line and line not in allowed:
            allowed.append(line)
    base_note = (
        f" (the merge-base with the trunk is `{_one_line(base)}`: see the change with "
        f"`git diff {_one_line(base)}...HEAD`)"
        if base
        else ""
    )
    return _template("refute.md").substitute(
        signals="\n\n".join(_signal(i, s) for i, s in enumerate(signals, 1)) or "(no signal)",
        finding=f" — finding {_one_line(finding_id)}" if finding_id else "",
        base_note=base_note,
        claim=_fence(claim) if claim.strip() else "(no claim given)",
        commands=_fence("\n".join(allowed)) if allowed else "(none: read files and use read-only git only)",
    )
