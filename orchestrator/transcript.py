"""What an agent's own transcript says about the commands it ran, and codex's ``--json`` events.

Why: an agent whose every command failed (codex with its sandbox helpers missing: every command dies with
``bwrap: execvp codex-linux-sandbox: No such file or directory``) saw nothing of the code, yet still
answers, and "NO NEW FINDINGS" from it would count as a clean review. Where the agent's output reports
its commands, this module counts them, so such a seat can be refused as a vote for convergence.

Sources, each read from text only (no I/O here; the caller reads the files):

- codex ``exec --json`` events on stdout: ``command_execution`` items with ``exit_code`` and ``status``;
- codex's session rollout (``$CODEX_HOME/sessions/.../rollout-*-<thread>.jsonl``): the ``function_call``
  and ``function_call_output`` items the model exchanged. codex 0.171 reports a command its sandbox could
  not start *only* there (no event on stdout, nothing on stderr), so it is the better source when found;
- claude ``--output-format stream-json``: ``tool_use`` blocks and their ``tool_result`` (``is_error``);
- Jury's own HTTP tool loop (its transcript on stderr): ``{"t": "tool", "ok": ..., "refused": ...}``.

Every source is agent output, so hostile input: a malformed or deeply nested line is skipped, never a
crash (``RecursionError`` included), and nothing here trusts a field's type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator import jsonsafe
from orchestrator.agent_kinds import AGENT_KINDS
from orchestrator.codex_json import json_lines
from orchestrator.registry import Registry

ERROR_CHARS = 300
# codex's tools that run a shell command (unified exec, the classic shell tool, its newer spelling)
CODEX_SHELL_TOOLS = frozenset({"exec_command", "shell", "shell_command", "container.exec", "local_shell"})
_EXIT_RES = (
    re.compile(r"^Process exited with code (-?\d+)\s*$", re.M),  # exec_command (unified exec)
    re.compile(r"^Exit code: (-?\d+)\s*$", re.M),  # the shell tool's text format
)
_RUNNING_RE = re.compile(r"^Process running with session ID", re.M)
_THREAD_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z-]{7,63}$")  # also keeps glob characters out of a path


@dataclass(frozen=True)
class Commands:
    """The commands one agent run asked for: how many, how many failed (or never could run), the first
    failure's message, and where that was read (``source``)."""

    run: int = 0
    failed: int = 0
    first_error: str | None = None
    source: str = ""

    @property
    def broken(self) -> bool:
        """Every command it tried failed: it saw nothing of the code through them."""
        return self.run > 0 and self.failed >= self.run


def broken_reason(commands: Commands | None, agent: str) -> str | None:
    """Why a run cannot vouch for anything (every command failed), or None when it could look."""
    if commands is None or not commands.broken:
        return None
    err = commands.first_error or "(no error text)"
    return f"every command {agent} ran failed ({commands.failed} of {commands.run}): {err}"


# --- reading JSON lines ---------------------------------------------------------------------------


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _first_line(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line[:ERROR_CHARS]
    return ""


class _Tally:
    """Commands counted in the order they were asked for, keyed by their id."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.results: dict[str, str | None] = {}  # id -> None (ok) or the failure; absent: no result yet
        self.order: list[str] = []
        self.seen: set[str] = set()

    def asked(self, key: str) -> None:
        if key not in self.seen:
            self.seen.add(key)
            self.order.append(key)

    def ok(self, key: str) -> None:
        self.asked(key)
        self.results[key] = None

    def fail(self, key: str, error: str) -> None:
        self.asked(key)
        self.results[key] = error or "failed (no output)"

    def done(self) -> Commands | None:
        if not self.order:
            return None
        errors = [
            self.results[k] if k in self.results else "asked for, but no result came back" for k in self.order
        ]
        failures = [e for e in errors if e is not None]
        return Commands(
            run=len(self.order),
            failed=len(failures),
            first_error=failures[0] if failures else None,
            source=self.source,
        )


# --- codex --------------------------------------------------------------------------------------


def codex_events(stdout: str) -> Commands | None:
    """The ``command_execution`` items of codex ``exec --json``; None when it reports no command."""
    tally = _Tally("codex --json events")
    for n, rec in enumerate(json_lines(stdout)):
        item = _obj(rec.get("item"))
        if item.get("type") != "command_execution":
            continue
        key = str(item.get("id") or f"line-{n}")
        if rec.get("type") == "item.started":
            tally.asked(key)
            continue
        if rec.get("type") != "item.completed":
            continue
        code, status = _int(item.get("exit_code")), item.get("status")
        if code == 0 and status in (None, "completed"):
            tally.ok(key)
        else:
            why = _first_line(item.get("aggregated_output")) or (
                f"exit code {code}" if code is not None else f"status {status}"
            )
            tally.fail(key, why)
    return tally.done()


def _shell_output(output: Any) -> tuple[int | None, str, bool]:
    """(exit code, the first line of what the command printed, still running) of a shell tool's output."""
    text = output if isinstance(output, str) else ""
    if isinstance(output, dict | list):  # content items, or the old {"output": ..., "metadata": ...}
        text = json.dumps(output)
    if text.startswith("{"):
        try:
            data = _obj(jsonsafe.loads(text))
        except (ValueError, RecursionError):
            data = {}
        if data:
            code = _int(_obj(data.get("metadata")).get("exit_code"))
            return code, _first_line(data.get("output")), False
    code = None
    for rx in _EXIT_RES:
        if m := rx.search(text):
            code = int(m.group(1))
            break
    printed = text.split("\nOutput:\n", 1)[1] if "\nOutput:\n" in text else text
    return code, _first_line(printed), bool(_RUNNING_RE.search(text))


def codex_rollout(text: str) -> Commands | None:
    """The shell commands of the last turn in a codex session rollout (JSON lines), matched to their
    outputs by ``call_id``; None when that turn ran none. A command without an exit code that is not
    still running (codex could not start it) counts as failed."""
    records = list(json_lines(text))
    start = 0
    for i, rec in enumerate(records):
        if rec.get("type") == "event_msg" and _obj(rec.get("payload")).get("type") == "task_started":
            start = i  # a resumed session appends its turns: only the last one is this run's
    tally = _Tally("codex session rollout")
    for n, rec in enumerate(records[start:]):
        if rec.get("type") != "response_item":
            continue
        item = _obj(rec.get("payload"))
        kind, key = item.get("type"), str(item.get("call_id") or f"line-{n}")
        if kind in ("function_call", "custom_tool_call") and item.get("name") in CODEX_SHELL_TOOLS:
            tally.asked(key)
        elif kind == "local_shell_call":
            tally.asked(key)
        elif kind in ("function_call_output", "custom_tool_call_output") and key in tally.seen:
            code, printed, running = _shell_output(item.get("output"))
            if code == 0 or (code is None and running):
                tally.ok(key)
            else:
                tally.fail(key, printed or (f"exit code {code}" if code is not None else "could not run"))
    return tally.done()


def codex_thread(stdout: str) -> str | None:
    """The session (thread) id of codex ``exec --json``: its ``thread.started`` event. Only an id of
    letters, digits and dashes is taken (it becomes part of a file name)."""
    for rec in json_lines(stdout):
        if rec.get("type") == "thread.started":
            thread = rec.get("thread_id")
            if isinstance(thread, str) and _THREAD_RE.match(thread):
                return thread
    return None


def codex_failure(stdout: str) -> str | None:
    """The message of a ``turn.failed`` or top-level ``error`` event (why codex gave up), if any."""
    last = None
    for rec in json_lines(stdout):
        if rec.get("type") == "turn.failed":
            last = _first_line(_obj(rec.get("error")).get("message")) or "turn failed"
        elif rec.get("type") == "error":
            last = _first_line(rec.get("message")) or "error"
    return last


# --- claude stream-json ---------------------------------------------------------------------------


def _content(value: Any) -> list[dict[str, Any]]:
    return [b for b in value if isinstance(b, dict)] if isinstance(value, list) else []


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return _first_line(content)
    for block in _content(content):
        if isinstance(block.get("text"), str) and (line := _first_line(block["text"])):
            return line
    return ""


def stream_json(stdout: str) -> Commands | None:
    """The tool calls of claude ``--output-format stream-json``: each ``tool_use`` and the ``tool_result``
    answering it (``is_error`` marks a failure, a use with no result counts as failed)."""
    tally = _Tally("stream-json tool calls")
    for n, rec in enumerate(json_lines(stdout)):
        message = _obj(rec.get("message"))
        for i, block in enumerate(_content(message.get("content"))):
            if block.get("type") == "tool_use":
                tally.asked(str(block.get("id") or f"line-{n}-{i}"))
            elif block.get("type") == "tool_result":
                key = str(block.get("tool_use_id") or "")
                if key not in tally.seen:
                    continue
                if block.get("is_error") is True:
                    tally.fail(key, _result_text(block.get("content")))
                else:
                    tally.ok(key)
    return tally.done()


# --- Jury's HTTP tool loop ---------------------------------------------------------------------------


def http_tools(transcript: str) -> Commands | None:
    """The tool calls in Jury's HTTP tool-loop transcript: refused or not ``ok`` is a failure."""
    tally = _Tally("http tool calls")
    for n, rec in enumerate(json_lines(transcript)):
        if rec.get("t") != "tool":
            continue
        key = f"call-{n}"
        refused = rec.get("refused")
        if refused:
            tally.fail(key, f"refused: {_first_line(refused)}")
        elif rec.get("ok") is True:
            tally.ok(key)
        else:
            tally.fail(key, _first_line(rec.get("text")))
    return tally.done()


def commands_in_report(report: str, stdout: str, rollout: str | None = None) -> Commands | None:
    """What an agent's report format says of its commands (``orchestrator.agent_kinds`` picks the
    reader per kind); None for a format that does not report commands.

    For codex, a rollout that reports commands wins over the stdout events (it also has the commands
    its sandbox could not start)."""
    if report == "codex-json":
        return (codex_rollout(rollout) if rollout else None) or codex_events(stdout)
    if report == "stream-json":
        return stream_json(stdout)
    return None


Reader = Callable[[str, str, str, "str | None"], "Commands | None"]
"""A transcript reader: ``(report format, stdout, stderr, rollout)`` -> the commands the run asked for."""

# The readers an agent kind's descriptor may name (``commands_in``); a new kind with a transcript of its
# own registers its reader here.
READERS: Registry[Reader] = Registry("transcript reader")
READERS.register(
    "report", lambda report, stdout, stderr, rollout: commands_in_report(report, stdout, rollout)
)
READERS.register("tool-loop", lambda report, stdout, stderr, rollout: http_tools(stderr))


def commands_of(
    kind: str, report: str, stdout: str, stderr: str, rollout: str | None = None
) -> Commands | None:
    """What the run's transcript says of its commands, per the agent's kind (its descriptor names the
    reader) and report format; None when it says nothing (a format that does not report commands, or no
    command asked for).

    For codex, a rollout that reports commands wins over the stdout events (it also has the commands
    its sandbox could not start)."""
    try:
        return READERS[AGENT_KINDS[kind].commands_in](report, stdout, stderr, rollout)
    except RecursionError:  # belt and braces: a pathological transcript is bad input, never a crash
        return None
