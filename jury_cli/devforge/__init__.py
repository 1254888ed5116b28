"""``jury dev``: a local GitHub-compatible forge over bare git repositories (the tests' fake forge,
shipped), so sweeps and publishing can be tried with nothing outside this machine."""
