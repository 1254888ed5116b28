"""tests/data holds other projects' files (a small package with its own suite, runner reports): they are
data for Jury's tests, never collected as Jury's own tests."""

collect_ignore_glob = ["*"]
