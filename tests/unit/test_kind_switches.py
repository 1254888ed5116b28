"""No switch on an agent or forge kind outside its descriptor: what a kind means is said on its registry
entry (``orchestrator.agent_kinds.AGENT_KINDS``, ``orchestrator.forge.kinds.FORGES``), so a new kind is
one entry and never a hunt for every ``if kind == "cli"`` in the code.

The check reads the source of every module of the deciding side, the running side, the CLI and the
bench, and refuses any comparison (``==``, ``!=``, ``in``, ``not in``; in an ``if``, a conditional
expression or anywhere else) between something named like a kind (``kind``, ``spec.kind``,
``pr.forge``) and a string naming a registered agent kind, a forge kind or a forge's request word.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from orchestrator.agent_kinds import AGENT_KINDS
from orchestrator.forge.kinds import FORGES

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("orchestrator", "workers", "jury_cli", "bench")
# Where the kinds are described: the only modules that may speak of one kind by its name.
DESCRIPTORS = {
    Path("orchestrator/agent_kinds.py"),
    Path("orchestrator/forge/kinds.py"),
}


def kind_words() -> set[str]:
    """The names a kind switch would compare with: the registered kinds and the forges' request words."""
    words = set(AGENT_KINDS) | set(FORGES) | {d.pr_word for d in FORGES.values()}
    assert {"cli", "http", "check", "github", "gitlab", "pull", "merge_requests"} <= words
    return words


def _named_like_a_kind(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return "kind" in name.lower() or name.lower() == "forge"


def _strings(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


def kind_switches(source: str, words: set[str]) -> Iterator[tuple[int, str]]:
    """(line, text) of each comparison of a kind-named expression with a kind's name in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands[:-1], operands[1:], strict=True):
            if not isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn):
                continue
            for subject, other in ((left, right), (right, left)):
                if _named_like_a_kind(subject) and words & set(_strings(other)):
                    yield node.lineno, ast.unparse(node)


def modules() -> Iterator[Path]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if ".venv" not in path.parts:
                yield path


def test_no_module_switches_on_an_agent_or_forge_kind_outside_its_descriptor() -> None:
    words = kind_words()
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in modules()
        if path.relative_to(ROOT) not in DESCRIPTORS
        for line, text in kind_switches(path.read_text(encoding="utf-8"), words)
    ]
    assert found == [], "ask the kind's descriptor instead:\n" + "\n".join(found)


def test_the_check_sees_every_shape_of_a_switch() -> None:
    words = kind_words()
    caught = [
        'if spec.kind == "check":\n    pass',
        'x = 1 if kind != "http" else 2',
        'ok = agent.kind in ("cli", "http")',
        'ok = "github" == forge.kind',
        'if pr.forge == "gitlab":\n    pass',
        'if pr.kind == "pull":\n    pass',
    ]
    for source in caught:
        assert list(kind_switches(source, words)), source
    passed = [
        'if a.kind == "triage":\n    pass',  # an action kind: not a registered agent or forge kind
        'if split.scheme not in ("http", "https"):\n    pass',  # not a kind
        "if spec.kind == other.kind:\n    pass",  # no kind named
    ]
    for source in passed:
        assert not list(kind_switches(source, words)), source


def test_every_descriptor_module_exists() -> None:
    for path in DESCRIPTORS:
        assert (ROOT / path).is_file(), path
