"""A real local Responses-API server with a scripted model, for tests that drive the real codex CLI.

codex reaches its model through ``POST {base_url}/responses`` streamed as server-sent events; this server
answers on ``/v1/responses`` and ``/responses`` from 127.0.0.1 (port 0) in a thread. A *brain* (a function
of the recorded request) chooses each answer as a list of events; ``run_then_answer`` is the usual one: it
asks codex to run one shell command through its own tool, then, once the command's output comes back,
gives the final answer. Every request is recorded (path, headers, JSON body) so a test can see exactly
what codex sent, including what its command printed.

Event shapes are what codex 0.171 parses: ``response.created``, ``response.output_item.done`` with a
``function_call`` item (name, call_id, JSON ``arguments``) or an assistant ``message`` item, then
``response.completed`` with the response id and its usage.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Event = dict[str, Any]


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any  # the parsed JSON body, or the raw text when it is not JSON

    @property
    def items(self) -> list[dict[str, Any]]:
        """The request's ``input`` items (the conversation so far, as codex sends it)."""
        value = self.body.get("input") if isinstance(self.body, dict) else None
        return [i for i in value if isinstance(i, dict)] if isinstance(value, list) else []

    @property
    def tool_names(self) -> list[str]:
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        if not isinstance(tools, list):
            return []
        return [str(t.get("name")) for t in tools if isinstance(t, dict) and t.get("name")]

    def outputs(self) -> list[str]:
        """The outputs of the tool calls codex sends back in this turn (since the last user message):
        what the model sees of its commands. A resumed session also sends the earlier turns."""
        items = self.items
        users = [
            i for i, item in enumerate(items) if item.get("type") == "message" and item.get("role") == "user"
        ]
        out = []
        for item in items[users[-1] + 1 if users else 0 :]:
            if item.get("type") in ("function_call_output", "custom_tool_call_output"):
                value = item.get("output")
                out.append(value if isinstance(value, str) else json.dumps(value))
        return out


Brain = Callable[[Recorded, int], list[Event]]  # (request, its index among all requests) -> events


def created(rid: str) -> Event:
    return {"type": "response.created", "response": {"id": rid}}


def completed(rid: str) -> Event:
    usage = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 120,
    }
    return {"type": "response.completed", "response": {"id": rid, "usage": usage}}


def function_call(name: str, arguments: dict[str, Any], call_id: str) -> Event:
    item = {"type": "function_call", "name": name, "arguments": json.dumps(arguments), "call_id": call_id}
    return {"type": "response.output_item.done", "item": item}


def message(text: str) -> Event:
    item = {
        "type": "message",
        "role": "assistant",
        "id": "msg-1",
        "content": [{"type": "output_text", "text": text}],
    }
    return {"type": "response.output_item.done", "item": item}


def shell_call(request: Recorded, command: str, call_id: str) -> Event:
    """Ask codex to run ``command`` with whichever shell tool it offered in this request."""
    names = request.tool_names
    if "exec_command" in names:
        return function_call("exec_command", {"cmd": command}, call_id)
    if "shell_command" in names:
        return function_call("shell_command", {"command": command}, call_id)
    return function_call("shell", {"command": ["bash", "-lc", command]}, call_id)


def run_then_answer(commands: list[str], answer: str | Callable[[list[str]], str]) -> Brain:
    """A brain that asks for ``commands`` one by one, then answers ``answer`` (or ``answer(outputs)``,
    given what every command returned)."""

    def think(request: Recorded, index: int) -> list[Event]:
        rid = f"resp-{index}"
        outputs = request.outputs()
        if len(outputs) < len(commands):
            call = shell_call(request, commands[len(outputs)], f"call-{len(outputs) + 1}")
            return [created(rid), call, completed(rid)]
        text = answer if isinstance(answer, str) else answer(outputs)
        return [created(rid), message(text), completed(rid)]

    return think


class ResponsesServer:
    """The server; use as a context manager (``with ResponsesServer(brain) as server``)."""

    def __init__(self, brain: Brain) -> None:
        self.brain = brain
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = False  # server_close joins the handler threads
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="responses", daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL codex's provider points at (it appends ``/responses``)."""
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def model_requests(self) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.path.rstrip("/").endswith("/responses")]

    def __enter__(self) -> ResponsesServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: nothing idles at shutdown

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:  # model listings and the like: nothing here
                with server.lock:
                    server.requests.append(Recorded(self.path, dict(self.headers.items()), None))
                self._send(404, b'{"error": "not found"}', "application/json")

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
                    index = sum(1 for r in server.requests if r.path.rstrip("/").endswith("/responses")) - 1
                if not self.path.rstrip("/").endswith("/responses"):
                    return self._send(404, b'{"error": "not found"}', "application/json")
                try:
                    events = server.brain(request, index)
                except Exception as exc:  # a broken brain is a test bug: answer loudly, never hang
                    error = json.dumps({"error": f"brain failed: {type(exc).__name__}: {exc}"})
                    return self._send(500, error.encode(), "application/json")
                stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
                self._send(200, stream.encode(), "text/event-stream")

        return Handler


def write_codex_home(home: Path, base_url: str, *, model: str = "jury-test-model") -> Path:
    """A ``CODEX_HOME`` whose ``config.toml`` sends every model call to ``base_url`` (this server), with
    the key read from ``OPENAI_API_KEY``, no retries and nothing else reached over the network."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'model = "{model}"\n'
        'model_provider = "jurytest"\n'
        "\n"
        "[model_providers.jurytest]\n"
        'name = "jury test"\n'
        f'base_url = "{base_url}"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n",
        encoding="utf-8",
    )
    return home
