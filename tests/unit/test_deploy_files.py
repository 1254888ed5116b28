"""The deployment files, checked without a Docker engine (none runs where Jury is tested).

``docker-compose.yml`` is parsed (PyYAML) and held to what docs/deployment.md promises: a private Redis
with AOF and a password, one worker service per queue covering every queue, the sandbox's security options, no
privilege, health checks, published ports on loopback only, and every ``jury`` command line in it parsed by
Jury's own CLI. The ``Dockerfile`` is read for what can be checked without building it: every ``COPY``
source exists and is not excluded by ``.dockerignore``, the entrypoint is ``jury`` under tini, the default
command parses, it installs git and bubblewrap, runs as a user, and builds the agents named in ``AGENTS``
with ``docker/install_agents.py``, which is run here (``--dry-run``) against the real catalog. Whether the
image builds and the sandbox starts in it was not tried (docs/deployment.md).
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main
import yaml

from jury_cli.app import app
from orchestrator.config import load_config
from workers.runtime.app import QUEUES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
JURY_SERVICES = {n: s for n, s in SERVICES.items() if str(s.get("image", "")).startswith("${JURY_IMAGE")}
WORKERS = {n: s for n, s in JURY_SERVICES.items() if s["command"][0] == "worker"}
CLI: click.Group = typer.main.get_command(app)  # type: ignore[assignment]


def parses(argv: list[str]) -> None:
    """``jury ARGV`` parses with Jury's CLI (options and values), without running anything."""
    name, *args = argv
    command = CLI.get_command(click.Context(CLI), name)  # the commands are loaded on demand (jury_cli.app)
    assert command is not None, f"jury {name}: no such command"
    command.make_context(name, list(args))


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_redis_is_private_durable_and_needs_a_password() -> None:
    redis = SERVICES["redis"]
    script = " ".join(redis["command"])
    assert "requirepass" in script and "appendonly yes" in script
    assert "ports" not in redis and redis["networks"] == ["fleet"]
    assert COMPOSE["networks"]["fleet"]["internal"] is True
    assert "REDISCLI_AUTH" in " ".join(redis["healthcheck"]["test"])  # the password never in argv


def test_one_worker_service_per_queue_and_every_queue_served() -> None:
    served = {}
    for name, svc in WORKERS.items():
        queues = option(svc["command"], "--queues")
        assert queues is not None, f"{name}: a worker without --queues takes every queue"
        assert queues.split(",") == [name], f"{name} consumes {queues}"
        served[name] = svc
    assert set(served) == set(QUEUES)
    assert [n for n, s in WORKERS.items() if "--beat" in s["command"]] == []  # every worker reaps in turn
    assert "deploy" not in WORKERS["control"] or "replicas" not in WORKERS["control"]["deploy"]
    assert "replicas" not in WORKERS["review"].get("deploy", {})  # scaled with --scale review=N


def test_the_sandbox_gets_what_bubblewrap_needs_and_no_privilege() -> None:
    for name, svc in {**WORKERS, "scheduler": SERVICES["scheduler"]}.items():  # verify firings: sandboxed
        assert set(svc["security_opt"]) == {
            "seccomp=unconfined",
            "apparmor=unconfined",
            "systempaths=unconfined",
        }, name
    for name, svc in SERVICES.items():
        assert not svc.get("privileged") and not svc.get("cap_add"), name


def test_every_service_has_a_health_check_and_publishes_on_loopback_only() -> None:
    for name, svc in SERVICES.items():
        assert svc.get("healthcheck", {}).get("test"), f"{name}: no health check"
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_the_console_health_check_passes_on_its_token_guarded_console_without_the_token(
    tmp_path: Path,
) -> None:
    """The web service listens beyond loopback, so every request needs its token, but for ``/healthz``:
    the health check asks that, holds no token (none in any argv: ``ps`` shows them) and passes."""
    import socket

    from jury_cli.web.app import create_app
    from jury_cli.web.auth import Guard
    from orchestrator.config import Settings
    from orchestrator.store.files import FileStore
    from tests.fakes import console_run as run

    web = SERVICES["web"]
    assert option(web["command"], "--host") == "0.0.0.0" and option(web["command"], "--port") == "3080"
    assert "--token" not in web["command"] and "JURY_WEB_TOKEN" in web["environment"]
    kind, python, flag, script = web["healthcheck"]["test"]
    assert (kind, python, flag) == ("CMD", "python", "-c")
    assert "http://127.0.0.1:3080/healthz" in script
    assert "token" not in script.lower() and "authorization" not in script.lower()

    def check(port: int) -> subprocess.CompletedProcess[str]:
        here = script.replace("127.0.0.1:3080", f"127.0.0.1:{port}")
        return subprocess.run([sys.executable, "-c", here], capture_output=True, text=True, timeout=60)

    guard = Guard(token="compose-token-0123456789", reads_need_token=True)
    console = create_app(Settings(dir=tmp_path, redis_url=None), FileStore(tmp_path), guard, loopback=False)
    with run.serve(console) as base:
        port = int(base.rsplit(":", 1)[1])
        passed = check(port)
        assert passed.returncode == 0, passed.stderr
    with socket.socket() as free:  # a port nothing listens on: a console that is down fails the check
        free.bind(("127.0.0.1", 0))
        down = free.getsockname()[1]
    assert check(down).returncode != 0


def test_every_jury_command_line_parses_and_reaches_the_one_redis() -> None:
    assert set(JURY_SERVICES) >= {*QUEUES, "scheduler", "web", "metrics"}
    for name, svc in JURY_SERVICES.items():
        parses(svc["command"])
        url = svc["environment"]["JURY_REDIS_URL"]
        assert url.startswith("redis://:${JURY_REDIS_PASSWORD") and url.endswith("@redis:6379/0"), name
    for svc in WORKERS.values():
        assert option(svc["command"], "--metrics-port") == "9100"
        assert option(svc["command"], "--metrics-host") == "0.0.0.0"  # scraped from another container
    assert "flower" in SERVICES and "celery" in SERVICES["flower"]["command"]


def test_the_default_operator_config_mounted_into_the_services_loads() -> None:
    mounts = [v for v in JURY_SERVICES["control"]["volumes"] if v.endswith(":/etc/jury/config.toml:ro")]
    (mount,) = mounts
    default = re.fullmatch(r"\$\{JURY_CONFIG_FILE:-(.+)\}:/etc/jury/config.toml:ro", mount)
    assert default is not None
    cfg = load_config(None, ROOT / default.group(1))
    assert cfg.jury.reviewers and cfg.jury.judge


# --- the Dockerfile -----------------------------------------------------------------------------------


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def ignored(path: str) -> bool:
    patterns = [
        p.strip()
        for p in (ROOT / ".dockerignore").read_text().splitlines()
        if p.strip() and not p.startswith("#")
    ]
    return any(fnmatch.fnmatch(path.rstrip("/"), p) or path.startswith(p.rstrip("/") + "/") for p in patterns)


def test_every_copy_source_exists_and_is_in_the_build_context() -> None:
    copies = [args for ins, args in instructions() if ins == "COPY" and not args.startswith("--from")]
    assert copies
    for args in copies:
        *sources, _dest = shlex.split(args)
        for src in sources:
            assert (ROOT / src).exists(), f"COPY {src}: no such file in the checkout"
            assert not ignored(src), f"COPY {src}: excluded by .dockerignore"


def test_the_entrypoint_is_jury_and_the_default_command_parses() -> None:
    found = dict(instructions())
    entry, cmd = json.loads(found["ENTRYPOINT"]), json.loads(found["CMD"])
    assert entry == ["tini", "--", "jury"]
    assert cmd[0] == "worker"
    parses(cmd)
    assert found["USER"] not in ("root", "0")
    run = " ".join(args for ins, args in instructions() if ins == "RUN")
    assert re.search(r"apt-get install .*\bgit\b.*\bbubblewrap\b.*\btini\b", run)
    assert "pip install --no-cache-dir ." in run
    assert "install_agents.py --catalog /opt/jury-build/agents ${AGENTS}" in run
    assert ("ARG", 'AGENTS=""') in instructions()


def test_the_default_command_serves_metrics_to_other_containers_as_the_docs_say() -> None:
    """A container's loopback is its own: a scraper in another container (or host) reaches the worker's
    metrics only on another address, so the image's default command binds 0.0.0.0, the port it exposes;
    and docs/deployment.md names that very command."""
    found = dict(instructions())
    cmd = json.loads(found["CMD"])
    assert option(cmd, "--metrics-host") == "0.0.0.0"
    assert option(cmd, "--metrics-port") == found["EXPOSE"] == "9100"
    page = " ".join((ROOT / "docs" / "deployment.md").read_text().split())
    assert f"by default `jury {' '.join(cmd)}`" in page


def install(*agents: str) -> subprocess.CompletedProcess[str]:
    script = ROOT / "docker" / "install_agents.py"
    return subprocess.run(
        [sys.executable, str(script), "--dry-run", *agents], capture_output=True, text=True, timeout=60
    )


def npm_agents() -> dict[str, str]:
    """agent -> npm package, from the catalog's install hints."""
    found = {}
    for path in sorted((ROOT / "config" / "agents").glob("*.toml")):
        hint = tomllib.loads(path.read_text())["agents"][path.stem].get("install", "")
        if hint.startswith("npm install -g "):
            found[path.stem] = hint.removeprefix("npm install -g ")
    return found


def test_install_agents_installs_the_catalogs_npm_packages_and_refuses_the_rest() -> None:
    agents = npm_agents()
    assert {"codex", "claude"} <= set(agents)
    r = install(*agents)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["npm", "install", "--global", "--no-audit", "--no-fund", *agents.values()]
    assert install().stdout == ""  # AGENTS="": nothing to install
    refused = install("codex", "cursor")
    assert refused.returncode != 0 and "cursor's install hint is not an npm package" in refused.stderr
    unknown = install("nope")
    assert unknown.returncode != 0 and "no agent 'nope' in the catalog" in unknown.stderr


@pytest.mark.parametrize("bad", ["../etc/passwd", "Codex", "-rf"])
def test_install_agents_takes_only_agent_names(bad: str) -> None:
    r = install("--", bad) if bad.startswith("-") else install(bad)
    assert r.returncode != 0 and "is not an agent name" in r.stderr
