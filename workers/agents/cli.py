"""Running a CLI agent (codex, claude, ...) once: expand its argv template, supervise it, read its answer."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import structlog

from orchestrator.codex_json import codex_usage
from orchestrator.domain import Role
from orchestrator.parse import extract_report, find_session
from orchestrator.spec import AgentSpec, SandboxSettings
from orchestrator.transcript import codex_thread, commands_of
from workers.agents.run import AgentRun
from workers.isolation.egress import egress_proxy
from workers.isolation.sandbox import Jail, git_dirs_of, jail_env, program_visible
from workers.isolation.supervise import Interrupted, ProcResult, run_supervised

log = structlog.get_logger()

_PLACEHOLDER_RE = re.compile(r"\{(prompt|prompt_file|worktree|session|model)\}")
MODEL_ARGS = "{model_args}"
ROLLOUT_MAX_BYTES = 32 * 1024 * 1024  # the tail of a codex session file that is read (its last turn)


def _expand_one(element: str, values: Mapping[str, str | None]) -> str:
    def sub(match: re.Match[str]) -> str:
        key = match.group(1)
        value = values[key]
        if value is None:
            raise ValueError(f"argv element {element!r} needs {{{key}}} but none is set")
        return value

    return _PLACEHOLDER_RE.sub(sub, element)


def expand_argv(
    template: list[str],
    *,
    prompt: str,
    prompt_file: Path,
    worktree: Path,
    session: str | None,
    model: str | None,
    model_args: list[str],
) -> list[str]:
    """The argv with placeholders filled in (one pass: substituted text is never expanded again).

    ``{prompt} {prompt_file} {worktree} {session} {model}`` may sit anywhere inside an element; an
    element exactly ``{model_args}`` becomes the expanded ``model_args`` when a model is set, else
    nothing. ValueError when ``{session}`` or ``{model}`` is needed but None, or ``{model_args}`` is
    not a whole element. Unknown ``{...}`` text is left alone.
    """
    values: dict[str, str | None] = {
        "prompt": prompt,
        "prompt_file": str(prompt_file),
        "worktree": str(worktree),
        "session": session,
        "model": model,
    }
    out: list[str] = []
    for element in template:
        if element == MODEL_ARGS:
            if model:
                out.extend(_expand_one(arg, values) for arg in model_args)
            continue
        if MODEL_ARGS in element:
            raise ValueError(f"{MODEL_ARGS} must be a whole argv element, got {element!r}")
        out.append(_expand_one(element, values))
    return out


def argv_for(spec: AgentSpec, role: Role, *, resume: bool) -> list[str]:
    """The argv template for ``role``: reviewer and refuter -> argv (read-only); judge -> judge_argv;
    reply -> resume_argv if ``resume`` and the agent has one, else argv. ValueError when it cannot judge."""
    if role in ("reviewer", "refuter"):
        return list(spec.argv)
    if role == "judge":
        if spec.judge_argv is None:
            raise ValueError(f"agent {spec.name} has no judge_argv")
        return list(spec.judge_argv)
    if role == "reply":
        if resume and spec.resume_argv is not None:
            return list(spec.resume_argv)
        return list(spec.argv)
    raise ValueError(f"unknown role: {role!r}")


def codex_rollout_text(env: Mapping[str, str], thread: str | None) -> str | None:
    """The tail of codex's session file for ``thread`` (under ``$CODEX_HOME``, else ``~/.codex``, of the
    environment codex ran with), or None when there is none. It is the only place codex 0.171 reports
    the commands its own sandbox could not start."""
    base = env.get("CODEX_HOME") or (str(Path(env["HOME"]) / ".codex") if env.get("HOME") else None)
    if not base or not thread:
        return None
    try:
        found = sorted(p for p in Path(base).glob(f"sessions/*/*/*/rollout-*-{thread}.jsonl") if p.is_file())
        if not found:
            return None
        with found[-1].open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - ROLLOUT_MAX_BYTES))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError as exc:
        log.warning("agent.cli.rollout_unreadable", thread=thread, error=str(exc))
        return None
    return text.split("\n", 1)[-1] if size > ROLLOUT_MAX_BYTES else text  # drop a torn first line


@contextmanager
def confined_network(
    spec: AgentSpec, jail: Jail, argv: list[str], worktree: Path, base: Mapping[str, str]
) -> Iterator[tuple[Jail, list[str]]]:
    """The jail and argv an agent runs with: confined, in its own network namespace whose only way out is
    an egress proxy allowing the entry's ``egress`` (``workers.isolation.egress``), running for the length of
    the block, the agent started by the in-sandbox forwarder. Unconfined, or a program the sandbox cannot
    run (``run_supervised`` says so, as it does for any jail), as they are."""
    if not jail.confined or not argv or not program_visible(jail, argv[0], worktree, base):
        yield jail, argv
        return
    with egress_proxy(spec.name, spec.egress) as egress:
        yield replace(jail, egress=egress.mounts), egress.wrap(argv)


def _agent_jail(
    spec: AgentSpec, role: Role, worktree: Path, prompt_file: Path, sandbox: SandboxSettings | None
) -> Jail:
    """The agent's jail: no network but the entry's ``egress`` (through Jury's proxy, ``confined_network``);
    no rlimits (agents are big programs); a reviewer's worktree is read-only in the kernel's eyes, the
    judge's writable; of HOME only the entry's state_dirs."""
    return Jail(
        worktree=worktree,
        settings=sandbox or SandboxSettings(),
        writable=role == "judge",
        network=True,  # only where nothing is confined ([sandbox] mode = "none"): the host's network
        git_dirs=git_dirs_of(worktree),
        state_dirs=tuple(spec.state_dirs),
        ro_paths=(prompt_file,),
        env=spec.env,
        env_pass=tuple(spec.env_pass),
        limits=False,
        nested=True,
    )


def run_cli_agent(
    spec: AgentSpec,
    *,
    role: Role,
    prompt: str,
    worktree: Path,
    out_dir: Path,
    name: str,
    session: str | None = None,
    resume: bool = False,
    timeout: float,
    grace: float = 5.0,
    tick_every: float = 30.0,
    on_tick: Callable[[float, float], None] | None = None,
    interrupted: Interrupted | None = None,
    max_output: int | None = None,
    base_env: Mapping[str, str] | None = None,
    sandbox: SandboxSettings | None = None,
) -> AgentRun:
    """Run ``spec`` as ``role`` in ``worktree``; the prompt and outputs go to ``out_dir/<name>.*``.

    Files: ``<name>.prompt.md``, ``<name>.stdout.txt``, ``<name>.stderr.txt``.

    A fresh uuid4 session is made when the agent chooses its own (``new_session``) and none is given.
    The agent runs in the sandbox (``sandbox``, default bubblewrap; see ``workers.isolation.sandbox``) with
    the allow-listed environment drawn from ``base_env`` (default: this process's), the agent's ``env`` and
    the values of its ``env_pass``.
    Never raises for the agent failing (see ``proc``); ValueError for an unusable argv template.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    out_dir = out_dir.resolve()
    worktree = worktree.resolve()
    prompt_file = out_dir / f"{name}.prompt.md"
    prompt_file.write_text(prompt, encoding="utf-8")
    if spec.new_session and session is None:
        session = str(uuid.uuid4())
    argv = expand_argv(
        argv_for(spec, role, resume=resume),
        prompt=prompt,
        prompt_file=prompt_file,
        worktree=worktree,
        session=session,
        model=spec.model,
        model_args=spec.model_args,
    )
    base = os.environ if base_env is None else base_env
    jail = _agent_jail(spec, role, worktree, prompt_file, sandbox)
    env = jail_env(jail, base)  # what the agent sees (HOME and state dirs keep their host paths)
    stdout_path = out_dir / f"{name}.stdout.txt"
    stderr_path = out_dir / f"{name}.stderr.txt"
    log.info("agent.cli.start", agent=spec.name, role=role, name=name, resume=resume, session=session)
    with confined_network(spec, jail, argv, worktree, base) as (run_jail, run_argv):
        proc = run_supervised(
            run_argv,
            cwd=worktree,
            env=dict(base),
            stdout_path=stdout_path,
            stderr_path=stderr_path,
            timeout=timeout,
            grace=grace,
            tick_every=tick_every,
            on_tick=on_tick,
            interrupted=interrupted,
            max_output=max_output,
            jail=run_jail,
        )
    return _agent_run(spec, role, name, proc, argv=argv, env=env, session=session, jail=jail)


def _agent_run(
    spec: AgentSpec,
    role: Role,
    name: str,
    proc: ProcResult,
    *,
    argv: list[str],
    env: Mapping[str, str],
    session: str | None,
    jail: Jail,
) -> AgentRun:
    """What the agent's run came to, read from its output files: its report, its session, the commands it
    ran (``env``: what the agent saw, where a codex rollout lies), logged."""
    stdout_path, stderr_path = proc.stdout_path, proc.stderr_path
    stdout = stdout_path.read_bytes().decode("utf-8", errors="replace")
    stderr = stderr_path.read_bytes().decode("utf-8", errors="replace")
    report = extract_report(stdout, stderr, spec.report)
    thread = codex_thread(stdout) if spec.report == "codex-json" else None
    commands = commands_of(spec.kind, spec.report, stdout, stderr, codex_rollout_text(env, thread))
    session_id = thread or find_session(spec.session_from, stdout, stderr) or session
    log.info(
        "agent.cli.done",
        agent=spec.name,
        role=role,
        name=name,
        exit_code=proc.exit_code,
        timed_out=proc.timed_out,
        cancelled=proc.cancelled,
        error=proc.error,
        seconds=round(proc.seconds, 3),
        report_chars=len(report),
        session=session_id,
        commands_run=commands.run if commands else None,
        commands_failed=commands.failed if commands else None,
    )
    # A CLI does not say which model answered: the configured one is the best knowledge there is.
    return AgentRun(
        proc=proc,
        report=report,
        session_id=session_id,
        stdout=stdout,
        stderr=stderr,
        argv=argv,
        model=spec.model,
        usage=codex_usage(stdout) if spec.report == "codex-json" else {},
        commands=commands,
        tree_untouched=jail.tree_read_only,
    )
