"""``python -m jury_cli``: the ``jury`` command."""

from jury_cli.app import main

main()
