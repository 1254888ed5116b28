"""Verification: proving a fix mechanically (the suite on the head and on the fixed tree, weakened tests,
coverage, vacuity), reading test reports, and re-verifying accepted fixes on the trunk. Runs the reviewed
code only through ``workers.isolation``."""
