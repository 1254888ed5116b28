"""The run's fixed key names (``keys.fixed_run_keys``): every key builder of one run's fixed name is there,
so a new one cannot be forgotten by the run's expiry, which lists no other keys beside the run's key set."""

from __future__ import annotations

import inspect

from orchestrator.store import keys


def one_run_builders() -> dict[str, str]:
    """Each builder in ``keys`` that takes only a prefix and a slug, with the key it builds for run ``s``."""
    out = {}
    for name, f in inspect.getmembers(keys, inspect.isfunction):
        if f.__module__ != keys.__name__ or name.startswith("_"):
            continue
        if list(inspect.signature(f).parameters) == ["prefix", "slug"]:
            built = f("p", "s")
            if isinstance(built, str):
                out[name] = built
    return out


def test_every_fixed_name_of_a_run_is_listed() -> None:
    builders = one_run_builders()
    of_the_run = {name: key for name, key in builders.items() if key.startswith("p:run:s:")}
    assert {"events", "state", "lock", "run_index"} <= set(of_the_run)  # the finder finds them
    assert sorted(of_the_run.values()) == sorted(keys.fixed_run_keys("p", "s"))


def test_a_name_of_an_action_belongs_to_its_run() -> None:
    assert keys.index_of("p", "repo-1-a:review:r1:codex") == keys.run_index("p", "repo-1-a")
    assert keys.run_key_re("p", "s").match(keys.run_index("p", "s"))
    assert keys.is_record_key("p", "s", keys.run_index("p", "s"))
