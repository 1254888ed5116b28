"""A configured ``family`` decides the refuter's independence, through the real paths: ``jury review``
(the refute job of a worker) and ``jury refute``.

Each refuter here has a ``vendor/model`` id whose vendor prefix says one family while its configured
``family`` says another; the record must follow the configured one, as the refuter's choice does.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_second_opinion import (
    FID,
    TEST_CMD,
    critic,
    events_of,
    finder,
    judge,
    refutation_log,
    refuter_calls,
    review,
    shown,
    the_run,
)

JUDGE_VENDOR_MODEL = "vendorj/critic-1"  # the judge's vendor prefix (the judge runs vendorj/judge-1)
OTHER_VENDOR_MODEL = "vendorr/critic-1"


def configured(entry: str, family: str) -> str:
    """An agent entry with ``family`` set (the last key of its table)."""
    return entry + f'family = "{family}"\n'


@pytest.mark.parametrize(
    ("model", "family", "forced", "independent"),
    [
        # the judge's vendor prefix, another configured family: chosen by default, and independent
        (JUDGE_VENDOR_MODEL, "vendorr", False, True),
        # another vendor prefix, the judge's family configured: only forced, and not independent
        (OTHER_VENDOR_MODEL, "vendorj", True, False),
    ],
    ids=["prefix-of-the-judge-family-of-another", "prefix-of-another-family-of-the-judge"],
)
def test_the_configured_family_decides_independence_in_the_record(
    jury, sample_repo, write_config, state_dir, fake_state, model, family, forced, independent
) -> None:
    config = write_config(finder(), configured(critic("not-refuted", model=model), family), judge())
    r = review(jury, sample_repo, config, *(["--refuter", "critic"] if forced else []))
    assert r.code == 0, r.out + r.err
    d = the_run(state_dir)
    state = shown(jury, d.name)
    assert state["config"]["refuter"] == "critic" and state["config"]["refuterForced"] is forced
    assert [c["agent"] for c in refuter_calls(fake_state)] == ["critic"]
    # the event, the fold (run.json), the refutation log and the summary all say it
    (verdict,) = [v for v in events_of(d, "refute.verdict") if v["source"] == "refuter"]
    assert (verdict["id"], verdict["agent"], verdict["model"]) == (FID, "critic", model)
    assert verdict["independent"] is independent
    ref = state["findings"][FID]["refutation"]
    assert (ref["reviewer_agent"], ref["reviewer_model"], ref["outcome"]) == ("critic", model, "not_refuted")
    assert ref["independent"] is independent
    (line,) = refutation_log(d)
    assert (line["finding"], line["independent"], line["reviewer_model"]) == (FID, independent, model)
    said = "independent" if independent else "NOT independent"
    assert f"{FID} second opinion: not_refuted by critic, {said}" in jury("show", d.name).out


@pytest.mark.parametrize(
    ("model", "family", "independent"),
    [(JUDGE_VENDOR_MODEL, "vendorr", True), (OTHER_VENDOR_MODEL, "vendorj", False)],
    ids=["prefix-of-the-judge-family-of-another", "prefix-of-another-family-of-the-judge"],
)
def test_jury_refute_follows_the_configured_family(
    jury, sample_repo, write_config, fake_state, model, family, independent
) -> None:
    config = write_config(
        '[jury]\njudge = "judge"\nreviewers = ["critic"]\n',
        judge(),
        configured(critic("not-refuted", model=model), family),
    )
    args = ["refute", "--repo", str(sample_repo), "--config", str(config), "--json"]
    r = jury(*args, "--claim", "mean() is correct", "--command", TEST_CMD, "--refuter", "critic")
    assert r.code == 0, r.out + r.err
    record = json.loads(r.out)
    assert (record["ran"], record["reviewer_agent"], record["reviewer_model"]) == (True, "critic", model)
    assert record["independent"] is independent
    assert [c["agent"] for c in refuter_calls(fake_state)] == ["critic"]
