"""A reply resumes its reviewer's session only on the host that holds it.

A CLI agent's session lives in its state dirs on the host that ran the review; with no shared disk, a
reply handed to another host must ask afresh instead of resuming a session that is not there.
"""

from __future__ import annotations

from orchestrator.domain import AgentReport, Event
from orchestrator.fold import fold
from tests.unit.test_fold_decide import start
from workers.runtime.jobs import resumable


def reviewed(session: str | None, host: str | None) -> list[Event]:
    return [
        *start(),
        AgentReport(
            eid="review:r1:a:report",
            agent="a",
            round=1,
            verdict="found",
            seconds=1.0,
            session_id=session,
            host=host,
        ),
    ]


def test_the_host_that_ran_the_review_resumes_its_session() -> None:
    s = fold(reviewed("s-1", "worker-a"))
    assert s.session_hosts == {"a": "worker-a"}
    assert resumable(s, "a", True, "worker-a")


def test_another_host_asks_afresh() -> None:
    assert not resumable(fold(reviewed("s-1", "worker-a")), "a", True, "worker-b")


def test_no_session_or_no_resume_support_asks_afresh() -> None:
    assert not resumable(fold(reviewed(None, None)), "a", True, "worker-a")
    assert not resumable(fold(reviewed("s-1", "worker-a")), "a", False, "worker-a")


def test_a_log_from_before_hosts_were_recorded_resumes_as_it_did() -> None:
    assert resumable(fold(reviewed("s-1", None)), "a", True, "anywhere")
