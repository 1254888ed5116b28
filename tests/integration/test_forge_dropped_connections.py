"""A connection the forge drops is tried again, a bounded number of times, with a growing wait.

A real local TCP server that reads each HTTP request and then, for as many connections as it is told,
hangs up without a word (what a restarting proxy or a load balancer's idle cut looks like to httpx:
``RemoteProtocolError``, a ``TransportError``); after that it answers. ``Api`` waits with the injected
``sleep`` (recorded here, never slept) between tries.
"""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from orchestrator.forge import ForgeError
from orchestrator.forge.limits import SERVER_BACKOFF
from orchestrator.forge.transport import Api

TOKEN = "ghp_dropped0connection0token"
ANSWER = {"number": 1, "title": "plain"}


@dataclass
class Dropper:
    """How many of the next connections to drop after reading their request; what arrived."""

    drop: int = 0
    requests: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Handler(socketserver.StreamRequestHandler):
    server: DroppingServer

    def handle(self) -> None:
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            line = self.rfile.readline()
            if not line:
                return
            head += line
        state = self.server.state
        with state.lock:
            state.requests.append(head)
            dropping = state.drop > 0
            state.drop -= dropping
        if dropping:
            return  # the socket closes with no status line: the client sees the server disconnect
        body = json.dumps(ANSWER).encode()
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )


class DroppingServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = Dropper()


@pytest.fixture
def server() -> Iterator[DroppingServer]:
    srv = DroppingServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=10)


@pytest.fixture
def waits() -> list[float]:
    return []


@pytest.fixture
def api(server: DroppingServer, waits: list[float]) -> Iterator[Api]:
    host, port = server.server_address[:2]
    with httpx.Client() as client:
        yield Api(
            forge="github",
            base_url=f"http://{host!s}:{port}",
            client=client,
            auth={"Authorization": f"Bearer {TOKEN}"},
            sleep=waits.append,
            max_retries=3,
        )


def test_dropped_connections_are_tried_again_until_the_forge_answers(
    server: DroppingServer, api: Api, waits: list[float]
) -> None:
    server.state.drop = 2
    answer = api.call("GET", "/repos/octo/widgets/pulls/1", repo="octo/widgets")
    assert answer.status == 200 and answer.data == ANSWER
    assert len(server.state.requests) == 3  # two dropped, the third answered
    assert waits == [SERVER_BACKOFF, 2 * SERVER_BACKOFF]  # a growing wait before each new try


def test_a_forge_that_keeps_dropping_fails_after_the_bounded_retries(
    server: DroppingServer, api: Api, waits: list[float]
) -> None:
    server.state.drop = 100
    with pytest.raises(ForgeError) as failed:
        api.call("GET", "/repos/octo/widgets/pulls/1", repo="octo/widgets")
    assert len(server.state.requests) == 4  # the first try and max_retries more, then a clear error
    assert waits == [SERVER_BACKOFF, 2 * SERVER_BACKOFF, 4 * SERVER_BACKOFF]
    message = str(failed.value)
    assert "GET /repos/octo/widgets/pulls/1" in message and "RemoteProtocolError" in message
    assert TOKEN not in message
