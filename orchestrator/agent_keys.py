"""What one ``[agents.NAME]`` table and one ``[checks]`` table may hold: every key's check, in one place.

``check_agent`` applies a table over a base agent (or makes a new one) and validates the result;
``check_checks`` does the same for ``[checks]``. Neither knows where a table came from: who may set
which key (the operator, a trusted or an untrusted repository) is decided in ``orchestrator.trust``
before a table reaches here. Every failure is a ``ConfigError`` naming the file, the agent and the key.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Callable
from typing import Any, get_args
from urllib.parse import urlsplit

from pydantic import ValidationError

from orchestrator.agent_kinds import AGENT_KINDS
from orchestrator.errors import ConfigError
from orchestrator.spec import DEFAULT_KIND, AgentSpec, CheckParser, CheckScope, ReportFormat

ALLOWED_AGENT_KEYS: tuple[str, ...] = (
    "argv",
    "judge_argv",
    "resume_argv",
    "session_from",
    "new_session",
    "report",
    "expect_seconds",
    "model",
    "model_args",
    "env",
    "env_pass",
    "secrets",
    "install",
    "usd_per_minute",
    "kind",
    "base_url",
    "api_key_env",
    "insecure_http",
    "family",
    "price",
    "fallback",
    "max_rounds",
    "timeout",
    "command",
    "parser",
    "scope",
    "state_dirs",
    "egress",
)
PLACEHOLDERS: frozenset[str] = frozenset(
    {"prompt", "prompt_file", "worktree", "session", "model_args", "model"}
)
REPORT_FORMATS: tuple[str, ...] = get_args(ReportFormat)
CHECK_PARSERS: tuple[str, ...] = get_args(CheckParser)
CHECK_SCOPES: tuple[str, ...] = get_args(CheckScope)
PRICE_KEYS: tuple[str, ...] = ("input", "output")

# An environment variable name that may hold a secret: never stored in config, scrubbed from agents' env.
SECRET_NAME_RE = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH|SESSION|COOKIE|PRIVATE", re.IGNORECASE
)

_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
MODEL_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+\[\]-]{0,199}")
MAX_EXPECT_SECONDS = 7200.0  # 3x it is six hours: the broker's default visibility timeout
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
AGENT_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_HOST_NAME_RE = re.compile(
    r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*"
)
_PORT_RE = re.compile(r"[1-9][0-9]{0,4}")


class Invalid(Exception):
    """A value failed its check; the caller prefixes where it was found."""


def _placeholders(text: str) -> set[str]:
    return set(_PLACEHOLDER_RE.findall(text))


def string_list(value: object, *, non_empty: bool) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Invalid("must be a non-empty list of strings" if non_empty else "must be a list of strings")
    if non_empty and (not value or not value[0].strip()):
        raise Invalid("must be a non-empty list of strings")
    return list(value)


def _check_placeholders(args: list[str], *, allow_model_args: bool) -> set[str]:
    found: set[str] = set()
    for arg in args:
        names = _placeholders(arg)
        unknown = sorted(names - PLACEHOLDERS)
        if unknown:
            allowed = " ".join(f"{{{p}}}" for p in sorted(PLACEHOLDERS))
            raise Invalid(f"unknown placeholder '{{{unknown[0]}}}' (allowed: {allowed})")
        if "model_args" in names:
            if not allow_model_args:
                raise Invalid("cannot contain '{model_args}'")
            if arg != "{model_args}":
                raise Invalid(f"'{{model_args}}' must be a list element of its own, not in {arg!r}")
        found |= names
    return found


def _command(key: str, value: object) -> list[str]:
    args = string_list(value, non_empty=True)
    found = _check_placeholders(args, allow_model_args=True)
    if not found & {"prompt", "prompt_file"}:
        raise Invalid("must pass the prompt: use '{prompt}' or '{prompt_file}' (stdin is closed)")
    if key == "resume_argv" and "session" not in found:
        raise Invalid("must pass the session: use '{session}'")
    return args


def shell_free(value: object) -> str:
    """A command string that ``shlex`` splits into at least one word."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid("must be a non-empty command string")
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise Invalid(f"cannot be split into words: {exc}") from None
    if not words:
        raise Invalid("must be a non-empty command string")
    return value


def _positive(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise Invalid(f"must be a positive {what}")
    return float(value)


def _one_of(value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise Invalid(f"must be one of {', '.join(allowed)}")
    return str(value)


def _base_url(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("must be a non-empty URL")
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid("must be an http:// or https:// URL")
    if parts.username or parts.password:
        raise Invalid("must not hold credentials; name the key's variable in api_key_env")
    return value.strip().rstrip("/")


def _price(value: object) -> dict[str, float]:
    if not isinstance(value, dict):
        raise Invalid("must be a table { input = USD, output = USD } per million tokens")
    keys = set(value)
    if keys != set(PRICE_KEYS):
        extra = sorted(keys - set(PRICE_KEYS))
        raise Invalid(f"unknown key {extra[0]!r}" if extra else "needs both input and output")
    out: dict[str, float] = {}
    for key in PRICE_KEYS:
        v = value[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            raise Invalid(f"{key}: must be a number >= 0 (USD per million tokens)")
        out[key] = float(v)
    return out


def _model_id(value: object) -> str:
    """A model id as vendors spell them (``openai/gpt-5``, ``qwen/qwen3-coder:free``, ``sonnet[1m]``).

    It lands in an agent's argument vector (``{model}``) and may come from a repository that is not
    trusted, so it cannot start with '-' (an option to the CLI) nor hold spaces or '='."""
    if not isinstance(value, str) or not MODEL_ID_RE.fullmatch(value):
        raise Invalid(
            "must be a model id: letters, digits and . _ : / @ + - [ ], starting with a letter or digit"
        )
    return value


def _state_dirs(value: object) -> list[str]:
    """Directories under HOME (``~/...``) or absolute ones, each naming one directory: the sandbox binds
    exactly these, so ``~`` itself, ``/`` or a path that climbs with ``..`` would undo it. ``$NAME``: the
    directory the worker's environment variable NAME holds, when set (codex's ``$CODEX_HOME``), checked
    the same way when the sandbox is built."""
    dirs = string_list(value, non_empty=False)
    for d in dirs:
        if d.startswith("$"):
            if not _ENV_NAME_RE.fullmatch(d[1:]):
                raise Invalid(f"{d!r} must be '$' and an environment variable's name")
            continue
        rest = d[2:] if d.startswith("~/") else d[1:] if d.startswith("/") else None
        if rest is None:
            raise Invalid(f"{d!r} must start with '~/' (the worker's HOME) or '/'")
        parts = [p for p in rest.split("/") if p]
        if not parts:
            raise Invalid(f"{d!r} names HOME or / itself; name the agent's own directories")
        if any(p in (".", "..") for p in parts) or "\0" in d:
            raise Invalid(f"{d!r} must not contain '.' or '..' segments")
    return dirs


def split_endpoint(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` for an IPv6 address) as (host, port); ValueError when it is none."""
    host, sep, port = text.rpartition(":")
    if not sep or not _PORT_RE.fullmatch(port) or int(port) > 65535:
        raise ValueError(f"{text!r} is not host:port (a port 1-65535)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        if ipaddress.ip_address(host).version != 6:
            raise ValueError(f"{text!r}: only an IPv6 address goes in brackets")
    elif ":" in host:
        raise ValueError(f"{text!r}: write an IPv6 address in brackets, [::1]:443")
    return host, int(port)


def endpoint(text: object) -> str:
    """One ``egress`` entry, checked and in its one spelling (lower case, an address in its short form):
    the proxy compares what an agent asks for with these strings exactly, so there is no second way to
    write one. A host name, an IPv4 address or a bracketed IPv6 one, and a port; no wildcards, no ranges."""
    if not isinstance(text, str):
        raise Invalid('must be a list of "host:port" strings')
    try:
        host, port = split_endpoint(text.strip().lower())
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if not _HOST_NAME_RE.fullmatch(host):
            raise Invalid(f"{text!r}: {host!r} is not a host name or an address") from None
        return f"{host}:{port}"
    return f"[{address.compressed}]:{port}" if address.version == 6 else f"{address}:{port}"


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise Invalid("must be true or false")
    return value


def _env_name(value: object) -> str:
    if not isinstance(value, str) or not _ENV_NAME_RE.fullmatch(value):
        raise Invalid("must be the NAME of an environment variable (not the key itself)")
    return value


def _env_names(value: object) -> list[str]:
    names = string_list(value, non_empty=False)
    for name in names:
        if not _ENV_NAME_RE.fullmatch(name):
            raise Invalid(f"{name!r} is not an environment variable name")
    return names


def _non_empty(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("must be a non-empty string")
    return value


def _usd_per_minute(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        raise Invalid("must be a number >= 0 (USD per minute of the agent's run)")
    return float(value)


def _fallback(value: object) -> list[str]:
    models = string_list(value, non_empty=False)
    if any(not MODEL_ID_RE.fullmatch(m) for m in models):
        raise Invalid("must be a list of model ids")
    return models


def _max_rounds(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Invalid("must be a whole number >= 1")
    return value


def _model_args(value: object) -> list[str]:
    args = string_list(value, non_empty=False)
    _check_placeholders(args, allow_model_args=False)
    return args


def _session_from(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid("must be a non-empty string (a regex)")
    try:
        groups = re.compile(value).groups
    except re.error as exc:
        raise Invalid(f"invalid regex: {exc}") from exc
    if groups != 1:
        raise Invalid(f"must have exactly one capturing group (the session id), has {groups}")
    return value


def _expect_seconds(value: object) -> float:
    seconds = _positive(value, "number of seconds")
    if seconds > MAX_EXPECT_SECONDS:
        raise Invalid(f"must be at most {MAX_EXPECT_SECONDS} (the default timeout is 3x it)")
    return seconds


def _env_table(value: object) -> object:
    if not isinstance(value, dict):
        raise Invalid('must be a table of NAME = "value"')
    return value


# Each agent key's check: the value as stored, or ``Invalid`` saying what is wrong. Keys are filtered
# against ALLOWED_AGENT_KEYS first; a test checks the two name the same keys.
_VALUE_CHECKS: dict[str, Callable[[object], object]] = {
    "kind": lambda value: _one_of(value, AGENT_KINDS.names()),
    "base_url": _base_url,
    "insecure_http": _boolean,
    "api_key_env": _env_name,
    "family": lambda value: _non_empty(value).strip(),
    "price": _price,
    "usd_per_minute": _usd_per_minute,
    "fallback": _fallback,
    "max_rounds": _max_rounds,
    "timeout": lambda value: _positive(value, "number of seconds"),
    "command": shell_free,
    "parser": lambda value: _one_of(value, CHECK_PARSERS),
    "scope": lambda value: _one_of(value, CHECK_SCOPES),
    "argv": lambda value: _command("argv", value),
    "judge_argv": lambda value: _command("judge_argv", value),
    "resume_argv": lambda value: _command("resume_argv", value),
    "model_args": _model_args,
    "session_from": _session_from,
    "new_session": _boolean,
    "report": lambda value: _one_of(value, REPORT_FORMATS),
    "expect_seconds": _expect_seconds,
    "model": _model_id,
    "install": _non_empty,
    "env_pass": _env_names,
    "secrets": _env_names,
    "state_dirs": _state_dirs,
    "egress": lambda value: list(dict.fromkeys(endpoint(e) for e in string_list(value, non_empty=False))),
    "env": _env_table,
}


def _check_value(key: str, value: object) -> object:
    """The value of one agent key, checked; raises ``Invalid`` with what is wrong."""
    check = _VALUE_CHECKS.get(key)
    if check is None:
        raise Invalid("unchecked key")  # unreachable: keys are filtered against ALLOWED_AGENT_KEYS first
    return check(value)


def _check_env(where: str, env: dict[str, Any]) -> dict[str, str]:
    for name, val in env.items():
        if not _ENV_NAME_RE.fullmatch(name):
            raise ConfigError(f"{where}.env: {name!r} is not an environment variable name")
        if SECRET_NAME_RE.search(name):
            raise ConfigError(
                f"{where}.env.{name}: looks like a secret; keep secrets out of jury.toml — "
                "set it in the worker's environment and list it in env_pass"
            )
        if not isinstance(val, str):
            raise ConfigError(f"{where}.env.{name}: must be a string")
    return dict(env)


def check_keys(source: str, name: str, table: object) -> dict[str, Any]:
    """The keys and values of one ``[agents.NAME]`` table, each checked on its own."""
    where = f"{source}: agents.{name}"
    if not AGENT_NAME_RE.fullmatch(name):
        raise ConfigError(f"{where}: bad agent name (use letters, digits, '.', '-' and '_')")
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table ([agents.{name}])")
    for key in table:
        if key not in ALLOWED_AGENT_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (allowed: {', '.join(ALLOWED_AGENT_KEYS)})")
    checked: dict[str, Any] = {}
    for key, value in table.items():
        try:
            checked[key] = _check_value(key, value)
        except Invalid as exc:
            raise ConfigError(f"{where}.{key}: {exc}") from None
        if key == "env":
            checked[key] = _check_env(where, checked[key])
    return checked


def check_agent(source: str, name: str, table: object, base: AgentSpec | None) -> AgentSpec:
    """The agent ``name`` after applying ``table`` (read from ``source``) over ``base`` (None: a new
    agent), checked as a whole: its kind has what it needs."""
    where = f"{source}: agents.{name}"
    fields: dict[str, Any] = base.model_dump(by_alias=True) if base is not None else {"name": name}
    fields.update(check_keys(source, name, table))
    _check_kind(where, fields, new=base is None)
    try:
        return AgentSpec.model_validate(fields)
    except ValidationError as exc:  # a check above is missing; still name the place
        raise ConfigError(f"{where}: {exc}") from exc


def _check_kind(where: str, fields: dict[str, Any], *, new: bool) -> None:
    """The keys the agent's kind needs are set (after merging over the base agent), and its kind's
    descriptor finds nothing wrong with them as a whole."""
    kind = AGENT_KINDS[fields.get("kind", DEFAULT_KIND)]
    for key in kind.required:
        if not fields.get(key):
            raise ConfigError(f"{where}: {kind.missing(key, new=new)}")
    problem = kind.fields_problem(fields)
    if problem:
        raise ConfigError(f"{where}: {problem}")


def check_checks(source: str, table: object, current: dict[str, str]) -> dict[str, str]:
    """``current`` with the ``[checks]`` table of ``source`` applied (name -> shell-free command)."""
    where = f"{source}: [checks]"
    if not isinstance(table, dict):
        raise ConfigError(f'{where}: must be a table of name = "command"')
    merged = dict(current)
    for name, value in table.items():
        if not AGENT_NAME_RE.fullmatch(name):
            raise ConfigError(f"{where}.{name}: bad check name (use letters, digits, '.', '-' and '_')")
        try:
            merged[name] = shell_free(value)
        except Invalid as exc:
            raise ConfigError(f"{where}.{name}: {exc}") from None
    return merged
