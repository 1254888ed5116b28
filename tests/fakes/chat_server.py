"""A real local OpenAI-compatible chat server with scripted replies, for http agent tests.

``ChatServer`` listens on 127.0.0.1 (port 0) in a thread and answers ``POST /chat/completions`` and
``POST /v1/chat/completions``. Each model has its own queue of scripted replies (``answer``,
``tool_call``, ``status``, ``slow``, ``malformed``); when a model's queue is empty its *brain* answers,
if it has one (``think``: a function of the recorded request, e.g. ``tests/fakes/scripted_models.py``),
else 500, so a test that runs out of script fails loudly. Every request is recorded (path, headers, JSON
body, arrival time) for assertions.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5}


@dataclass
class Reply:
    """One scripted HTTP reply; ``delay`` seconds pass before it is sent."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any  # the parsed JSON body, or the raw text when it is not JSON
    at: float = field(default_factory=time.monotonic)  # when it arrived (time.monotonic)

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None


Brain = Callable[[Recorded], Reply]  # answers a model's request from what it was sent


def _completion(message: dict[str, Any], usage: dict[str, Any] | None, extra: dict[str, Any]) -> Reply:
    data = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": DEFAULT_USAGE if usage is None else usage,
        **extra,
    }
    return Reply(body=json.dumps(data).encode(), headers={"Content-Type": "application/json"})


def answer(text: str, *, usage: dict[str, Any] | None = None, **extra: Any) -> Reply:
    """A final answer (no tool calls)."""
    return _completion({"role": "assistant", "content": text}, usage, extra)


def tool_call(
    name: str,
    args: dict[str, Any] | str,
    *,
    call_id: str = "call_1",
    content: str | None = None,
    usage: dict[str, Any] | None = None,
    **extra: Any,
) -> Reply:
    """An assistant turn asking for one tool call (``args`` as a dict, or a raw arguments string)."""
    arguments = args if isinstance(args, str) else json.dumps(args)
    message = {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }
    return _completion(message, usage, extra)


def status(code: int, *, retry_after: str | None = None, body: str = '{"error": "scripted"}') -> Reply:
    """An error status, with a ``Retry-After`` header when given."""
    headers = {"Content-Type": "application/json"}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return Reply(status=code, body=body.encode(), headers=headers)


def slow(seconds: float, then: Reply | None = None) -> Reply:
    """``then`` (default: an answer), sent only after ``seconds``."""
    reply = then if then is not None else answer("late")
    return Reply(status=reply.status, body=reply.body, headers=reply.headers, delay=seconds)


def malformed() -> Reply:
    """A 200 whose body is not JSON."""
    return Reply(body=b'{"choices": [', headers={"Content-Type": "application/json"})


class ChatServer:
    """The server; use as a context manager (``with ChatServer() as server``)."""

    def __init__(self) -> None:
        self.queues: dict[str, deque[Reply]] = defaultdict(deque)
        self.brains: dict[str, Brain] = {}
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = False  # server_close joins the handler threads
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="chat-server", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, model: str, *replies: Reply) -> None:
        """Queue ``replies`` for ``model``, answered in order."""
        with self.lock:
            self.queues[model].extend(replies)

    def think(self, model: str, brain: Brain) -> None:
        """Let ``brain`` answer ``model``'s requests once its scripted queue is empty."""
        with self.lock:
            self.brains[model] = brain

    def requests_for(self, model: str) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.model == model]

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def _next(self, model: str | None, request: Recorded) -> Reply:
        with self.lock:
            queue = self.queues.get(model or "")
            if queue:
                return queue.popleft()
            brain = self.brains.get(model or "")
        if brain is not None:
            try:
                return brain(request)
            except Exception as exc:  # a broken brain is a test bug: answer loudly, never hang
                return status(500, body=json.dumps({"error": f"brain failed: {type(exc).__name__}: {exc}"}))
        return status(500, body=json.dumps({"error": f"no scripted reply left for {model!r}"}))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: nothing idles at shutdown

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", errors="replace")
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw
                request = Recorded(self.path, dict(self.headers.items()), body)
                with server.lock:
                    server.requests.append(request)
                if self.path not in ("/chat/completions", "/v1/chat/completions"):
                    reply = status(404, body='{"error": "not found"}')
                else:
                    reply = server._next(body.get("model") if isinstance(body, dict) else None, request)
                if reply.delay and server.stopping.wait(reply.delay):
                    return
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler
