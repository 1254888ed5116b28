"""A CLI agent that tries the network from inside its sandbox, every way there is, and prints what came back.

Its one argument is a file holding a JSON list of tries ``{"label", "how", "target", "send"}``:

- ``direct``: a TCP connection to ``target`` (``host:port``, resolved inside: the sandbox's hosts file);
- ``connect``: ``CONNECT target`` to the proxy ``$HTTPS_PROXY`` names, then ``send`` through the tunnel;
- ``plain``: ``send`` (an absolute-form request) to the proxy ``$HTTP_PROXY`` names;
- ``socket``: ``CONNECT target`` straight to the egress socket the sandbox holds (past the forwarder);
- ``urllib``: ``urllib.request`` of ``http://target/`` with the proxy variables as it reads them.

One line per try: ``<label> GOT <first 200 bytes of the answer, escaped>`` or ``<label> FAILED <why>``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import urllib.request
from urllib.parse import urlsplit

EGRESS_SOCKET = "/run/jury-egress/proxy.sock"


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def split(target: str) -> tuple[str, int]:
    host, _, port = target.rpartition(":")
    return host.strip("[]"), int(port)


def through_tunnel(sock: socket.socket, target: str, send: bytes) -> bytes:
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            raise OSError("the proxy closed the connection")
        head += chunk
    status = head.split(b"\r\n", 1)[0]
    if b" 200 " not in status + b" ":
        raise OSError(f"proxy answered {status.decode('latin-1')}")
    sock.sendall(send)
    return read_all(sock)


def attempt(how: str, target: str, send: bytes) -> bytes:
    if how == "direct":
        with socket.create_connection(split(target), timeout=10) as sock:
            sock.sendall(send)
            return read_all(sock)
    if how in ("connect", "plain"):
        proxy = os.environ.get("HTTPS_PROXY" if how == "connect" else "HTTP_PROXY", "")
        where = urlsplit(proxy)
        if not where.hostname or not where.port:
            raise OSError(f"no proxy in the environment ({proxy!r})")
        with socket.create_connection((where.hostname, where.port), timeout=10) as sock:
            if how == "connect":
                return through_tunnel(sock, target, send)
            sock.sendall(send)
            return read_all(sock)
    if how == "socket":
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(EGRESS_SOCKET)
            return through_tunnel(sock, target, send)
    if how == "urllib":
        with urllib.request.urlopen(f"http://{target}/", timeout=10) as answer:
            return bytes(answer.read())
    raise ValueError(how)


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as fh:
        tries = json.load(fh)
    for one in tries:
        try:
            got = attempt(one["how"], one["target"], one.get("send", "").encode())
            print(one["label"], "GOT", repr(got[:200]), flush=True)
        except Exception as exc:
            print(one["label"], "FAILED", repr(exc), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
