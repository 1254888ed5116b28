"""``jury web``: serve the console with uvicorn, on loopback unless a token guards it.

Every request but ``/healthz`` needs the console's token, on loopback too: any process of this machine
reaches loopback (a test run, a build script). ``--no-token`` opens the reads on loopback, said on stderr
and logged (``web.no_token``); actions need the token whatever is chosen."""

from __future__ import annotations

import errno
import ipaddress
import socket
from typing import Annotated

import typer

from jury_cli.context import DirOpt, err, out, settings_for
from orchestrator.errors import UsageError

DEFAULT_PORT = 3080


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def unspecified(host: str) -> bool:
    """Whether ``host`` is the address of every interface (0.0.0.0, ::): a bind address, not a place."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def where_to_open(host: str, port: int) -> str:
    """What ``jury web`` says to open when listening beyond loopback (with the operator's token, which it
    never echoes). A browser cannot open 0.0.0.0 or ::: on those it names this machine's loopback and its
    host name instead."""
    token = "with the console's token (--token / JURY_WEB_TOKEN)"
    if not unspecified(host):
        return f"open http://{url_host(host)}:{port}/ {token}"
    loopback = "[::1]" if ":" in host else "127.0.0.1"
    name = socket.gethostname()
    elsewhere = f", or http://{url_host(name)}:{port}/ from another" if name else ""
    return (
        f"listening on all addresses ({host}) port {port}: open http://{loopback}:{port}/ on this machine"
        f"{elsewhere}, {token}"
    )


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free port), so the URL printed is the real one."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"cannot listen on {host}: {exc}") from exc
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        taken = exc.errno == errno.EADDRINUSE
        hint = "choose --port" if taken else "choose --host: an address of this machine"
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc} ({hint})") from exc
    sock.listen(128)
    return sock


def web(
    host: Annotated[str, typer.Option(help="Address to listen on; beyond loopback it needs a token.")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to listen on (0: any free port).")
    ] = DEFAULT_PORT,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="JURY_WEB_TOKEN",
            show_envvar=True,
            help="The console's token (default: a new one).",
        ),
    ] = None,
    no_token: Annotated[
        bool,
        typer.Option(
            "--no-token",
            help="Let every process on this machine read the runs without the token (loopback only; "
            "actions still need it).",
        ),
    ] = False,
    dir: DirOpt = None,
) -> None:
    """Serve the console: runs, their timeline, findings and spend, live; the fleet; cancel and resume."""
    import structlog
    import uvicorn

    from jury_cli.backend import reading_store
    from jury_cli.web.app import create_app
    from jury_cli.web.auth import Guard, is_loopback, new_token

    loopback = is_loopback(host)
    if not loopback and not token:
        raise UsageError(
            f"listening on {host} (beyond this machine) needs a token: give --token or set JURY_WEB_TOKEN; "
            "every request will then need it"
        )
    if no_token and not loopback:
        raise UsageError(f"--no-token is for a console on loopback only, not {host}: drop --no-token")
    if token is not None and len(token) < 16:
        raise UsageError("the console's token must be at least 16 characters (--token / JURY_WEB_TOKEN)")
    settings = settings_for(dir)
    store = reading_store(settings)
    # Reads need the token on loopback too: every local process, a build, a script, reaches loopback.
    guard = Guard(token=token or new_token(), reads_need_token=not no_token)
    if no_token:
        structlog.get_logger().warning("web.no_token", host=host, port=port)
        err.print(
            "jury console: --no-token: every process on this machine can read every run without the token "
            "(actions still need it)",
            markup=False,
        )
    sock = listen(host, port)
    bound = sock.getsockname()[1]
    where = "the fleet's Redis" if settings.redis_url else f"the files under {settings.dir}"
    out.print(f"jury console: runs from {where}", markup=False)
    if token:  # the operator's own token is not echoed
        out.print(where_to_open(host, bound), markup=False)
    else:  # a new token: on loopback only (beyond it, one must be given)
        out.print(f"open http://{url_host(host)}:{bound}/?token={guard.token}", markup=False)
    app = create_app(settings, store, guard, loopback)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,  # an access log would print the token of ?token=
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=2,
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
