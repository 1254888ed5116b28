"""The operator's limits reach the code that enforces them, through the CLI in a subprocess.

``JURY_BUDGET`` and ``JURY_CALL_CEILING`` are ceilings the ledger applies before an agent starts;
``JURY_MAX_OUTPUT`` is what is kept of an agent's output; without ``--timeout`` each agent process gets
``max(600, 3 × expect_seconds)`` of its own entry, and so does the verification of its fix. What the
supervisor started each process with is read back from the workers' own log lines (``proc.started``,
at ``JURY_LOG_LEVEL=INFO``), whose working directory names the action.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import fake_agent
from tests.e2e.test_review import events_of, review_args, run_dir, standard_jury

CAP = 4096


def with_expect(entry: str, seconds: int) -> str:
    assert "expect_seconds = 5\n" in entry
    return entry.replace("expect_seconds = 5\n", f"expect_seconds = {seconds}\n")


def started(state_dir: Path) -> dict[str, list[dict]]:
    """The workers' ``proc.started`` lines, by the action their working directory belongs to."""
    found: dict[str, list[dict]] = {}
    for log in sorted((state_dir / "logs").glob("worker-*.log")):
        for line in log.read_text().splitlines():
            if '"proc.started"' not in line:
                continue
            fields = json.loads(line[line.index("{") :])
            # <state>/worktrees/<slug>.<run id>.<action key, made safe>[.verify].<holder>
            name = Path(fields["cwd"]).name.split(".", 2)[2].rsplit(".", 1)[0]
            found.setdefault(name, []).append(fields)
    return found


def test_output_cap_and_default_timeouts_reach_every_agent_process(
    jury, sample_repo: Path, write_config, state_dir: Path
) -> None:
    config = write_config(
        fake_agent("finder", "find"),
        with_expect(fake_agent("loud", "loud"), 250),
        with_expect(fake_agent("judge", "clean", "fix"), 300),
    )
    args = review_args(sample_repo, config)
    args[args.index("finder,quiet")] = "finder,loud"
    r = jury(*args, env={"JURY_MAX_OUTPUT": str(CAP), "JURY_LOG_LEVEL": "INFO"})
    assert r.code == 0, r.out + r.err
    d = run_dir(state_dir)

    # the loud reviewer's 200 kB were cut to the cap, head and tail: its last word still counted
    kept = (d / "round-1.loud.stdout.txt").read_text()
    assert len(kept.encode()) <= CAP + 200 and kept.rstrip().endswith("NO NEW FINDINGS")
    (loud,) = [
        e for e in events_of(d) if e["t"] == "agent.report" and e["agent"] == "loud" and e["round"] == 1
    ]
    assert loud["verdict"] == "clean"

    procs = started(state_dir)
    timeouts = {name: sorted({p["timeout"] for p in ps}) for name, ps in procs.items()}
    assert timeouts["review-r1-finder"] == [600.0]  # max(600, 3 × 5)
    assert timeouts["review-r1-loud"] == [750.0]  # max(600, 3 × 250)
    triage = [n for n in procs if n.startswith("triage-") and not n.endswith(".verify")]
    verify = [n for n in procs if n.startswith("triage-") and n.endswith(".verify")]
    assert len(triage) == 1 and len(verify) == 1, sorted(procs)
    assert timeouts[triage[0]] == [900.0] and timeouts[verify[0]] == [900.0]  # the judge's: 3 × 300
    agents = [p for name, ps in procs.items() if not name.endswith(".verify") for p in ps]
    assert agents and {p["max_output"] for p in agents} == {CAP}


def test_jury_budget_is_the_runs_ceiling(jury, sample_repo: Path, write_config, state_dir: Path) -> None:
    r = jury(*review_args(sample_repo, standard_jury(write_config)), env={"JURY_BUDGET": "0.1"})
    assert r.code == 1, r.out + r.err
    d = run_dir(state_dir)
    shown = jury("show", d.name).out
    assert re.search(r"budget exhausted: run ceiling: .* > ceiling \$0\.10 \(projected: ", shown), shown
    events = events_of(d)
    assert [e for e in events if e["t"] == "budget.refused"]
    assert not [e for e in events if e["t"] == "agent.launch"], "an agent ran past the ceiling"
    assert not list(d.glob("*.stdout.txt"))


def test_jury_call_ceiling_refuses_a_call_projected_over_it(
    jury, sample_repo: Path, write_config, state_dir: Path
) -> None:
    r = jury(*review_args(sample_repo, standard_jury(write_config)), env={"JURY_CALL_CEILING": "0.1"})
    assert r.code == 1, r.out + r.err
    d = run_dir(state_dir)
    shown = jury("show", d.name).out
    assert re.search(
        r"budget exhausted: call ceiling: this call.s projected cost \$0\.\d\d > ceiling \$0\.10", shown
    ), shown
    assert not [e for e in events_of(d) if e["t"] == "agent.launch"]
