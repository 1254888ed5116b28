"""``jury metrics``: the fleet's Prometheus metrics, read from its Redis (``workers.fleet.metrics``)."""

from __future__ import annotations

import sys
import threading
from typing import Annotated

import typer

from jury_cli.context import DirOpt, err, settings_for
from orchestrator.errors import UsageError


def metrics(
    port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help="Serve them on http://HOST:PORT/metrics until interrupted, instead of printing.",
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="The address to serve on, with --port.")] = "127.0.0.1",
    dir: DirOpt = None,
) -> None:
    """The fleet's metrics in Prometheus' text format: runs by state, queue depths, tasks in flight and
    spend, read from JURY_REDIS_URL (spend and run counts as `jury show` computes them)."""
    settings = settings_for(dir)
    if not settings.redis_url:
        raise UsageError(
            "set JURY_REDIS_URL to the fleet's Redis (e.g. redis://host:6379/0) to read its metrics"
        )
    from orchestrator.store.redis import from_url
    from workers.fleet.metrics import exposition, fleet_registry, serve
    from workers.runtime.app import celery_url

    store = from_url(celery_url(settings.redis_url))
    registry = fleet_registry(store)
    if port is None:
        text = exposition(registry)
        sys.stdout.write(text)
        if "jury_fleet_up 1.0" not in text:
            err.print("jury metrics: could not read the fleet's Redis (see jury_fleet_up)", highlight=False)
            raise typer.Exit(1)
        return
    try:
        bound = serve(port, registry, addr=host)
    except OSError as exc:
        raise UsageError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc
    err.print(f"serving the fleet's metrics on http://{host}:{bound}/metrics", markup=False, highlight=False)
    threading.Event().wait()  # the server runs in a daemon thread; Ctrl-C ends the command
