"""Who may configure what: the operator's own tables, repository identities, and the repository filter.

The code under review is hostile, and so is any ``jury.toml`` a pull request brings. Jury reads the
reviewed repository's ``jury.toml`` only from the trunk side (``orchestrator.target``), and even then a
repository the operator does not trust may only choose among the agents that exist (``[jury]``), declare
its ``[checks]`` and tune an existing agent's ``model`` and ``expect_seconds``. Everything else it sets
is ignored, never silently: each ignored key becomes an ``Ignored`` record that the loader logs and
writes into the run's ``config_notes``.

Trust is the operator's word: ``[trust] repos = [...]`` in the operator's file, plus every local path
given on the command line. A ``repos`` entry is either

- a path (absolute or ``~/...``): it matches a local repository whose top-level directory is the same
  directory once symlinks are resolved; or
- ``HOST/OWNER/REPO`` (GitLab: ``HOST/GROUP/SUBGROUP/REPO``), optionally written with ``https://`` and a
  trailing ``.git``: it matches a PR URL's repository exactly, ignoring case.

No wildcards and no prefixes: trusting ``github.com/acme/app`` trusts neither ``github.com/acme`` nor
``github.com/acme/app-fork``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.errors import ConfigError
from orchestrator.spec import SandboxSettings

REPO_TABLES: tuple[str, ...] = ("agents", "jury", "checks")
OPERATOR_ONLY_TABLES: tuple[str, ...] = ("trust", "sandbox", "schedules", "limits")
OPERATOR_TABLES: tuple[str, ...] = (*REPO_TABLES, *OPERATOR_ONLY_TABLES)
# What an untrusted repository may set on an agent that already exists (catalog or operator).
UNTRUSTED_AGENT_KEYS: tuple[str, ...] = ("model", "expect_seconds")
# What no repository's file may set in its [jury], trusted or not: pushing writes to the forge (or moves
# a local branch) with the operator's credentials, so whether runs push is the operator's word alone.
OPERATOR_ONLY_JURY_KEYS: tuple[str, ...] = ("push",)
TRUST_KEYS: tuple[str, ...] = ("repos",)
SANDBOX_KEYS: tuple[str, ...] = tuple(SandboxSettings.model_fields)

# One owner, group or repository name of a forge path: what GitHub and GitLab accept, minus anything
# that could climb or hide (a leading '-' reads as an option, '%' as an escape, '..' as a parent).
FORGE_NAME_RE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,99}")
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
HOST_RE = re.compile(rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]{{1,5}})?")  # lower case, an optional port
MAX_FORGE_DEPTH = 21  # GitLab nests subgroups 20 deep, plus the project


@dataclass(frozen=True)
class Ignored:
    """One thing a repository's file set that did not take effect, and why."""

    source: str
    table: str  # "agents.NAME", "trust", "sandbox", "jury"
    key: str | None  # None: the whole table
    reason: str

    @property
    def agent(self) -> str | None:
        return self.table.removeprefix("agents.") if self.table.startswith("agents.") else None

    def note(self) -> str:
        where = f"{self.table}.{self.key}" if self.key else self.table
        return f"{self.source}: {where}: ignored: {self.reason}"


def forge_name_problem(name: str) -> str | None:
    """None when ``name`` is a safe owner, group or repository name; else what is wrong with it."""
    if not name:
        return "an empty name"
    if name.startswith("-"):
        return f"{name!r} starts with '-'"
    if ".." in name:
        return f"{name!r} contains '..'"
    if "%" in name:
        return f"{name!r} contains a '%' escape"
    if name.lower().endswith(".git"):
        return f"{name!r} ends with '.git'"
    if not FORGE_NAME_RE.fullmatch(name):
        return f"{name!r} has characters other than letters, digits, '.', '-' and '_' (or is too long)"
    return None


def forge_identity(host: str, names: list[str]) -> str:
    """The identity of a forge repository, as ``[trust] repos`` entries are compared: lower case."""
    return "/".join([host, *names]).lower()


def normalise_trust_entry(entry: str) -> str:
    """A ``[trust] repos`` entry in the form identities take; raises ``ValueError`` saying why not."""
    text = entry.strip()
    if text.startswith(("/", "~")):
        path = Path(text).expanduser()
        if not path.is_absolute():
            raise ValueError(f"{entry!r}: a path must be absolute or start with '~/'")
        return str(path.resolve())
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if scheme.lower() != "https":
            raise ValueError(f"{entry!r}: only https:// forge addresses (or HOST/OWNER/REPO)")
        text = rest
    text = text.rstrip("/")
    text = text[: -len(".git")] if text.lower().endswith(".git") else text
    host, _, path_part = text.partition("/")
    names = path_part.split("/") if path_part else []
    if not HOST_RE.fullmatch(host.lower()):
        raise ValueError(f"{entry!r}: {host!r} is not a host name")
    if not 2 <= len(names) <= MAX_FORGE_DEPTH:
        raise ValueError(f"{entry!r}: expected HOST/OWNER/REPO (or HOST/GROUP/.../REPO) or a path")
    for name in names:
        if (problem := forge_name_problem(name)) is not None:
            raise ValueError(f"{entry!r}: {problem}")
    return forge_identity(host.lower(), names)


def is_trusted(identity: str, local: bool, trusted: list[str]) -> tuple[bool, str]:
    """Whether a repository's file may set every key, and the reason in words."""
    if local:
        return True, "a local path given on the command line"
    if identity.startswith("/"):
        mine = str(Path(identity).resolve())
        if mine in trusted:
            return True, "listed in [trust] repos"
    elif identity.lower() in trusted:
        return True, "listed in [trust] repos"
    return False, "not listed in [trust] repos"


def _table(source: str, data: dict[str, Any], name: str) -> dict[str, Any]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [{name}]: must be a table")
    return table


def parse_trust(source: str, data: dict[str, Any]) -> list[str]:
    """The operator's ``[trust]`` table: the identities it trusts, normalised."""
    table = _table(source, data, "trust")
    for key in table:
        if key not in TRUST_KEYS:
            raise ConfigError(f"{source}: [trust]: unknown key {key!r} (allowed: {', '.join(TRUST_KEYS)})")
    repos = table.get("repos", [])
    if not isinstance(repos, list) or not all(isinstance(r, str) for r in repos):
        raise ConfigError(f"{source}: [trust].repos: must be a list of strings")
    out = []
    for entry in repos:
        try:
            out.append(normalise_trust_entry(entry))
        except ValueError as exc:
            raise ConfigError(f"{source}: [trust].repos: {exc}") from None
    return out


def parse_sandbox(source: str, data: dict[str, Any]) -> SandboxSettings:
    """The operator's ``[sandbox]`` table; an unknown key or a bad value names the file and the key."""
    table = _table(source, data, "sandbox")
    for key in table:
        if key not in SANDBOX_KEYS:
            raise ConfigError(
                f"{source}: [sandbox]: unknown key {key!r} (allowed: {', '.join(SANDBOX_KEYS)})"
            )
    for key, value in table.items():  # TOML has true booleans and integers: take no strings for them
        annotation = SandboxSettings.model_fields[key].annotation
        if annotation is bool and not isinstance(value, bool):
            raise ConfigError(f"{source}: [sandbox].{key}: must be true or false")
        if annotation is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"{source}: [sandbox].{key}: must be a whole number")
    try:
        return SandboxSettings.model_validate(table)
    except ValidationError as exc:
        err = exc.errors(include_url=False, include_input=False)[0]
        key = str(err["loc"][0]) if err["loc"] else "?"
        raise ConfigError(f"{source}: [sandbox].{key}: {err['msg']}") from None


def check_tables(source: str, data: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{source}: unknown table [{key}] (allowed: {', '.join(allowed)})")


def filter_repo(
    source: str, data: dict[str, Any], *, known: set[str], trusted: bool
) -> tuple[dict[str, Any], list[Ignored]]:
    """What of a repository's ``jury.toml`` may take effect, and what was set aside.

    Operator-only tables (``[trust]``, ``[sandbox]``, ``[limits]``, ``[[schedules]]``) and operator-only
    ``[jury]`` keys (``push``) never apply from a repository, trusted or not. Untrusted, only ``[jury]``,
    ``[checks]`` and ``UNTRUSTED_AGENT_KEYS`` of the ``known`` agents pass; an unknown table is an error as
    in any file. The values that pass are checked later, like the operator's.
    """
    for key in data:
        if key not in REPO_TABLES and key not in OPERATOR_ONLY_TABLES:
            raise ConfigError(f"{source}: unknown table [{key}] (allowed: {', '.join(REPO_TABLES)})")
    ignored = [
        Ignored(source, name, None, "only the operator's configuration may set it")
        for name in OPERATOR_ONLY_TABLES
        if name in data
    ]
    kept = {k: v for k, v in data.items() if k in REPO_TABLES}
    jury = kept.get("jury")
    if isinstance(jury, dict) and any(k in jury for k in OPERATOR_ONLY_JURY_KEYS):
        kept["jury"] = {k: v for k, v in jury.items() if k not in OPERATOR_ONLY_JURY_KEYS}
        ignored += [
            Ignored(source, "jury", key, "only the operator's configuration may set it")
            for key in OPERATOR_ONLY_JURY_KEYS
            if key in jury
        ]
    agents = kept.get("agents", {})
    if trusted or not isinstance(agents, dict):
        return kept, ignored  # a malformed [agents] is reported by the agent checks
    allowed_agents: dict[str, Any] = {}
    for name, table in agents.items():
        if not isinstance(table, dict):
            allowed_agents[name] = table  # reported as malformed, naming the agent
            continue
        if name not in known:
            keys = ", ".join(sorted(table)) or "no keys"
            ignored.append(
                Ignored(
                    source,
                    f"agents.{name}",
                    None,
                    f"an untrusted repository cannot add agents (it set {keys})",
                )
            )
            continue
        allowed_agents[name] = {k: v for k, v in table.items() if k in UNTRUSTED_AGENT_KEYS}
        for key in table:
            if key not in UNTRUSTED_AGENT_KEYS:
                ignored.append(
                    Ignored(
                        source,
                        f"agents.{name}",
                        key,
                        "an untrusted repository may set only "
                        + " and ".join(UNTRUSTED_AGENT_KEYS)
                        + " of an existing agent",
                    )
                )
    kept["agents"] = allowed_agents
    return kept, ignored
