"""Words that are not Jury's (a reviewer's claim, a forge's error, a test id) are shown as written by the
CLI's tables: Rich reads a string cell as markup, so ``[/etc]`` in one stopped ``jury show`` with a
MarkupError and ``[red]`` restyled the table."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from jury_cli.sweep import table
from orchestrator.store.files import FileStore
from tests.fakes import console_run
from workers.fleet.sweep import SweepReport, SweepRow

MARKUP = "parse() reads t[/etc] past the end [red]twice[/red] [link=x]"


def test_jury_show_prints_a_claim_with_markup_as_written(jury, state_dir: Path) -> None:
    store = FileStore(state_dir)
    store.create_run("markup-run")
    store.append("markup-run", console_run.started() + console_run.alpha_found(claim=MARKUP))
    r = jury("show", "markup-run")
    assert r.code == 0, r.err
    assert "t[/etc]" in r.out and "[red]twice[/red]" in r.out and "[link=x]" in r.out


def test_the_sweep_table_prints_a_forge_error_as_written() -> None:
    row = SweepRow(repo="acme/w[/x]", number=3, head=None, outcome="error", slug=None, reason=MARKUP)
    console = Console(width=400, record=True, color_system=None)
    console.print(table(SweepReport(rows=[row], dry_run=False, seconds=0.1)))
    text = console.export_text()
    assert "acme/w[/x]" in text and "[red]twice[/red]" in text
