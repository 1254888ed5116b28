"""Running an http agent once: a tool loop over an OpenAI-compatible ``POST {base_url}/chat/completions``.

The model gets the role's rules, the prompt and the tools its role is offered (``tools.tools_for``); each
tool call goes through ``tools.call_tool``, which refuses what the role may not do. The loop ends when the
model answers without tool calls (that answer is the report), after ``spec.max_rounds`` turns, or when
the wall clock runs out. Requests are retried with backoff (429, 5xx, timeouts, connection errors,
malformed answers), then the next model of ``spec.fallback`` is tried. Every call reserves its projected
cost first (``reserve``) and reports its usage and cost.

A 429 whose Retry-After asks for more than ``defer_after`` seconds (a worker's task: a few seconds), or
that names no wait at all, is not slept in the worker's slot: the next model of ``spec.fallback`` is tried
at once, and when there is none the run ends with ``RateLimited`` (the call's reservation dropped), so the
task puts its action back with that countdown (or, without a Retry-After, its own back-off) and the slot
goes to other work. Without ``defer_after`` (a command run outside a worker) the wait is slept, capped at
``RETRY_AFTER_CAP`` (1, 2, 4 ... seconds without a Retry-After).

The API key is read from the environment variable the spec names and sent only in the Authorization
header. A model may still echo it — in its answers, its tool-call arguments, its error bodies — so it is
registered with ``orchestrator.logs.add_secret`` and ``_Session.redact`` (that registry's ``redact``)
guards the session's doors: every response body is redacted as it arrives, before it is parsed (so a
tool never receives the key: a judge cannot write it into the tree), every tool result as it comes
back, and every transcript line and event again as it leaves. Log lines are redacted by the log
renderer itself (``orchestrator.logs.configure``), whatever logged them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import structlog

from orchestrator.cleartext import key_in_clear
from orchestrator.domain import Role
from orchestrator.forge.limits import retry_after
from orchestrator.logs import add_secret, redact
from orchestrator.spec import AgentSpec, SandboxSettings
from workers.agents.chat_answer import (
    call_cost,
    json_object,
    message_text,
    project_cost,
    scrubbed,
    token_count,
    tool_arguments,
)
from workers.agents.run import AgentRun, RateLimited
from workers.agents.seat import CALL_DROPPED
from workers.agents.tools import call_tool, schemas_for
from workers.isolation.supervise import Interrupted, ProcResult

log = structlog.get_logger()

MAX_ATTEMPTS = 4  # per model
RETRY_AFTER_CAP = 30.0
BACKOFF_BASE = 1.0
DEFAULT_REQUEST_TIMEOUT = 300.0
TRANSCRIPT_TEXT_CAP = 4000

_RULES = {
    "reviewer": (
        "You are a code reviewer. You may read files, search, read git history with git_diff, git_log "
        "and git_show, and run the declared checks by name through the tools. You cannot write or edit "
        "files: write tools are refused."
    ),
    "reply": (
        "You reviewed this change earlier and are told what happened to your findings. You may read and "
        "run the declared checks to verify; you cannot write or edit files."
    ),
    "refuter": (
        "You give a second opinion: try to refute the claim with evidence from reading the code and "
        "running the declared checks. You cannot write or edit files. Uncertainty is not a refutation."
    ),
    "judge": (
        "You are the judge. Reproduce the finding before accepting it; fix it and add a regression test "
        "with write_file/edit_file; run the declared checks to verify."
    ),
}


class _Deferred(Exception):
    """The model asked to be called again in ``seconds``, longer than the session may sleep (None: a 429
    that named no wait)."""

    def __init__(self, seconds: float | None, note: str) -> None:
        super().__init__(note)
        self.seconds, self.note = seconds, note


class _LoopEnd(Exception):
    """The tool loop cannot go on (cancelled, out of time or budget, every model failed, out of rounds);
    ``reason`` becomes the run's error."""

    def __init__(self, reason: str, *, timed_out: bool = False, cancelled: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out
        self.cancelled = cancelled


@dataclass
class _Attempt:
    """One request's outcome: ``data`` when it answered, else why not and whether to retry."""

    data: dict[str, Any] | None = None
    error: str = ""
    status: int | None = None
    retry: bool = False
    retry_after: float | None = None  # what will be slept: the Retry-After, capped
    asked: float | None = None  # the Retry-After as the server said it, uncapped
    fatal: bool = False


def retry_after_seconds(
    value: str | None, *, now: datetime | None = None, cap: float | None = RETRY_AFTER_CAP
) -> float | None:
    """A ``Retry-After`` header in seconds (delta-seconds or an HTTP date), capped at ``cap``; None when
    absent. The reading is the forge clients' (one parser of the header); the cap is the model loop's."""
    if value is None:
        return None
    seconds = retry_after({"retry-after": value}, (now or datetime.now(UTC)).timestamp())
    if seconds is None or cap is None:
        return seconds
    return min(seconds, cap)


@dataclass
class _Session:
    spec: AgentSpec
    role: Role
    worktree: Path
    checks: dict[str, str]
    client: httpx.Client
    headers: dict[str, str]
    tool_env: dict[str, str]
    sandbox: SandboxSettings
    deadline: float
    transcript: Any  # an open text file
    reserve: Callable[[float], bool] | None
    on_event: Callable[[str, dict[str, Any]], None] | None
    sleep: Callable[[float], None]
    interrupted: Interrupted | None
    defer_after: float | None = None  # a longer Retry-After ends the run with RateLimited, unslept
    models: list[str] = field(default_factory=list)
    model_index: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cost: float | None = 0.0  # None once any call's cost is unknown
    answered: str | None = None  # the model that gave the last answer
    said: list[str] = field(default_factory=list)

    # --- records -------------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """``text`` without the key (or any other registered secret): see the module's docstring."""
        return redact(text)

    def record(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"t": kind, "ts": round(time.time(), 3), **fields}, default=str)
        self.transcript.write(self.redact(line) + "\n")
        self.transcript.flush()

    def emit(self, name: str, **fields: Any) -> None:
        self.record(name, **fields)
        if self.on_event is None:
            return
        clean = {k: self.redact(v) if isinstance(v, str) else v for k, v in fields.items()}
        try:
            self.on_event(name, clean)
        except Exception:
            log.exception("agent.http.on_event_failed", event=name)

    # --- time ----------------------------------------------------------------------------------

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def check_clock(self) -> None:
        if self.interrupted is not None and self.interrupted():
            raise _LoopEnd("cancelled", cancelled=True)
        if self.remaining() <= 0:
            raise _LoopEnd("timed out: the wall-clock limit ran out", timed_out=True)

    # --- one request ---------------------------------------------------------------------------

    def attempt(self, url: str, body: dict[str, Any]) -> _Attempt:
        per_request = min(self.spec.timeout or DEFAULT_REQUEST_TIMEOUT, self.remaining())
        if per_request <= 0:
            raise _LoopEnd("timed out: the wall-clock limit ran out", timed_out=True)
        started = time.monotonic()
        try:
            resp = self.client.post(url, json=body, headers=self.headers, timeout=per_request)
        except httpx.TimeoutException:
            return _Attempt(error=f"request timed out after {per_request:.1f}s", retry=True)
        except httpx.HTTPError as exc:  # connection refused or reset, protocol or decoding errors
            return _Attempt(error=f"connection error: {type(exc).__name__}: {exc}", retry=True)
        status = resp.status_code
        self.record(
            "response", model=body["model"], status=status, seconds=round(time.monotonic() - started, 3)
        )
        body_text = self.redact(resp.text)  # the door: nothing from the model gets past with the key
        snippet = body_text[:300]
        if status in (401, 403):
            return _Attempt(
                error=f"HTTP {status}: authentication refused: {snippet}", status=status, fatal=True
            )
        if status == 429 or status == 408 or status >= 500:
            asked = retry_after_seconds(resp.headers.get("retry-after"), cap=None)
            return _Attempt(
                error=f"HTTP {status}: {snippet}",
                status=status,
                retry=True,
                retry_after=None if asked is None else min(asked, RETRY_AFTER_CAP),
                asked=asked,
            )
        if status >= 400:  # the model or the request is not accepted: no retry, try the next model
            return _Attempt(error=f"HTTP {status}: {snippet}", status=status)
        from orchestrator import jsonsafe  # the model's answer is hostile input: bounded size and depth

        try:
            data = scrubbed(jsonsafe.loads(body_text))
        except (ValueError, RecursionError):
            return _Attempt(error="malformed JSON in the response", status=status, retry=True)
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return _Attempt(error=f"no choices in the response: {snippet}", status=status, retry=True)
        if not isinstance(choices[0].get("message"), dict):
            return _Attempt(error="the first choice has no message", status=status, retry=True)
        return _Attempt(data=data, status=status)

    def complete(
        self, url: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """One chat completion, with retries and fallback; the data of the answer that came back."""
        projection = project_cost(messages, tools, self.spec.price)
        if self.reserve is not None and not self.reserve(projection):
            raise _LoopEnd(f"budget: reservation of ${projection:.4f} refused; no call made")
        last = "no model to call"
        while self.model_index < len(self.models):
            model = self.models[self.model_index]
            body: dict[str, Any] = {"model": model, "messages": messages}
            if tools:
                body["tools"] = tools
                body["tool_choice"] = "auto"
            paused = False  # whether a 429 of this call was slept for already
            for attempt in range(1, MAX_ATTEMPTS + 1):
                self.check_clock()
                self.record("request", model=model, attempt=attempt, messages=len(messages))
                outcome = self.attempt(url, body)
                if outcome.data is not None:
                    self.account(model, outcome.data)
                    return outcome.data
                last = f"{model}: {outcome.error}"
                self.record("request.failed", model=model, attempt=attempt, error=outcome.error)
                if outcome.fatal:
                    raise _LoopEnd(last)
                if self.sent_back(model, outcome, paused):
                    break  # the next model may answer now
                if not outcome.retry or attempt == MAX_ATTEMPTS:
                    break
                wait = outcome.retry_after
                if wait is None:
                    wait = min(BACKOFF_BASE * 2 ** (attempt - 1), RETRY_AFTER_CAP)
                self.emit("http.retry", status=outcome.status, attempt=attempt, wait=wait, model=model)
                if wait >= self.remaining():
                    raise _LoopEnd(f"timed out waiting to retry ({last})", timed_out=True)
                self.sleep(wait)
                paused = paused or outcome.status == 429
            self.model_index += 1
            if self.model_index < len(self.models):
                self.emit("http.fallback", from_model=model, to_model=self.models[self.model_index])
        raise _LoopEnd(f"every model failed; last error: {last}")

    def sent_back(self, model: str, outcome: _Attempt, paused: bool) -> bool:
        """Whether a 429 sends the call away: it asks for a longer wait than this session may sleep, names
        none (no Retry-After: no telling how long the model needs, so no guess is slept in a worker's
        slot), or is the model's second refusal of this call (a storm of short waits is a storm: one short
        pause a call is all a worker's slot gives it). True when another model of the fallback list is to
        be tried at once; ``_Deferred`` when none is left (the reserved call is dropped, unmade); False when
        the wait is short enough to sleep here once, or the session sleeps every wait (no ``defer_after``)."""
        asked = outcome.asked
        if outcome.status != 429 or self.defer_after is None:
            return False
        if asked is not None and asked <= self.defer_after and not paused:
            return False
        self.emit("http.rate_limited", model=model, retry_after=asked)
        if self.model_index + 1 < len(self.models):
            return True
        self.emit(CALL_DROPPED, model=model, status=429)
        said = f"with Retry-After {asked:.0f}s" if asked is not None else "without Retry-After"
        raise _Deferred(asked, f"{model} answered 429 {said}")

    def account(self, model: str, data: dict[str, Any]) -> None:
        usage = json_object(data.get("usage"))
        prompt, completion = (
            token_count(usage.get("prompt_tokens")),
            token_count(usage.get("completion_tokens")),
        )
        cost = call_cost(data, self.spec.price)
        self.calls += 1
        self.answered = model
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cost = None if cost is None or self.cost is None else self.cost + cost
        self.emit("http.call", model=model, prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost)

    # --- the loop ------------------------------------------------------------------------------

    def run_tools(self, calls: list[Any], turn: int) -> list[dict[str, Any]]:
        results = []
        for i, call in enumerate(calls):
            call = json_object(call)
            fn = json_object(call.get("function"))
            call_id = str(call.get("id") or f"call_{turn}_{i}")
            tool = str(fn.get("name") or "")
            args = tool_arguments(fn.get("arguments"))
            result = call_tool(
                tool,
                args,
                role=self.role,
                worktree=self.worktree,
                checks=self.checks,
                env=self.tool_env,
                timeout=max(1.0, min(self.remaining(), 900.0)),
                sandbox=self.sandbox,
            )
            text = self.redact(result.text)  # a check could print what it should not have seen
            refused = self.redact(result.refused) if result.refused is not None else None
            self.record(
                "tool",
                tool=tool,
                args=args if isinstance(args, str) else json.dumps(args),
                ok=result.ok,
                refused=refused,
                text=text[:TRANSCRIPT_TEXT_CAP],
            )
            if refused is not None:
                self.emit("tool.refused", tool=tool, reason=refused, role=self.role)
            else:
                self.emit("tool.called", tool=tool, ok=result.ok)
            results.append({"role": "tool", "tool_call_id": call_id, "content": text})
        return results

    def loop(self, url: str, prompt: str) -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": _RULES.get(self.role, _RULES["reviewer"])},
            {"role": "user", "content": prompt},
        ]
        tools = schemas_for(self.role, self.checks)
        for turn in range(1, self.spec.max_rounds + 1):
            self.check_clock()
            data = self.complete(url, messages, tools)
            message = data["choices"][0]["message"]
            content = message_text(message.get("content"))
            calls = message.get("tool_calls") if isinstance(message.get("tool_calls"), list) else []
            self.record("assistant", turn=turn, content=content[:TRANSCRIPT_TEXT_CAP], tool_calls=len(calls))
            if content.strip():
                self.said.append(content)
            if not calls:
                return content
            assistant: dict[str, Any] = {
                "role": "assistant",
                "content": message.get("content"),
                "tool_calls": calls,
            }
            messages.append(assistant)
            messages.extend(self.run_tools(calls, turn))
        raise _LoopEnd(f"max_rounds ({self.spec.max_rounds}) reached without a final answer")


def _failed(
    spec: AgentSpec, stdout_path: Path, stderr_path: Path, error: str, started: float, url: str
) -> AgentRun:
    stdout_path.write_text("", encoding="utf-8")
    transcript = json.dumps({"t": "error", "error": error}) + "\n"
    stderr_path.write_text(transcript, encoding="utf-8")
    log.warning("agent.http.failed", agent=spec.name, error=error)
    proc = ProcResult(
        exit_code=1,
        timed_out=False,
        cancelled=False,
        seconds=time.monotonic() - started,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        stdout_bytes=0,
        stderr_bytes=len(transcript),
        error=error,
    )
    return AgentRun(
        proc=proc, report="", session_id=None, stdout="", stderr=transcript, argv=["POST", url], cost_usd=0.0
    )


def _headers(
    spec: AgentSpec, base_url: str, source: Mapping[str, str]
) -> tuple[dict[str, str], str | None] | str:
    """The request headers and the API key they carry (registered as a secret before the first request:
    from then on no file, event or log line holds it), or why the agent cannot be called."""
    leak = key_in_clear(base_url, spec.api_key_env, spec.insecure_http)  # a spec that skipped the config
    if leak:
        return leak
    headers = {"Content-Type": "application/json", "User-Agent": "jury"}
    secret: str | None = None
    if spec.api_key_env:
        secret = source.get(spec.api_key_env) or None
        if secret is None:
            return f"missing API key: environment variable {spec.api_key_env} is not set"
        headers["Authorization"] = f"Bearer {secret}"
        add_secret(secret)
    return headers, secret


@dataclass
class _Ending:
    """How the tool loop ended: a report, or an error (the report then what the model said), or deferred."""

    report: str
    error: str | None = None
    timed_out: bool = False
    cancelled: bool = False
    deferred: _Deferred | None = None


def _run_loop(session: _Session, url: str, prompt: str) -> _Ending:
    """The session's tool loop run to its end, the end recorded in the transcript."""
    try:
        return _Ending(session.loop(url, prompt))
    except _Deferred as back:
        session.record("deferred", seconds=back.seconds, note=session.redact(back.note))
        return _Ending("", deferred=back)
    except _LoopEnd as end:
        error = session.redact(end.reason)
        ending = _Ending("\n\n".join(session.said), error, end.timed_out, end.cancelled)
        session.record("error", error=error)
        return ending


def run_http_agent(
    spec: AgentSpec,
    *,
    role: Role,
    prompt: str,
    worktree: Path,
    out_dir: Path,
    name: str,
    timeout: float,
    checks: dict[str, str] | None = None,
    client: httpx.Client | None = None,
    env: Mapping[str, str] | None = None,
    reserve: Callable[[float], bool] | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    interrupted: Interrupted | None = None,
    sandbox: SandboxSettings | None = None,
    defer_after: float | None = None,
) -> AgentRun:
    """Run ``spec`` (an http agent) as ``role`` in ``worktree``; never raises for the model failing.

    Files: ``out_dir/<name>.prompt.md``, ``<name>.stdout.txt`` (the final answer) and ``<name>.stderr.txt``
    (a JSON-lines log of requests, tool calls and events, without secrets). ``proc.exit_code`` is 0 when
    the model gave a final answer, else 1 with ``proc.error`` saying why (``timed_out`` when the wall
    clock ran out). ``env`` (default: this process's) supplies the key named by ``spec.api_key_env``.
    ``cost_usd`` is the sum of the calls' costs, None when any call's cost is unknown, 0.0 when no call
    was made; ``model`` is the model that gave the last answer. The declared checks the model runs are
    confined as ``sandbox`` says (default: bubblewrap, no network). ``RateLimited`` when a 429 asks for
    longer than ``defer_after`` seconds, or names no wait, and no fallback model is left (see the module's
    docstring).
    """
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    out_dir = out_dir.resolve()
    (out_dir / f"{name}.prompt.md").write_text(prompt, encoding="utf-8")
    stdout_path, stderr_path = out_dir / f"{name}.stdout.txt", out_dir / f"{name}.stderr.txt"
    base_url = (spec.base_url or "").rstrip("/")
    url = f"{base_url}/chat/completions"
    source = os.environ if env is None else env
    if not spec.base_url or not spec.model:
        return _failed(spec, stdout_path, stderr_path, "http agent needs base_url and model", started, url)
    authorized = _headers(spec, base_url, source)
    if isinstance(authorized, str):
        return _failed(spec, stdout_path, stderr_path, authorized, started, url)
    headers, secret = authorized
    tool_env = {k: v for k, v in source.items() if k != spec.api_key_env and (not secret or v != secret)}
    own_client = client is None
    http = client if client is not None else httpx.Client()
    log.info("agent.http.start", agent=spec.name, role=role, name=name, model=spec.model, url=url)
    with stderr_path.open("w", encoding="utf-8") as transcript:
        session = _Session(
            spec=spec,
            role=role,
            worktree=worktree.resolve(),
            checks=dict(checks or {}),
            client=http,
            headers=headers,
            tool_env=tool_env,
            sandbox=sandbox or SandboxSettings(),
            deadline=started + timeout,
            transcript=transcript,
            reserve=reserve,
            on_event=on_event,
            sleep=sleep,
            interrupted=interrupted,
            defer_after=defer_after,
            models=[spec.model, *spec.fallback],
        )
        try:
            ending = _run_loop(session, url, prompt)
        finally:
            if own_client:
                http.close()
    if ending.deferred is not None:
        note = session.redact(ending.deferred.note)
        log.info(
            "agent.http.deferred", agent=spec.name, name=name, seconds=ending.deferred.seconds, note=note
        )
        raise RateLimited(ending.deferred.seconds, note)
    return _finished(session, ending, name=name, url=url, started=started, paths=(stdout_path, stderr_path))


def _finished(
    session: _Session, ending: _Ending, *, name: str, url: str, started: float, paths: tuple[Path, Path]
) -> AgentRun:
    """The run of a loop that ended (not deferred): its redacted report written, its usage logged."""
    spec, role, error = session.spec, session.role, ending.error
    timed_out, cancelled = ending.timed_out, ending.cancelled
    stdout_path, stderr_path = paths
    report = session.redact(ending.report)
    stdout_path.write_text(report, encoding="utf-8")
    stderr = stderr_path.read_text(encoding="utf-8")
    proc = ProcResult(
        exit_code=1 if error else 0,
        timed_out=timed_out,
        cancelled=cancelled,
        seconds=time.monotonic() - started,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        stdout_bytes=stdout_path.stat().st_size,
        stderr_bytes=stderr_path.stat().st_size,
        error=error,
    )
    usage = {
        "calls": session.calls,
        "prompt_tokens": session.prompt_tokens,
        "completion_tokens": session.completion_tokens,
    }
    log.info(
        "agent.http.done",
        agent=spec.name,
        role=role,
        name=name,
        model=session.answered,
        error=error,
        timed_out=timed_out,
        seconds=round(proc.seconds, 3),
        cost_usd=session.cost,
        **usage,
    )
    return AgentRun(
        proc=proc,
        report=report,
        session_id=None,
        stdout=report,
        stderr=stderr,
        argv=["POST", url],
        cost_usd=session.cost,
        model=session.answered,
        usage=usage,
    )
