"""A CLI agent's network: nothing but the ``host:port`` endpoints its entry lists in ``egress``.

A CLI agent runs with its own network namespace (``--unshare-net``), so the host's loopback, where the
console and Redis answer, is out of its reach. Its one way out is the proxy started here for the length
of its run: a unix socket, owned by the worker, bound into the sandbox, speaking HTTP ``CONNECT``. It
allows exactly the endpoints listed (compared as text, before anything is resolved: an unlisted name is
never looked up, an unlisted address never connected to), loopback only when listed (a local model
server), and refuses the rest with 403, logged as ``egress.refused``.

Inside, ``workers.isolation.egress_shim`` listens on the sandbox's loopback: a proxy the ``*_PROXY`` variables
name,
and one forwarder per listed endpoint for tools that ignore those variables (Node's ``fetch``): a listed
host name resolves, through the hosts file bound over ``/etc/hosts``, to its own 127.0.0.N, where its
forwarder listens on the listed port. A listed loopback address keeps its own address inside; a listed
non-loopback address has no forwarder (the sandbox cannot hold that address) and goes through the proxy.

Hand-written rather than a proxy package: the whole of it is an allow-list check and a byte splice, and
it must run in the worker and in the sandbox with the standard library alone.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import socketserver
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import structlog

from orchestrator.agent_keys import split_endpoint
from workers.isolation import egress_shim
from workers.isolation.jail_egress import EGRESS_DIR, EgressMounts

log = structlog.get_logger()

SHIM = Path(egress_shim.__file__).resolve()
SOCKET_NAME = "proxy.sock"
HEAD_SECONDS = 10.0  # a client that has not sent its CONNECT line by then is dropped
CONNECT_SECONDS = 15.0
MAX_TUNNELS = 64  # connections open at once through one agent's proxy
BASE_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost\n"


@dataclass(frozen=True)
class Forward:
    """One in-sandbox listener: ``local`` (``addr:port`` inside) tunnels to ``target`` (a listed one)."""

    local: str
    target: str


@dataclass(frozen=True)
class Plan:
    """What the sandbox gets for a list of endpoints: its forwarders and its hosts file's text."""

    allowed: frozenset[str]
    forwards: tuple[Forward, ...]
    hosts: str

    @property
    def low_ports(self) -> bool:
        return any(int(f.local.rpartition(":")[2]) < 1024 for f in self.forwards)


def plan(endpoints: Sequence[str]) -> Plan:
    """Forwarders and hosts for ``endpoints`` (checked ``host:port`` strings, ``orchestrator.agent_keys``).

    Host names get 127.0.0.2, .3, ... in the order first listed (``localhost`` keeps 127.0.0.1); a
    loopback address listens as itself; any other address has no forwarder (only the proxy reaches it).
    """
    names: dict[str, str] = {"localhost": "127.0.0.1"}
    forwards: list[Forward] = []
    allowed: list[str] = []
    for endpoint in endpoints:
        host, port = split_endpoint(endpoint)
        target = endpoint.lower()
        allowed.append(target)
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            if host not in names:
                names[host] = f"127.0.0.{len(names) + 1}"
            forwards.append(Forward(local=f"{names[host]}:{port}", target=target))
            continue
        if address.is_loopback:
            local = f"[{address}]" if address.version == 6 else str(address)
            forwards.append(Forward(local=f"{local}:{port}", target=target))
    lines = [f"{addr}\t{name}\n" for name, addr in names.items() if name != "localhost"]
    return Plan(frozenset(allowed), tuple(dict.fromkeys(forwards)), BASE_HOSTS + "".join(lines))


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        if not self.server.slots.acquire(blocking=False):
            self.request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
            return
        try:
            self._tunnel(self.request)
        except OSError:
            pass
        finally:
            self.server.slots.release()

    def _tunnel(self, conn: socket.socket) -> None:
        conn.settimeout(HEAD_SECONDS)
        got = egress_shim.read_head(conn)
        if got is None:
            return
        head, rest = got
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        target = parts[1].decode("latin-1").lower() if len(parts) == 3 else ""
        if parts[0] != b"CONNECT" or target not in self.server.allowed:
            log.warning("egress.refused", agent=self.server.agent, target=target[:300] or None)
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        host, port = split_endpoint(target)
        try:
            upstream = socket.create_connection((host, port), timeout=CONNECT_SECONDS)
        except OSError as exc:
            log.info("egress.unreachable", agent=self.server.agent, target=target, error=str(exc))
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        log.debug("egress.connected", agent=self.server.agent, target=target)
        conn.settimeout(None)
        upstream.settimeout(None)
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if rest:
            upstream.sendall(rest)
        egress_shim.splice(conn, upstream)


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, path: str, allowed: frozenset[str], agent: str) -> None:
        self.allowed, self.agent = allowed, agent
        self.slots = threading.BoundedSemaphore(MAX_TUNNELS)
        super().__init__(path, _Handler)


@dataclass(frozen=True)
class Egress:
    """A running proxy for one agent run: the sandbox's mounts and the command that starts the shim."""

    mounts: EgressMounts
    plan: Plan

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run by the shim inside the sandbox (the interpreter isolated: no site, no PYTHON*)."""
        out = [sys.executable, "-I", "-S", str(SHIM), "--socket", str(EGRESS_DIR / SOCKET_NAME)]
        for f in self.plan.forwards:
            out += ["--forward", f"{f.local}={f.target}"]
        return [*out, "--", *argv]


@contextmanager
def egress_proxy(agent: str, endpoints: Sequence[str]) -> Iterator[Egress]:
    """The proxy for one run of ``agent``, allowing ``endpoints``; stopped and removed on exit."""
    the_plan = plan(endpoints)
    directory = Path(tempfile.mkdtemp(prefix="jury-egress-"))
    server: _Server | None = None
    serving = False
    try:
        sockets = directory / "socket"
        sockets.mkdir()
        hosts = directory / "hosts"
        hosts.write_text(the_plan.hosts, encoding="utf-8")
        server = _Server(str(sockets / SOCKET_NAME), the_plan.allowed, agent)
        # Reachable by the sandbox whatever uid it runs as; it allows no more than the host's own network.
        for path, mode in (
            (directory, 0o755),
            (sockets, 0o755),
            (hosts, 0o644),
            (sockets / SOCKET_NAME, 0o666),
        ):
            os.chmod(path, mode)
        threading.Thread(target=server.serve_forever, name=f"egress-{agent}", daemon=True).start()
        serving = True
        log.info("egress.start", agent=agent, allowed=sorted(the_plan.allowed))
        yield Egress(
            mounts=EgressMounts(socket_dir=sockets, hosts_file=hosts, low_ports=the_plan.low_ports),
            plan=the_plan,
        )
    finally:
        if server is not None:
            if serving:
                server.shutdown()
            server.server_close()
        shutil.rmtree(directory, ignore_errors=True)
