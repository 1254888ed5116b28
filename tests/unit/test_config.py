"""Settings, the built-in agent catalog, jury.toml merging and validation, and jury resolution."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest

from orchestrator.config import (
    ALLOWED_AGENT_KEYS,
    SECRET_NAME_RE,
    JuryDefaults,
    RepoConfig,
    config_dir,
    load_catalog,
    load_config,
    load_settings,
    resolve_jury,
)
from orchestrator.domain import AgentSpec
from orchestrator.errors import ConfigError

BUILT_IN = (
    "codex",
    "claude",
    "gemini",
    "opencode",
    "qwen",
    "copilot",
    "cursor",
    "amp",
    "grok",
    "kimi",
    "droid",
)


def write_repo(tmp_path: Path, text: str) -> Path:
    """A repo folder holding ``jury.toml`` with ``text``."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "jury.toml").write_text(text, encoding="utf-8")
    return repo


# --- the built-in catalog ---------------------------------------------------------------------------


def test_catalog_holds_every_built_in_agent() -> None:
    catalog = load_catalog()
    assert set(BUILT_IN) <= set(catalog)
    files = sorted(p.stem for p in (config_dir() / "agents").glob("*.toml"))
    assert files == sorted(catalog)


@pytest.mark.parametrize("name", BUILT_IN)
def test_catalog_entry_is_usable(name: str) -> None:
    spec = load_catalog()[name]
    assert spec.name == name
    for argv in (spec.argv, spec.judge_argv, spec.resume_argv):
        if argv is None:
            continue
        joined = " ".join(argv)
        assert "{prompt}" in joined or "{prompt_file}" in joined
        for arg in argv:
            assert "{model_args}" not in arg or arg == "{model_args}"
    if spec.resume_argv is not None:
        assert "{session}" in " ".join(spec.resume_argv)
    if spec.session_from is not None:
        assert re.compile(spec.session_from).groups == 1
    if spec.model_args:
        assert "{model}" in " ".join(spec.model_args)
    assert spec.install
    assert spec.expect_seconds > 0
    assert not spec.env  # the catalog sets no environment; secrets come through env_pass


@pytest.mark.parametrize(
    ("name", "report", "expect_seconds"),
    [
        ("codex", "codex-json", 1200),
        ("claude", "result-json", 900),
        ("opencode", "opencode-json", 600),
        ("qwen", "result-json", 600),
        ("droid", "result-json", 120),
        ("kimi", "stream-json", 600),
        ("gemini", "whole", 600),
    ],
)
def test_catalog_report_formats_and_times(name: str, report: str, expect_seconds: float) -> None:
    spec = load_catalog()[name]
    assert spec.report == report
    assert spec.expect_seconds == expect_seconds


def test_codex_and_claude_entries() -> None:
    catalog = load_catalog()
    codex, claude = catalog["codex"], catalog["claude"]
    assert codex.can_judge and claude.can_judge
    assert "read-only" in codex.argv and "workspace-write" in (codex.judge_argv or [])
    assert codex.model_args == ["-m", "{model}"]
    assert codex.session_from is not None
    found = re.search(codex.session_from, "session id: 0199-abc\n")
    assert found is not None and found.group(1) == "0199-abc"
    assert "OPENAI_API_KEY" in codex.env_pass
    assert claude.new_session and "--output-format" in claude.argv and "json" in claude.argv
    assert "plan" in claude.argv and "acceptEdits" in (claude.judge_argv or [])
    assert "ANTHROPIC_API_KEY" in claude.env_pass


def test_catalog_file_must_hold_its_own_agent(tmp_path: Path) -> None:
    (tmp_path / "foo.toml").write_text('[agents.bar]\nargv = ["bar", "{prompt}"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"foo\.toml: must hold exactly one table, \[agents\.foo\]"):
        load_catalog(tmp_path)


def test_template_jury_toml_parses_and_its_example_is_valid(tmp_path: Path) -> None:
    text = (config_dir() / "jury.toml").read_text(encoding="utf-8")
    assert tomllib.loads(text) == {}
    example = "\n".join(line[2:] for line in text.splitlines() if line.startswith("# "))
    repo = write_repo(tmp_path, example)
    cfg = load_config(repo)
    assert cfg.jury == JuryDefaults(reviewers=["codex", "claude"], judge="codex", rounds=10)
    assert cfg.agents["codex"].model and cfg.agents["mycli"].can_judge


# --- merging ----------------------------------------------------------------------------------------


def test_defaults_without_repo_file(tmp_path: Path) -> None:
    cfg = load_config(tmp_path)
    assert cfg.jury == JuryDefaults()
    assert cfg.agents == load_catalog()
    assert all(p.parent.name == "agents" for p in cfg.source)
    assert resolve_jury(cfg, None, None, None) == (["codex", "claude"], "codex", 10)


def test_override_is_key_by_key(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, '[agents.codex]\nmodel = "gpt-5-codex"\n')
    cfg = load_config(repo)
    built_in = load_catalog()["codex"]
    codex = cfg.agents["codex"]
    assert codex.model == "gpt-5-codex"
    assert codex.argv == built_in.argv
    assert codex.judge_argv == built_in.judge_argv
    assert codex.model_args == built_in.model_args
    assert codex.env_pass == built_in.env_pass
    assert cfg.source[-1] == repo / "jury.toml"


def test_added_agent_gets_spec_defaults(tmp_path: Path) -> None:
    repo = write_repo(
        tmp_path,
        '[agents.mine]\nargv = ["mine", "{model_args}", "{prompt}"]\nenv = { MINE_COLOR = "0" }\n'
        '[jury]\nreviewers = ["mine"]\n',
    )
    cfg = load_config(repo)
    mine = cfg.agents["mine"]
    assert mine == AgentSpec(name="mine", argv=["mine", "{model_args}", "{prompt}"], env={"MINE_COLOR": "0"})
    assert not mine.can_judge
    assert resolve_jury(cfg, None, None, None) == (["mine"], "codex", 10)


def test_config_file_overrides_repo_file(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, '[jury]\nreviewers = ["gemini"]\nrounds = 3\n[agents.codex]\nmodel = "a"\n')
    extra = tmp_path / "extra.toml"
    extra.write_text('[jury]\njudge = "claude"\n[agents.codex]\nexpect_seconds = 50\n', encoding="utf-8")
    cfg = load_config(repo, extra)
    assert cfg.jury == JuryDefaults(reviewers=["gemini"], judge="claude", rounds=3)
    assert cfg.agents["codex"].model == "a" and cfg.agents["codex"].expect_seconds == 50
    assert cfg.source[-2:] == [repo / "jury.toml", extra]


def test_agent_added_and_judged_in_one_file(tmp_path: Path) -> None:
    repo = write_repo(
        tmp_path,
        '[jury]\njudge = "mine"\n'
        '[agents.mine]\nargv = ["m", "{prompt}"]\njudge_argv = ["m", "-w", "{prompt}"]\n',
    )
    assert load_config(repo).jury.judge == "mine"


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match="nope.toml: config file not found"):
        load_config(None, missing)


# --- validation errors ------------------------------------------------------------------------------

CMD = '["x", "{prompt}"]'


@pytest.mark.parametrize(
    ("text", "where", "expected"),
    [
        (f"[agents.foo]\nargvv = {CMD}\n", "agents.foo", "unknown key 'argvv' (allowed: argv, judge_argv"),
        ("[agents.foo]\nargv = []\n", "agents.foo.argv", "must be a non-empty list of strings"),
        ('[agents.foo]\nargv = "x {prompt}"\n', "agents.foo.argv", "must be a non-empty list of strings"),
        ('[agents.foo]\nargv = ["x", 1]\n', "agents.foo.argv", "must be a non-empty list of strings"),
        ('[agents.foo]\nmodel = "m"\n', "agents.foo", "new agent needs argv"),
        (
            f'[agents.foo]\nargv = {CMD}\nreport = "xml"\n',
            "agents.foo.report",
            "must be one of whole, tail, result-json, opencode-json, stream-json, codex-json",
        ),
        (
            f"[agents.foo]\nargv = {CMD}\nsession_from = '(unclosed'\n",
            "agents.foo.session_from",
            "invalid regex:",
        ),
        (
            f"[agents.foo]\nargv = {CMD}\nsession_from = 'id: \\S+'\n",
            "agents.foo.session_from",
            "exactly one capturing group",
        ),
        (
            f'[agents.foo]\nargv = {CMD}\nenv = {{ OPENAI_API_KEY = "sk-1" }}\n',
            "agents.foo.env.OPENAI_API_KEY",
            "looks like a secret; keep secrets out of jury.toml — set it in the worker's environment "
            "and list it in env_pass",
        ),
        (
            f'[agents.foo]\nargv = {CMD}\nenv = {{ gh_token = "x" }}\n',
            "agents.foo.env.gh_token",
            "looks like a secret",
        ),
        (f"[agents.foo]\nargv = {CMD}\nenv = {{ A = 1 }}\n", "agents.foo.env.A", "must be a string"),
        ('[agents.foo]\nargv = ["x", "--dir"]\n', "agents.foo.argv", "must pass the prompt"),
        ('[agents.foo]\nargv = ["x", "{promt}"]\n', "agents.foo.argv", "unknown placeholder '{promt}'"),
        (
            '[agents.foo]\nargv = ["x", "--m={model_args}", "{prompt}"]\n',
            "agents.foo.argv",
            "'{model_args}' must be a list element of its own",
        ),
        (
            f'[agents.foo]\nargv = {CMD}\nresume_argv = ["x", "{{prompt}}"]\n',
            "agents.foo.resume_argv",
            "must pass the session",
        ),
        (
            f'[agents.foo]\nargv = {CMD}\nmodel_args = "-m"\n',
            "agents.foo.model_args",
            "must be a list of strings",
        ),
        (f"[agents.foo]\nargv = {CMD}\nnew_session = 1\n", "agents.foo.new_session", "must be true or false"),
        (
            f"[agents.foo]\nargv = {CMD}\nexpect_seconds = 0\n",
            "agents.foo.expect_seconds",
            "must be a positive",
        ),
        (f'[agents.foo]\nargv = {CMD}\nenv_pass = ["A B"]\n', "agents.foo.env_pass", "not an environment"),
        ('[agents.codex]\nargv = ["codex"]\n', "agents.codex.argv", "must pass the prompt"),
        ("[agents.codex]\nreport = 3\n", "agents.codex.report", "must be one of"),
        ('[agents]\nfoo = "x"\n', "agents.foo", "must be a table"),
        ('[jury]\njudge = "x"\n', "[jury].judge", "unknown agent 'x' (known: "),
        ('[jury]\nreviewers = ["codex", "x"]\n', "[jury].reviewers", "unknown agent 'x'"),
        ("[jury]\nreviewers = []\n", "[jury].reviewers", "must be a non-empty list of strings"),
        ("[jury]\nrounds = 0\n", "[jury].rounds", "must be a whole number >= 1"),
        ("[jury]\nreviewer = []\n", "[jury]", "unknown key 'reviewer' (allowed: reviewers, judge, rounds)"),
        (
            f'[agents.foo]\nargv = {CMD}\n[jury]\njudge = "foo"\n',
            "[jury].judge",
            "agent 'foo' cannot judge: it has no judge_argv",
        ),
        ("[juri]\nrounds = 2\n", "unknown table [juri]", "(allowed: agents, jury, checks)"),
        ("[agents.foo\nargv = 1\n", "invalid TOML", "line 1"),
    ],
)
def test_repo_file_errors(tmp_path: Path, text: str, where: str, expected: str) -> None:
    repo = write_repo(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(repo)
    message = str(info.value)
    assert message.startswith(f"{repo / 'jury.toml'}: ")
    assert where in message
    assert expected in message


def test_errors_name_the_config_file(tmp_path: Path) -> None:
    extra = tmp_path / "team.toml"
    extra.write_text(f"[agents.foo]\nargv = {CMD}\nargvv = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"team\.toml: agents\.foo: unknown key 'argvv'"):
        load_config(tmp_path, extra)


def test_every_allowed_key_is_an_agent_field() -> None:
    keys = {field.alias or name for name, field in AgentSpec.model_fields.items()}
    assert set(ALLOWED_AGENT_KEYS) == keys - {"name"}


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("GH_TOKEN", True),
        ("aws_secret_access_key", True),
        ("DB_PASSWORD", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("BASIC_AUTH", True),
        ("MY_SESSION", True),
        ("COOKIE_JAR", True),
        ("PRIVATE_PEM", True),
        ("CODEX_HOME", False),
        ("OPENAI_BASE_URL", False),
        ("PATH", False),
    ],
)
def test_secret_name_re(name: str, secret: bool) -> None:
    assert bool(SECRET_NAME_RE.search(name)) is secret


# --- resolve_jury -----------------------------------------------------------------------------------


@pytest.fixture
def cfg() -> RepoConfig:
    agents = load_catalog()
    agents["plain"] = AgentSpec(name="plain", argv=["plain", "{prompt}"])
    return RepoConfig(
        agents=agents, jury=JuryDefaults(reviewers=["gemini"], judge="claude", rounds=4), source=[]
    )


def test_flags_override_jury_table(cfg: RepoConfig) -> None:
    assert resolve_jury(cfg, None, None, None) == (["gemini"], "claude", 4)
    assert resolve_jury(cfg, ["qwen", "plain"], "codex", 2) == (["qwen", "plain"], "codex", 2)


@pytest.mark.parametrize(
    ("reviewers", "judge", "rounds", "expected"),
    [
        (["nope"], None, None, "unknown agent 'nope' (known: "),
        (None, "nope", None, "unknown agent 'nope' (known: "),
        (None, "plain", None, "agent 'plain' cannot judge: it has no judge_argv"),
        ([], None, None, "no reviewers"),
        (["codex", "codex"], None, None, "listed more than once"),
        (None, None, 0, "rounds must be at least 1"),
    ],
)
def test_resolve_jury_errors(
    cfg: RepoConfig, reviewers: list[str] | None, judge: str | None, rounds: int | None, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_jury(cfg, reviewers, judge, rounds)
    assert expected in str(info.value)


# --- settings ---------------------------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.upper().startswith("JURY_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_settings_defaults(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("HOME", str(tmp_path))
    settings = load_settings()
    assert settings.redis_url is None
    assert settings.dir == tmp_path / ".jury"
    assert settings.alive_every == 30.0
    assert settings.visibility_timeout == 6 * 3600
    assert settings.log_level == "INFO"
    assert settings.log_json is None
    assert settings.worker_concurrency == 4
    assert settings.kill_grace == 5.0


def test_settings_from_env(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("HOME", str(tmp_path))
    clean_env.setenv("JURY_DIR", "~/state")
    clean_env.setenv("JURY_REDIS_URL", "redis://localhost:6379/3")
    clean_env.setenv("JURY_LOG_LEVEL", "debug")
    clean_env.setenv("JURY_LOG_JSON", "true")
    clean_env.setenv("JURY_WORKER_CONCURRENCY", "2")
    settings = load_settings()
    assert settings.dir == tmp_path / "state"
    assert settings.redis_url == "redis://localhost:6379/3"
    assert settings.log_level == "DEBUG"
    assert settings.log_json is True
    assert settings.worker_concurrency == 2


def test_settings_log_json_auto(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("JURY_LOG_JSON", "auto")
    assert load_settings().log_json is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("JURY_ALIVE_EVERY", "often"),
        ("JURY_ALIVE_EVERY", "0"),
        ("JURY_VISIBILITY_TIMEOUT", "1.5h"),
        ("JURY_LOG_LEVEL", "LOUD"),
        ("JURY_LOG_JSON", "maybe"),
        ("JURY_WORKER_CONCURRENCY", "0"),
        ("JURY_KILL_GRACE", "-1"),
    ],
)
def test_bad_setting_names_its_variable(clean_env: pytest.MonkeyPatch, name: str, value: str) -> None:
    clean_env.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert name in str(info.value)


# --- http and check agents, [checks] ----------------------------------------------------------------

HTTP = '[agents.h]\nkind = "http"\nbase_url = "http://127.0.0.1:9/v1/"\nmodel = "openai/gpt-5"\n'
CHECK = '[agents.lint]\nkind = "check"\ncommand = "ruff check --output-format concise ."\n'


def test_http_agent_from_toml(tmp_path: Path) -> None:
    repo = write_repo(
        tmp_path,
        HTTP + 'api_key_env = "MY_KEY"\nfamily = "Acme"\nprice = { input = 1.25, output = 10 }\n'
        'fallback = ["openai/gpt-5-mini"]\nmax_rounds = 5\ntimeout = 30\n'
        '[jury]\nreviewers = ["h"]\njudge = "h"\n',
    )
    cfg = load_config(repo)
    h = cfg.agents["h"]
    assert h.kind == "http" and h.argv == []
    assert h.base_url == "http://127.0.0.1:9/v1"  # trailing slash dropped
    assert h.api_key_env == "MY_KEY"
    assert h.family == "acme"  # the explicit family wins over the vendor prefix
    assert h.price == {"input": 1.25, "output": 10.0}
    assert h.fallback == ["openai/gpt-5-mini"] and h.max_rounds == 5 and h.timeout == 30.0
    assert h.can_judge
    assert resolve_jury(cfg, None, None, None) == (["h"], "h", 10)


def test_family_defaults_to_vendor_prefix_and_survives_the_wire() -> None:
    spec = AgentSpec(name="h", kind="http", base_url="http://x", model="anthropic/claude-x")
    assert spec.family == "anthropic"
    pinned = spec.model_copy(update={"family_override": "other"})
    assert pinned.family == "other"
    wire = pinned.model_dump(by_alias=True)
    assert wire["family"] == "other" and "family_override" not in wire
    assert AgentSpec.model_validate(wire) == pinned
    assert AgentSpec(name="c", argv=["c", "{prompt}"]).family is None


def test_override_changes_family_without_touching_the_rest(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, HTTP + 'family = "x"\n')
    extra = tmp_path / "extra.toml"
    extra.write_text('[agents.h]\nmodel = "google/gemini"\n', encoding="utf-8")
    cfg = load_config(repo, extra)
    assert cfg.agents["h"].family == "x" and cfg.agents["h"].model == "google/gemini"


def test_check_agent_from_toml(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, CHECK + 'parser = "ruff"\nscope = "all"\n')
    lint = load_config(repo).agents["lint"]
    assert lint.kind == "check" and lint.command == "ruff check --output-format concise ."
    assert lint.parser == "ruff" and lint.scope == "all"
    assert not lint.can_judge


def test_check_agent_defaults(tmp_path: Path) -> None:
    lint = load_config(write_repo(tmp_path, CHECK)).agents["lint"]
    assert (lint.parser, lint.scope) == ("auto", "changed")


def test_checks_table_merges_key_by_key(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, '[checks]\ntest = "pytest -q"\nlint = "ruff check ."\n')
    extra = tmp_path / "extra.toml"
    extra.write_text('[checks]\ntest = "python -m pytest -x"\n', encoding="utf-8")
    assert load_config(repo).checks == {"test": "pytest -q", "lint": "ruff check ."}
    assert load_config(repo, extra).checks == {"test": "python -m pytest -x", "lint": "ruff check ."}
    assert load_config(tmp_path).checks == {}


@pytest.mark.parametrize(
    ("text", "where", "expected"),
    [
        ('[agents.h]\nkind = "rpc"\n', "agents.h.kind", "must be one of cli, http, check"),
        ('[agents.h]\nkind = "http"\nmodel = "m"\n', "agents.h", "an http agent needs base_url"),
        ('[agents.h]\nkind = "http"\nbase_url = "http://x"\n', "agents.h", "an http agent needs model"),
        (
            '[agents.h]\nkind = "http"\nmodel = "m"\nbase_url = "ftp://x"\n',
            "agents.h.base_url",
            "must be an http:// or https:// URL",
        ),
        (
            '[agents.h]\nmodel = "m"\nbase_url = "https://u:sk-1@x"\n',
            "agents.h.base_url",
            "must not hold credentials",
        ),
        (HTTP + 'api_key_env = "sk-live-123"\n', "agents.h.api_key_env", "must be the NAME of"),
        (HTTP + "price = { input = 1 }\n", "agents.h.price", "needs both input and output"),
        (HTTP + "price = { input = 1, output = 2, x = 3 }\n", "agents.h.price", "unknown key 'x'"),
        (HTTP + "price = { input = -1, output = 2 }\n", "agents.h.price", "input: must be a number >= 0"),
        (HTTP + 'price = "cheap"\n', "agents.h.price", "must be a table"),
        (HTTP + "fallback = [1]\n", "agents.h.fallback", "must be a list of strings"),
        (HTTP + "max_rounds = 0\n", "agents.h.max_rounds", "must be a whole number >= 1"),
        (HTTP + "timeout = 0\n", "agents.h.timeout", "must be a positive number of seconds"),
        (HTTP + 'family = ""\n', "agents.h.family", "must be a non-empty string"),
        ("[agents.codex]\nusd_per_minute = -1\n", "agents.codex.usd_per_minute", "must be a number >= 0"),
        ('[agents.codex]\nusd_per_minute = "1"\n', "agents.codex.usd_per_minute", "must be a number >= 0"),
        ('[agents.c]\nkind = "check"\n', "agents.c", "a check agent needs command"),
        ('[agents.c]\nkind = "check"\ncommand = ""\n', "agents.c.command", "non-empty command string"),
        (
            '[agents.c]\nkind = "check"\ncommand = "ruff \'unclosed"\n',
            "agents.c.command",
            "cannot be split into words",
        ),
        (CHECK + 'parser = "eslint"\n', "agents.lint.parser", "must be one of auto, ruff, mypy"),
        (CHECK + 'scope = "diff"\n', "agents.lint.scope", "must be one of changed, all"),
        (
            CHECK + '[jury]\njudge = "lint"\n',
            "[jury].judge",
            "agent 'lint' cannot judge: it is a check agent",
        ),
        ('[agents.codex]\nkind = "check"\n', "agents.codex", "a check agent needs command"),
        ('[agents.h]\nkind = "cli"\n', "agents.h", "new agent needs argv"),
        ('[checks]\ntest = ""\n', "[checks].test", "must be a non-empty command string"),
        ('[checks]\ntest = ["pytest"]\n', "[checks].test", "must be a non-empty command string"),
        ('[checks]\ntest = "pytest \'x"\n', "[checks].test", "cannot be split into words"),
        ('[checks]\n"a b" = "pytest"\n', "[checks].a b", "bad check name"),
        ('checks = "pytest"\n', "[checks]", "must be a table"),
    ],
)
def test_http_check_and_checks_errors(tmp_path: Path, text: str, where: str, expected: str) -> None:
    repo = write_repo(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(repo)
    message = str(info.value)
    assert message.startswith(f"{repo / 'jury.toml'}: ")
    assert where in message
    assert expected in message


def test_cli_override_of_http_agent_needs_argv(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, HTTP)
    extra = tmp_path / "extra.toml"
    extra.write_text('[agents.h]\nkind = "cli"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"extra\.toml: agents\.h: a cli agent needs argv"):
        load_config(repo, extra)


def test_catalog_file_cannot_hold_checks(tmp_path: Path) -> None:
    (tmp_path / "foo.toml").write_text(
        '[agents.foo]\nargv = ["foo", "{prompt}"]\n[checks]\nt = "pytest"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"must hold exactly one table, \[agents\.foo\]"):
        load_catalog(tmp_path)
