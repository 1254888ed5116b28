"""The ``jury`` command: the entry point, the one package that imports both the deciding side
(``orchestrator``) and the running side (``workers``); docs/architecture.md, "Layers".

Exit codes: 0 converged (or the command did what was asked), 1 a run ended ``human``/``failed``, or a
failure at run time, 2 a usage or configuration error.
"""
