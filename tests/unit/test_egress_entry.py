"""An agent's ``egress`` entry: how it is written and checked, and what the sandbox is given for it (the
forwarders, the hosts file, the bubblewrap arguments). The network itself is tested against real
bubblewrap in ``tests/integration/test_egress.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.agent_keys import check_agent
from orchestrator.errors import ConfigError
from workers.isolation.egress import Forward, plan
from workers.isolation.jail_egress import EGRESS_DIR, EgressMounts
from workers.isolation.sandbox import Jail, bwrap_argv, state_dir_paths


def entry(egress: object) -> list[str]:
    return check_agent("jury.toml", "a", {"argv": ["a", "{prompt}"], "egress": egress}, None).egress


def test_endpoints_have_one_spelling() -> None:
    assert entry(["API.OpenAI.com:443", "127.0.0.1:8080", "[0:0::1]:9", "api.openai.com:443"]) == [
        "api.openai.com:443",
        "127.0.0.1:8080",
        "[::1]:9",
    ]
    assert entry([]) == []


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("api.openai.com:443", "must be a list of strings"),
        (["api.openai.com"], "is not host:port"),
        (["api.openai.com:0"], "is not host:port"),
        (["api.openai.com:65536"], "is not host:port"),
        (["api.openai.com:0443"], "is not host:port"),
        (["*.openai.com:443"], "is not a host name or an address"),
        (["evil.com/x:443"], "is not a host name or an address"),
        (["::1:443"], "write an IPv6 address in brackets"),
        (["[127.0.0.1]:443"], "only an IPv6 address goes in brackets"),
        ([":443"], "is not a host name or an address"),
    ],
)
def test_a_bad_endpoint_is_refused_by_name(value: object, why: str) -> None:
    with pytest.raises(ConfigError, match=r"jury\.toml: agents\.a\.egress: ") as caught:
        entry(value)
    assert why in str(caught.value)


def test_plan_gives_names_their_own_loopback_address_and_addresses_their_own() -> None:
    p = plan(
        ["api.openai.com:443", "127.0.0.1:8080", "chatgpt.com:443", "api.openai.com:8443", "10.0.0.5:443"]
    )
    assert p.forwards == (
        Forward("127.0.0.2:443", "api.openai.com:443"),
        Forward("127.0.0.1:8080", "127.0.0.1:8080"),
        Forward("127.0.0.3:443", "chatgpt.com:443"),
        Forward("127.0.0.2:8443", "api.openai.com:8443"),
    )  # 10.0.0.5 has no forwarder: the sandbox cannot hold that address, the proxy still carries it
    assert "10.0.0.5:443" in p.allowed and p.low_ports
    assert p.hosts.splitlines() == [
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost",
        "127.0.0.2\tapi.openai.com",
        "127.0.0.3\tchatgpt.com",
    ]
    assert not plan(["127.0.0.1:8080"]).low_ports
    assert plan(["localhost:9000"]).forwards == (Forward("127.0.0.1:9000", "localhost:9000"),)


def test_a_jail_with_egress_has_its_own_network_and_the_proxy_socket(tmp_path: Path) -> None:
    mounts = EgressMounts(socket_dir=tmp_path / "s", hosts_file=tmp_path / "hosts", low_ports=True)
    argv = bwrap_argv(Jail(worktree=tmp_path, network=True, egress=mounts), ["agent"], tmp_path)
    assert "--unshare-net" in argv  # network=True does not undo it
    joined = " ".join(argv)
    assert f"--ro-bind {tmp_path / 's'} {EGRESS_DIR}" in joined
    assert f"--ro-bind {tmp_path / 'hosts'} /etc/hosts" in joined
    assert argv[argv.index("--cap-add") + 1] == "CAP_NET_BIND_SERVICE"
    assert argv.index("--cap-add") > argv.index("--cap-drop")
    plain = bwrap_argv(Jail(worktree=tmp_path, network=True), ["agent"], tmp_path)
    assert "--unshare-net" not in plain and "/etc/hosts" not in plain


def test_a_state_dir_that_overlaps_jurys_state_directory_is_refused(tmp_path: Path) -> None:
    """A state dir is bound read-write: one holding ``JURY_DIR`` (or inside it) would hand the jail
    other runs' worktrees and records."""
    home = tmp_path / "home"
    jail = Jail(worktree=tmp_path / "wt", state_dirs=("$CODEX_HOME",))
    for codex_home, jury_dir in [
        (tmp_path / "s", tmp_path / "s" / "jury"),
        (tmp_path / "j" / "c", tmp_path / "j"),
    ]:
        env = {"CODEX_HOME": str(codex_home), "JURY_DIR": str(jury_dir)}
        with pytest.raises(ValueError, match="overlaps Jury's state directory"):
            state_dir_paths(jail, env, home)
    default = Jail(worktree=tmp_path / "wt", state_dirs=("~/.jury/runs",))
    with pytest.raises(ValueError, match="overlaps Jury's state directory"):
        state_dir_paths(default, {}, home)  # JURY_DIR unset: ~/.jury
    apart = {"CODEX_HOME": str(tmp_path / "codex"), "JURY_DIR": str(tmp_path / "jury")}
    assert state_dir_paths(jail, apart, home) == [tmp_path / "codex"]
