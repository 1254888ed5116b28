"""Hypothesis profiles for the property suites (tests/unit/test_props_*.py).

``jury`` (the default, CI's): a fixed budget of examples per property, the same examples on every run
(``derandomize``: seeded by each test's own code), no deadline (a loaded two-core machine stalls a case
for seconds without anything being wrong). It still reads and writes the example database committed in
``tests/.hypothesis-db``, so a failure one run found is tried first by every later run, CI's included.
Hypothesis's own settings refuse ``derandomize=True`` together with ``database=``; set on a child of a
derandomized parent, both hold, which is what this profile wants.

``explore`` (``HYPOTHESIS_PROFILE=explore``): random examples, ten times as many, the same database.
Run it to hunt; a failure it finds is saved there, and once fixed is kept as an ``@example`` too.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

DATABASE = DirectoryBasedExampleDatabase(Path(__file__).resolve().parents[1] / ".hypothesis-db")
EXAMPLES = 100  # per property (several a parser); `HYPOTHESIS_PROFILE=explore` runs ten times as many
# Generated hostile texts are large by design (huge lines, deep nesting): not a sign of a bad strategy.
_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]

settings.register_profile(
    "jury",
    settings(
        settings(derandomize=True),
        database=DATABASE,
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=_QUIET,
        print_blob=True,
    ),
)
settings.register_profile(
    "explore",
    settings(
        database=DATABASE,
        max_examples=EXAMPLES * 10,
        deadline=None,
        suppress_health_check=_QUIET,
        print_blob=True,
    ),
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "jury"))
