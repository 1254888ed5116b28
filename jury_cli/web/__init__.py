"""``jury web``: the console (docs/architecture.md, "The console")."""
