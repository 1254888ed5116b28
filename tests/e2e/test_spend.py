"""What a run spent, from the agents' own reports to ``jury show``, through the CLI in a subprocess.

The metered fake agents answer as codex ``exec --json`` does: their message, then ``turn.completed``
with token counts and no dollars, so each call's cost is tokens x ``config/prices.toml`` (openai/gpt-5:
200k input at $1.25/M + 10k output at $10/M = $0.35 a call). The quiet reviewer reports nothing: its
calls are of unknown cost, counted as such and never as $0.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import fake_agent
from tests.e2e.test_review import events_of, review_args, run_dir

PER_CALL = 0.35
METERED = 'report = "codex-json"\nmodel = "openai/gpt-5"\n'


def test_show_prints_spend_per_agent_per_finding_and_in_total(
    jury, sample_repo: Path, write_config, state_dir
) -> None:
    config = write_config(
        fake_agent("finder", "metered-find") + METERED,
        fake_agent("quiet", "clean"),
        fake_agent("judge", "clean", "metered-fix") + METERED,
    )
    r = jury(*review_args(sample_repo, config))
    assert r.code == 0, r.out + r.err
    d = run_dir(state_dir)
    events = events_of(d)
    spent = [(e["agent"], e["key"], e.get("amount")) for e in events if e["t"] == "budget.spent"]
    # finder: review r1, the reply, review r2; judge: the triage; quiet: two reviews of unknown cost
    metered = [(a, k, amount) for a, k, amount in spent if a != "quiet"]
    assert sorted(k.split(":")[0] for _, k, _ in metered) == ["reply", "review", "review", "triage"]
    assert all(abs(amount - PER_CALL) < 1e-9 for _, _, amount in metered), metered
    assert [amount for a, _, amount in spent if a == "quiet"] == [None, None]
    (finding,) = [e["id"] for e in events if e["t"] == "finding.raised"]

    shown = jury("show", d.name)
    assert shown.code == 0, shown.err
    lines = [line.strip() for line in shown.out.splitlines()]
    assert "spent: $1.4000 (finder $1.0500, judge $0.3500); 2 call(s) of unknown cost" in lines, shown.out
    assert f"spent per finding: {finding} $0.3500" in lines, shown.out


def test_a_run_whose_costs_are_all_unknown_says_so(jury, sample_repo: Path, write_config, state_dir) -> None:
    config = write_config(
        fake_agent("finder", "find"), fake_agent("quiet", "clean"), fake_agent("judge", "clean", "fix")
    )
    assert jury(*review_args(sample_repo, config)).code == 0
    shown = jury("show", run_dir(state_dir).name)
    (line,) = [line.strip() for line in shown.out.splitlines() if line.strip().startswith("spent")]
    calls = len([e for e in events_of(run_dir(state_dir)) if e["t"] == "budget.spent"])
    assert calls >= 5
    assert line == f"spent: $0.0000 (nothing known); {calls} call(s) of unknown cost"
    assert not re.search(r"spent per finding", shown.out)
