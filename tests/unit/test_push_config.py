"""Who may turn pushing on: the operator's ``[jury] push`` and a review schedule's ``push``, never a
repository's ``jury.toml`` (trusted or not); ``--push`` / ``--no-push`` win over the file for one
command, and whatever is chosen is the run's ``JuryConfig.push``."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from orchestrator.config import RepoFile, Settings, load_config
from orchestrator.errors import ConfigError
from orchestrator.schedules import parse_schedules
from orchestrator.spec import Target
from orchestrator.start import RunOptions, jury_config
from workers.fleet import scheduler
from workers.runtime import firings

SOURCE = "/src/app/jury.toml (at merge-base 0123456789ab)"
PR = Target(repo="app", url="https://github.com/acme/app/pull/7", head="h" * 40)


def repo_file(text: str, *, trusted: bool) -> RepoFile:
    return RepoFile(
        source=SOURCE, identity="/src/app" if trusted else "github.com/acme/app", local=trusted, text=text
    )


def operator(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("trusted", [False, True])
def test_a_repository_cannot_turn_pushing_on_for_itself(trusted: bool, tmp_path: Path) -> None:
    text = "[jury]\nrounds = 3\npush = true\n"
    with capture_logs() as logs:
        cfg = load_config(repo_file(text, trusted=trusted))
    assert cfg.jury.push is False and cfg.jury.rounds == 3  # the rest of its [jury] still applies
    assert f"{SOURCE}: jury.push: ignored: only the operator's configuration may set it" in cfg.notes
    (warning,) = [e for e in logs if e["event"] == "config.ignored"]
    assert (warning["log_level"], warning["file"], warning["table"], warning["key"]) == (
        "warning",
        SOURCE,
        "jury",
        "push",
    )
    assert jury_config(Settings(dir=tmp_path), cfg, PR, RunOptions()).push is False
    # nor a repository listed in [trust] repos
    listed = operator(tmp_path, '[trust]\nrepos = ["github.com/acme/app"]\n')
    assert load_config(repo_file(text, trusted=False), listed).jury.push is False


def test_the_operators_file_turns_pushing_on_and_a_flag_wins_for_one_command(tmp_path: Path) -> None:
    on = operator(tmp_path, "[jury]\npush = true\n")
    cfg = load_config(repo_file("[jury]\npush = false\n", trusted=False), on)  # the repository's word: none
    assert cfg.jury.push is True
    settings = Settings(dir=tmp_path)
    assert jury_config(settings, cfg, PR, RunOptions()).push is True
    assert jury_config(settings, cfg, PR, RunOptions(push=False)).push is False  # --no-push
    off = load_config(None, None)
    assert off.jury.push is False and jury_config(settings, off, PR, RunOptions(push=True)).push is True


def test_push_must_be_a_boolean(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[jury\]\.push: must be true or false"):
        load_config(None, operator(tmp_path, '[jury]\npush = "yes"\n'))


def test_a_review_schedules_push_reaches_its_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tables: list[dict[str, object]] = [
        {"name": "n", "cron": "0 3 * * *", "kind": "review", "repos": ["acme/app"], "push": True},
        {"name": "m", "cron": "0 3 * * *", "kind": "review", "repos": ["acme/app"]},
    ]
    pushing, unset = parse_schedules("/etc/jury/config.toml", tables)
    assert pushing.push is True and unset.push is None  # None: the operator's [jury] push decides
    with pytest.raises(ConfigError, match="push: must be true or false"):
        parse_schedules("/etc/jury/config.toml", [{**tables[0], "push": "yes"}])
    with pytest.raises(ConfigError, match="push: applies to kind = 'review' only"):
        parse_schedules(
            "/etc/jury/config.toml",
            [{"name": "v", "cron": "0 3 * * *", "kind": "verify", "repos": ["acme/app"], "push": True}],
        )

    seen: list[bool | None] = []

    def fake_sweep_fleet(settings, repos, filters, options, **kw):  # type: ignore[no-untyped-def]
        from workers.fleet.sweep import SweepReport

        seen.append(options.run.push)
        return SweepReport(rows=[], dry_run=False, seconds=0.0)

    monkeypatch.setattr("workers.runtime.firings.sweep_fleet", fake_sweep_fleet)
    settings = Settings(dir=tmp_path)
    for s in (pushing, unset):
        firings.fire_review(scheduler.Firing(schedule=s, slot=0, settings=settings, config_file=None))
    assert seen == [True, None]
