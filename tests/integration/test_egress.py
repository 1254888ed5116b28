"""A CLI agent's network, as the attacker sees it: a fake agent (``tests/fakes/egress_agent.py``) run by
``run_cli_agent`` in the real bubblewrap sandbox, against a real console on the host's loopback, the
machine's real Redis and a local fake model server. It reaches what its entry's ``egress`` lists and
nothing else: not the console, not Redis, not an unlisted port, neither through the proxy, nor around
it, nor through the proxy's socket itself."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import redis

from jury_cli.web.app import create_app
from jury_cli.web.auth import Guard
from orchestrator.config import Settings
from orchestrator.spec import AgentSpec, SandboxSettings
from orchestrator.store.files import FileStore
from tests.fakes import console_run as run
from tests.redis_server import host_port, redis_url
from workers.agents.cli import run_cli_agent
from workers.isolation.sandbox import sandbox_problem

pytestmark = pytest.mark.skipif(sandbox_problem(SandboxSettings()) is not None, reason="no bubblewrap here")

AGENT = Path(__file__).resolve().parents[1] / "fakes" / "egress_agent.py"
REDIS = "{}:{}".format(*host_port())
GET = "GET /api/runs HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
PING = "PING\r\n"


class _Model(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"MODEL-OK"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def model_server() -> Iterator[str]:
    """A fake model server on the host's loopback: ``host:port``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def console(tmp_path: Path) -> Iterator[str]:
    """A console on loopback holding a run, reading without its token (the old loopback rule): the sandbox
    alone must keep an agent out. ``host:port``."""
    store = FileStore(tmp_path / "state")
    store.append("acme-7", run.started())
    app = create_app(Settings(dir=tmp_path / "state", redis_url=None), store, Guard("t" * 32, False), True)
    with run.serve(app) as base:
        assert "acme-7" in httpx.get(f"{base}/api/runs").text  # from the host, it answers
        yield base.removeprefix("http://")


def attack(tmp_path: Path, tries: list[dict[str, str]], egress: list[str]) -> dict[str, str]:
    """Run the fake agent with ``tries`` in the sandbox, its entry listing ``egress``; label -> its line."""
    spec = AgentSpec(name="attacker", argv=[sys.executable, str(AGENT), "{prompt_file}"], egress=egress)
    wt = tmp_path / "wt"
    wt.mkdir(exist_ok=True)
    result = run_cli_agent(
        spec,
        role="reviewer",
        prompt=json.dumps(tries),
        worktree=wt,
        out_dir=tmp_path / "out",
        name=f"attack-{uuid.uuid4().hex[:8]}",
        timeout=120,
    )
    assert result.proc.exit_code == 0, result.stdout + result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    assert set(lines) == {t["label"] for t in tries}, result.stdout + result.stderr
    return lines


def test_an_agent_gets_nothing_from_the_console_or_redis(
    tmp_path: Path, console: str, model_server: str
) -> None:
    assert redis.Redis.from_url(redis_url(0)).ping()  # Redis answers the host
    tries = [
        {"label": f"{how}-{name}", "how": how, "target": target, "send": send}
        for name, target, send in (("console", console, GET), ("redis", REDIS, PING))
        for how in ("direct", "connect", "socket")
    ]
    tries.append({"label": "plain-console", "how": "plain", "target": console, "send": GET.replace(
        "/api/runs", f"http://{console}/api/runs")})  # fmt: skip
    tries.append({"label": "urllib-console", "how": "urllib", "target": console})
    lines = attack(tmp_path, tries, egress=[model_server])  # a listed server does not open the others
    for label, line in lines.items():
        assert "acme" not in line and "PONG" not in line, f"{label}: {line}"
        assert line.startswith("FAILED") or label == "plain-console", f"{label}: {line}"
    for label in ("connect-console", "socket-console", "connect-redis", "socket-redis", "plain-console"):
        assert "403" in lines[label], f"{label}: {lines[label]}"  # the proxy refused it
    assert "Connection refused" in lines["direct-console"]  # nothing listens on the sandbox's loopback
    assert lines["plain-console"].startswith("GOT b'HTTP/1.1 403 Forbidden")  # the in-sandbox proxy says so


def test_an_agent_reaches_the_listed_model_server_every_way(tmp_path: Path, model_server: str) -> None:
    hello = "GET /v1/responses HTTP/1.0\r\nHost: model\r\n\r\n"
    tries = [
        {"label": how, "how": how, "target": model_server, "send": hello}
        for how in ("direct", "connect", "socket", "urllib")
    ]
    tries.append({"label": "plain", "how": "plain", "target": model_server, "send": hello.replace(
        "/v1/", f"http://{model_server}/v1/")})  # fmt: skip
    lines = attack(tmp_path, tries, egress=[model_server])
    for label, line in lines.items():
        assert line.startswith("GOT") and "MODEL-OK" in line, f"{label}: {line}"


def low_port_server(address: str) -> ThreadingHTTPServer:
    """A model server on a free port below 1024 (as an API's 443 is): only root may bind one."""
    if os.geteuid() != 0:
        pytest.skip("binding a port below 1024 on the host needs root")
    for port in range(600, 1024):
        try:
            return ThreadingHTTPServer((address, port), _Model)
        except OSError:
            continue
    pytest.skip("no free port below 1024")


@pytest.mark.parametrize("low", [False, True], ids=["high-port", "low-port"])
def test_a_listed_host_name_resolves_inside_to_its_forwarder(tmp_path: Path, low: bool) -> None:
    """A host name in ``egress``: the sandbox's hosts file maps it to a 127.0.0.N of its own, where a
    forwarder listens on the listed port (tools that ignore HTTPS_PROXY connect straight to it), a port
    below 1024 too (the sandbox keeps CAP_NET_BIND_SERVICE, in its own namespaces, for it)."""
    name = socket.gethostname().lower()
    try:
        address = socket.getaddrinfo(name, None, socket.AF_INET)[0][4][0]
    except (OSError, IndexError):
        pytest.skip(f"this machine's name {name!r} does not resolve here")
    server = low_port_server(str(address)) if low else ThreadingHTTPServer((str(address), 0), _Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        target = f"{name}:{server.server_address[1]}"
        hello = "GET / HTTP/1.0\r\nHost: model\r\n\r\n"
        tries = [{"label": how, "how": how, "target": target, "send": hello} for how in ("direct", "connect")]
        lines = attack(tmp_path, tries, egress=[target])
    finally:
        server.shutdown()
        server.server_close()
    for label, line in lines.items():
        assert line.startswith("GOT") and "MODEL-OK" in line, f"{label}: {line}"


def test_an_unlisted_port_is_refused_by_the_proxy(tmp_path: Path, model_server: str) -> None:
    """The same host, another port: refused by the proxy (403), and no forwarder inside to connect to."""
    host, _, port = model_server.rpartition(":")
    other = socket.socket()
    other.bind((host, 0))
    other.listen(1)
    unlisted = f"{host}:{other.getsockname()[1]}"
    hello = "GET / HTTP/1.0\r\n\r\n"
    try:
        tries = [
            {"label": how, "how": how, "target": unlisted, "send": hello}
            for how in ("direct", "connect", "socket")
        ]
        lines = attack(tmp_path, tries, egress=[model_server])
        other.setblocking(False)
        with pytest.raises(BlockingIOError):
            other.accept()  # nothing reached it
    finally:
        other.close()
    assert "403" in lines["connect"] and "403" in lines["socket"], lines
    assert lines["direct"].startswith("FAILED"), lines


def test_no_egress_means_no_network_at_all(tmp_path: Path, model_server: str) -> None:
    hello = "GET / HTTP/1.0\r\n\r\n"
    tries = [
        {"label": how, "how": how, "target": model_server, "send": hello} for how in ("direct", "connect")
    ]
    lines = attack(tmp_path, tries, egress=[])
    assert all(line.startswith("FAILED") for line in lines.values()), lines
