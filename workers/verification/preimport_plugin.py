"""A pytest plugin Jury loads (``-p jury_preimport``) in the coverage run of the judge's named tests only,
and for unittest a runner in its place (``-m jury_preimport ARGS`` runs as ``-m unittest ARGS`` would).

It imports each changed non-test Python file (``JURY_PREIMPORT``: paths relative to the working directory,
``os.pathsep``-separated) once collection is done and before any test runs, so whatever the module runs
at import — its constants, a function it calls at module level — is recorded in coverage's empty context,
and a test that imports the module inside its body finds it in ``sys.modules`` and runs nothing of it.
It imports only modules the run could import anyway, under each dotted name a ``sys.path`` entry gives the
file (the name must find that very file), and ignores any failure: this is a courtesy to honest tests,
not the boundary. ``coverage_check.read_coverage`` discounts any test in whose context a module-level line
of the file ran (a test that pops the module or reloads it, or a pre-import that failed): if this plugin
is shadowed or defeated, the fix is refused, never accepted.

Copied into the PYTHONPATH directory of the sandboxed run: stdlib only, nothing of Jury imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

ENV = "JURY_PREIMPORT"


def module_names(path: str, entries: list[str]) -> list[str]:
    """The dotted names under which ``path`` (a ``.py`` file) is importable from the ``sys.path``
    ``entries`` that contain it, shortest first ("" is the working directory)."""
    target = os.path.realpath(path)
    stem = target[: -len(".py")]
    names: list[str] = []
    for entry in entries:
        base = os.path.realpath(entry or os.getcwd())
        if not stem.startswith(base.rstrip(os.sep) + os.sep):
            continue
        parts = stem[len(base.rstrip(os.sep)) + 1 :].split(os.sep)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(p.isidentifier() for p in parts) and ".".join(parts) not in names:
            names.append(".".join(parts))
    return sorted(names, key=lambda n: n.count("."))


def preimport(paths: list[str]) -> None:
    """Import each of ``paths`` under each name that finds it; nothing else, and no failure raised."""
    for path in paths:
        if not path.endswith(".py") or not os.path.isfile(path):
            continue
        for name in module_names(path, list(sys.path)):
            try:
                spec = importlib.util.find_spec(name)
                if spec is None or spec.origin is None:
                    continue
                if os.path.realpath(spec.origin) != os.path.realpath(path):
                    continue
                importlib.import_module(name)
            except (Exception, SystemExit):
                continue  # a module that will not import now is the test's own to import


def _changed() -> list[str]:
    return [p for p in os.environ.get(ENV, "").split(os.pathsep) if p]


def pytest_collection_finish(session: object) -> None:
    preimport(_changed())


def main() -> None:
    """``python -m unittest`` with the changed modules imported before it loads a test."""
    import unittest

    preimport(_changed())
    sys.argv[0] = "python -m unittest"
    unittest.main(module=None)


if __name__ == "__main__":
    main()
