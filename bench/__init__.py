"""``python -m bench``: how fast Jury is on this machine, in figures, never in assertions.

Each section module measures one concern and returns ``Figure`` rows (``bench.stats``); ``__main__`` runs
them, prints rich tables or ``--json``, and names the machine (``bench.machine``).
"""
