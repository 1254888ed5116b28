"""The jail uid's settings and the setpriv prefix, without running anything (``tests/integration/
test_jail_uid.py`` runs the jails)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from orchestrator.errors import ConfigError
from orchestrator.spec import SandboxSettings
from orchestrator.trust import parse_sandbox
from workers.isolation import jailuid


def test_the_default_range_and_none() -> None:
    assert jailuid.uid_range(SandboxSettings()) == range(60000, 61000)
    assert jailuid.uid_range(SandboxSettings(uids="")) == range(0)
    assert not jailuid.switches_uid(SandboxSettings(uids=""))
    assert not jailuid.switches_uid(SandboxSettings(mode="none"))


@pytest.mark.parametrize("bad", ["60000", "0-10", "999-2000", "70000-60000", "a-b", "60000-", "-1-5"])
def test_a_bad_range_names_the_key(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"\[sandbox\]\.uids"):
        parse_sandbox("config.toml", {"sandbox": {"uids": bad}})


def test_the_state_group_is_no_jail_uid() -> None:
    with pytest.raises(ValidationError, match="state_gid 60005 lies in uids"):
        SandboxSettings(uids="60000-60010", state_gid=60005)


def test_setpriv_drops_everything() -> None:
    argv = jailuid.setpriv_argv("/usr/bin/setpriv", 60007)
    assert argv[:3] == ["/usr/bin/setpriv", "--reuid=60007", "--regid=60007"]
    assert "--clear-groups" in argv and argv[-1] == "--"
    assert {"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"} <= set(argv)
    with_state = jailuid.setpriv_argv("/usr/bin/setpriv", 60007, [59999])
    assert "--clear-groups" not in with_state and ["--groups", "59999"] == with_state[3:5]
