"""docs/configuration.md names every environment variable the code reads and every key the files accept.

The variables are found in the code, not listed here, so a new one fails this test until it is documented:
the fields of the pydantic-settings classes (``Settings``: ``JURY_`` + the field; ``ForgeSettings``: each
field's alias), every string literal of the packages that is a ``JURY_*`` name, the ``envvar=`` of the
CLI's options, and the name read by each ``os.environ.get`` / ``os.getenv`` / ``os.environ[...]`` (a
literal, or a module constant holding one). The keys: the models of the configuration's tables and the
allow-lists the loaders check keys against.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from orchestrator.agent_keys import ALLOWED_AGENT_KEYS
from orchestrator.config import ALLOWED_JURY_KEYS, ENV_PREFIX, LIMITS_KEYS, Settings
from orchestrator.forge.select import ForgeSettings
from orchestrator.schedules import ALL_KEYS as SCHEDULE_KEYS
from orchestrator.trust import OPERATOR_TABLES, SANDBOX_KEYS, TRUST_KEYS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"
PACKAGES = ("orchestrator", "workers", "jury_cli")
_JURY_NAME = re.compile(r"JURY_[A-Z0-9_]+")
_ENV_READS = ("os.environ.get", "os.getenv", "environ.get")


def settings_variables() -> set[str]:
    found = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    for field in ForgeSettings.model_fields.values():
        assert isinstance(field.validation_alias, str), "a forge setting without its variable's name"
        found.add(field.validation_alias)
    return found


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "text"`` assignments: the names code passes to ``os.environ.get``."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    found[target.id] = node.value.value
    return found


def _name_of(node: ast.expr, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def variables_in(source: str) -> set[str]:
    """The environment variables one module names or reads."""
    tree = ast.parse(source)
    constants = _constants(tree)
    found = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _JURY_NAME.fullmatch(node.value)
        ):
            found.add(node.value)
        elif isinstance(node, ast.Call):
            called = ast.unparse(node.func)
            if called.endswith(_ENV_READS) and called.split(".")[0] in ("os", "environ") and node.args:
                found.add(_name_of(node.args[0], constants) or "")
            found.update(_name_of(kw.value, constants) or "" for kw in node.keywords if kw.arg == "envvar")
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("os.environ", "environ"):
            found.add(_name_of(node.slice, constants) or "")
    return found - {""}


def code_variables() -> set[str]:
    found = settings_variables()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found |= variables_in(path.read_text(encoding="utf-8"))
    return found


def named(page: str, name: str) -> bool:
    return re.search(rf"`{re.escape(name)}`|\b{re.escape(name)}\b", page) is not None


def test_the_finder_sees_each_way_code_reads_a_variable() -> None:
    source = (
        'import os\nX_ENV = "SOME_VAR"\nos.environ.get(X_ENV)\nos.getenv("OTHER")\nos.environ["THIRD"]\n'
        'f(envvar="FROM_CLI")\nflag = "JURY_LITERAL"\nd.get("NOT_ENV")\n'
    )
    assert variables_in(source) == {"SOME_VAR", "OTHER", "THIRD", "FROM_CLI", "JURY_LITERAL"}


def test_the_code_reads_the_variables_this_test_expects() -> None:
    """A finder that found nothing would pass the test below: these are known reads."""
    found = code_variables()
    assert {"JURY_REDIS_URL", "JURY_DIR", "GITHUB_TOKEN", "JURY_WEB_TOKEN", "JURY_BWRAP"} <= found
    assert {"JURY_SANDBOX_RO_PATHS", "PROMETHEUS_MULTIPROC_DIR", "JURY_WORKER_CONCURRENCY"} <= found


def test_every_variable_the_code_reads_is_in_configuration_md() -> None:
    page = PAGE.read_text(encoding="utf-8")
    missing = sorted(name for name in code_variables() if not named(page, name))
    assert missing == [], f"docs/configuration.md does not name {missing}"


def test_every_configuration_key_is_in_configuration_md() -> None:
    page = PAGE.read_text(encoding="utf-8")
    keys = {
        *ALLOWED_AGENT_KEYS,
        *ALLOWED_JURY_KEYS,
        *LIMITS_KEYS,
        *SANDBOX_KEYS,
        *SCHEDULE_KEYS,
        *TRUST_KEYS,
    }
    missing = sorted(key for key in keys if f"`{key}`" not in page)
    assert missing == [], f"docs/configuration.md does not name the keys {missing}"
    # each table by its header: `[jury]`, `[agents.NAME]`, `[[schedules]]`
    tables = [t for t in OPERATOR_TABLES if not re.search(rf"`\[\[?{t}[.\]]", page)]
    assert tables == [], f"docs/configuration.md does not name the tables {tables}"
