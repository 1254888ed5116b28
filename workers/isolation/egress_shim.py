"""Inside a CLI agent's sandbox: the agent's only ways out, all through the host's egress proxy.

The sandbox has its own network namespace (``--unshare-net``): loopback only. Jury binds the host proxy's
unix socket into it (``workers.isolation.egress``); this script, run by the sandbox before the agent, listens
on the sandbox's loopback and carries every connection to that socket as a ``CONNECT host:port``, which the
host side allows only when the agent's entry lists it. Nothing here decides what is allowed: the agent can
talk to the socket itself, so the host side is the one check.

- ``--proxy``: one listener (a free port on 127.0.0.1) speaking HTTP ``CONNECT`` and plain absolute-form
  HTTP proxying; ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY`` (and their lower-case forms) name it.
- ``--forward ADDR:PORT=HOST:PORT``: a listener on the sandbox's ``ADDR:PORT`` that tunnels every
  connection to ``HOST:PORT``: for tools that ignore the proxy variables (Node's ``fetch``). The sandbox's
  ``/etc/hosts`` (written by Jury) maps each listed host name to its ``ADDR``.

The listeners are bound before the agent starts (so it never races them), served by a forked child, and
the agent is exec'd in this process: it keeps the pid, signals and exit status Jury supervises. When the
agent exits, bubblewrap's pid namespace ends and takes the forwarder with it.

Standard library only, and nothing of Jury imported: it runs with the sandbox's view of the interpreter
(``python -I -S``), before anything else.
"""

from __future__ import annotations

import os
import socket
import sys
import threading

HEAD_MAX = 64 * 1024  # bytes of a request head read before giving up on it
CHUNK = 64 * 1024
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")
HOP_HEADERS = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")


def read_head(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """The request or response head (through the blank line) and whatever was read past it; None when the
    peer closed first or the head is longer than ``HEAD_MAX``."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_MAX:
            return None
        chunk = sock.recv(CHUNK)
        if not chunk:
            return None
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    return head + b"\r\n\r\n", rest


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends, then end ``dst``'s writing side."""
    try:
        while chunk := src.recv(CHUNK):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def splice(a: socket.socket, b: socket.socket) -> None:
    """Both directions until both end; then both sockets are closed."""
    other = threading.Thread(target=pump, args=(b, a), daemon=True)
    other.start()
    pump(a, b)
    other.join()
    a.close()
    b.close()


def tunnel(socket_path: str, target: str) -> tuple[socket.socket | None, bytes]:
    """A connection to ``target`` through the host proxy, and the host's answer head (its status line says
    whether it was allowed); the socket is None when it was not."""
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        host.connect(socket_path)
        host.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        got = read_head(host)
    except OSError:
        got = None
    if got is None:
        host.close()
        return None, b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"
    head, _rest = got  # the host sends nothing after its head until the client speaks
    if head.split(b" ", 2)[1:2] != [b"200"]:
        host.close()
        return None, head
    return host, head


def forward(client: socket.socket, socket_path: str, target: str) -> None:
    """One connection to a ``--forward`` listener: tunnel it whole to ``target``."""
    host, _head = tunnel(socket_path, target)
    if host is None:
        client.close()
        return
    splice(client, host)


def origin_form(head: bytes) -> tuple[str, bytes] | None:
    """An absolute-form request (``GET http://host:port/path HTTP/1.1``) as the target ``host:port`` and
    the head to send the server: origin-form, without proxy and hop headers, ``Connection: close`` (one
    request per tunnel: the next one may name another host)."""
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[1].lower().startswith(b"http://"):
        return None
    rest = parts[1][len(b"http://") :]
    authority, slash, path = rest.partition(b"/")
    authority = authority.rpartition(b"@")[2]  # never forward credentials in the URL
    if not authority:
        return None
    target = authority.decode("latin-1")
    if ":" not in target.rpartition("]")[2]:  # no port (an IPv6 literal's colons are in brackets)
        target += ":80"
    kept = [ln for ln in lines[1:] if ln.split(b":", 1)[0].strip().lower() not in HOP_HEADERS]
    first = b" ".join([parts[0], slash + path if slash else b"/", parts[2]])
    return target, b"\r\n".join([first, *kept, b"Connection: close"]) + b"\r\n\r\n"


def proxy(client: socket.socket, socket_path: str) -> None:
    """One connection to the ``--proxy`` listener: ``CONNECT`` or an absolute-form plain HTTP request."""
    try:
        got = read_head(client)
    except OSError:
        got = None
    if got is None:
        client.close()
        return
    head, rest = got
    request_line = head.split(b"\r\n", 1)[0].split(b" ")
    if len(request_line) == 3 and request_line[0].upper() == b"CONNECT":
        host, answer = tunnel(socket_path, request_line[1].decode("latin-1"))
        try:
            client.sendall(answer)
        except OSError:
            pass
        if host is None:
            client.close()
            return
        if rest:
            host.sendall(rest)
        splice(client, host)
        return
    plain = origin_form(head)
    if plain is None:
        client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        client.close()
        return
    target, upstream_head = plain
    host, answer = tunnel(socket_path, target)
    if host is None:
        client.sendall(answer)
        client.close()
        return
    host.sendall(upstream_head + rest)
    splice(client, host)


def serve(listener: socket.socket, handle: object, *args: str) -> None:
    """Accept forever; each connection on its own thread."""
    while True:
        try:
            conn, _addr = listener.accept()
        except OSError:
            continue
        threading.Thread(target=handle, args=(conn, *args), daemon=True).start()  # type: ignore[arg-type]


def listen(addr: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((addr, port))
    sock.listen(128)
    return sock


def split_address(text: str) -> tuple[str, int]:
    """``127.0.0.2:443`` or ``[::1]:443`` -> (address, port)."""
    addr, _, port = text.rpartition(":")
    return addr.strip("[]"), int(port)


def main(args: list[str]) -> int:
    """``--socket PATH [--forward ADDR:PORT=HOST:PORT]... -- ARGV...``: bind, fork the forwarder, exec."""
    if "--" not in args:
        print("jury egress: usage: --socket PATH [--forward A:P=H:P]... -- ARGV...", file=sys.stderr)
        return 2
    split = args.index("--")
    options, argv = args[:split], args[split + 1 :]
    socket_path, forwards = "", []
    pairs = iter(options)
    for flag in pairs:
        value = next(pairs, "")
        if flag == "--socket":
            socket_path = value
        elif flag == "--forward":
            local, _, target = value.partition("=")
            forwards.append((local, target))
        else:
            print(f"jury egress: unknown option {flag!r}", file=sys.stderr)
            return 2
    if not socket_path or not argv:
        print("jury egress: needs --socket and a command", file=sys.stderr)
        return 2
    listeners: list[tuple[socket.socket, object, tuple[str, ...]]] = []
    for local, target in forwards:  # first: the proxy's free port must not take a listed one
        try:
            listeners.append((listen(*split_address(local)), forward, (socket_path, target)))
        except OSError as exc:  # e.g. a port the sandbox cannot bind: the proxy still carries it
            print(f"jury egress: cannot listen on {local} for {target}: {exc}", file=sys.stderr)
    proxy_sock = listen("127.0.0.1", 0)
    listeners.append((proxy_sock, proxy, (socket_path,)))
    proxy_url = f"http://127.0.0.1:{proxy_sock.getsockname()[1]}"
    if os.fork() == 0:  # the forwarder: its own threads, no stdio of the agent's
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        for sock, handle, extra in listeners:
            threading.Thread(target=serve, args=(sock, handle, *extra), daemon=True).start()
        threading.Event().wait()
        os._exit(0)
    for sock, _handle, _extra in listeners:
        sock.close()
    env = dict(os.environ)
    env.update(dict.fromkeys(PROXY_VARS, proxy_url))
    # The sandbox's own loopback is no way out: a listed loopback server has its forwarder there, and
    # anything else on it is the agent's own.
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        print(f"jury egress: cannot run {argv[0]}: {exc}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
