"""docs/publishing.md's table of what each check conclusion is on each forge and mode is the table the
forge clients send: every conclusion of ``orchestrator.publishing`` has its row, and each row's states are
the clients' own maps (``STATUS_STATE``; a check run takes the conclusion itself)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from orchestrator.forge import FORGES
from orchestrator.publishing import Conclusion

DOC = Path(__file__).resolve().parents[2] / "docs" / "publishing.md"


def table() -> dict[str, tuple[str, str, str]]:
    rows: dict[str, tuple[str, str, str]] = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        found = re.match(r"`([a-z_]+)`:", cells[0]) if len(cells) == 4 else None
        if found:
            run, status, lab = (c.strip("`") for c in cells[1:])
            rows[found[1]] = (run, status, lab)
    return rows


def test_the_documented_states_are_the_ones_sent() -> None:
    rows = table()
    assert set(rows) == set(get_args(Conclusion))
    for conclusion, (check_run, github_status, gitlab_status) in rows.items():
        assert check_run == conclusion
        assert FORGES["github"].check_states[conclusion] == github_status
        assert FORGES["gitlab"].check_states[conclusion] == gitlab_status
    # a status never passes what a check run would not: only success is success anywhere
    assert [c for c, row in rows.items() if "success" in row] == ["success"]
