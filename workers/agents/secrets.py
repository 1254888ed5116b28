"""The secrets an agent's run could echo, and its output with every spelling of them taken out.

``run_seat`` (``workers.agents.seat``) is the one door by which any agent's output enters the record:
whatever kind of agent ran, its report, stdout, stderr, transcript files and events pass through
``redact_run`` and ``redact_files`` there before a hook, a job or a store sees them. What counts as a
secret of an agent (``agent_secrets``):

- the value of every variable its entry passes through (``env_pass``) whose name looks secret
  (``SECRET_NAME_RE``: KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, ...) or that its entry lists in
  ``secrets = [...]``, when at least ``MIN_ENCODED_CHARS`` long;
- its configured key (``api_key_env``) and the forge tokens of the worker (``FORGE_TOKEN_VARS``);
- when such a value is the path of a file (a key file, ``GOOGLE_APPLICATION_CREDENTIALS=/keys/sa.json``),
  the fields of that file instead (``key_file_fields``): the path itself is not a secret.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

import structlog

from orchestrator.agent_keys import SECRET_NAME_RE
from orchestrator.redaction import MIN_ENCODED_CHARS, Redactor, key_file_fields
from orchestrator.spec import AgentSpec
from workers.agents.run import AgentRun

log = structlog.get_logger()

FORGE_TOKEN_VARS: tuple[str, ...] = ("GITHUB_TOKEN", "GITLAB_TOKEN")
KEY_FILE_MAX_BYTES = 256 * 1024  # a key file larger than this is not read (nor is it a key file)


def agent_secrets(spec: AgentSpec, env: Mapping[str, str]) -> list[str]:
    """The secrets ``spec``'s run may see in ``env`` (the worker's environment), see the module's doc."""
    passed = [n for n in spec.env_pass if SECRET_NAME_RE.search(n) or n in spec.secrets]
    listed = [n for n in spec.secrets if n not in passed]
    configured = [*([spec.api_key_env] if spec.api_key_env else []), *FORGE_TOKEN_VARS]
    found: list[str] = []
    for name in dict.fromkeys([*passed, *listed, *configured]):
        value = env.get(name)
        if not value:
            continue
        fields = key_file_secrets(value, env)
        if fields is not None:
            found.extend(fields)
        elif len(value) >= MIN_ENCODED_CHARS or name in configured:
            found.append(value)
    return found


def key_file_secrets(value: str, env: Mapping[str, str]) -> list[str] | None:
    """The secret fields of the file ``value`` names, or None when it names no readable regular file."""
    if value.startswith("~/") and env.get("HOME"):
        value = str(Path(env["HOME"]) / value[2:])
    if not value.startswith("/") or "\n" in value or "\0" in value:
        return None
    path = Path(value)
    try:
        if not path.is_file() or path.stat().st_size > KEY_FILE_MAX_BYTES:
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        log.warning("agent.key_file_unreadable", path=value, error=exc.strerror)
        return None
    return key_file_fields(text)


def redact_run(run: AgentRun, redactor: Redactor) -> AgentRun:
    """``run`` with every text an agent wrote redacted: its report, stdout, stderr and error."""
    proc = run.proc
    if proc.error:
        proc = dataclasses.replace(proc, error=redactor.redact(proc.error))
    commands = run.commands
    if commands is not None and commands.first_error:
        commands = dataclasses.replace(commands, first_error=redactor.redact(commands.first_error))
    return dataclasses.replace(
        run,
        proc=proc,
        report=redactor.redact(run.report),
        stdout=redactor.redact(run.stdout),
        stderr=redactor.redact(run.stderr),
        commands=commands,
    )


def redact_files(out_dir: Path, name: str, redactor: Redactor) -> list[Path]:
    """Redact, in place, every file of ``out_dir`` the run ``name`` wrote (``<name>.*``: its prompt,
    stdout, stderr, transcript, a checker's raw output); the files that changed."""
    changed: list[Path] = []
    if not redactor.secrets or not out_dir.is_dir():
        return changed
    for path in sorted(out_dir.glob(f"{glob_escape(name)}.*")):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        text = data.decode("utf-8", errors="surrogateescape")
        clean = redactor.redact(text)
        if clean == text:
            continue
        rewrite(path, clean.encode("utf-8", errors="surrogateescape"))
        changed.append(path)
    return changed


def glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def rewrite(path: Path, data: bytes) -> None:
    """Replace ``path``'s content with ``data`` at once (a reader sees the old or the new file), keeping
    its mode."""
    mode = path.stat().st_mode & 0o777
    tmp = path.with_name(f".{path.name}.{os.getpid()}.redact")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
