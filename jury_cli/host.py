"""This machine: ``jury agents`` (which agent CLIs are installed), ``jury worker`` (a fleet worker) and
``jury doctor`` (whether Jury can run here)."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import structlog
import typer
from rich.table import Table

from jury_cli.context import DirOpt, cells, err, out, settings_for
from orchestrator.actions import queues as action_queues
from orchestrator.agent_kinds import AGENT_KINDS
from orchestrator.config import (
    LOG_LEVELS,
    Settings,
    load_config,
    load_schedules,
    load_settings,
    operator_config_file,
)
from orchestrator.errors import UsageError
from orchestrator.store.urls import redact_url

POOLS = ("threads", "prefork")  # the Celery pools a worker runs: its heartbeats and drain are threads

log = structlog.get_logger()


def agents(
    config: Annotated[Path | None, typer.Option("--config", help="The operator's config file.")] = None,
    repo: Annotated[
        Path | None, typer.Option(help="A repository whose trunk-side jury.toml applies.")
    ] = None,
) -> None:
    """Which catalog agents are installed, with their roles and install hints."""
    from orchestrator.target import checkout_config

    settings = load_settings()
    cfg = load_config(checkout_config(repo) if repo else None, operator_config_file(settings, config))
    table = Table(box=None, header_style="bold")
    for col in ("agent", "installed", "roles", "model", "install"):
        table.add_column(col)
    for name, spec in sorted(cfg.agents.items()):
        found = AGENT_KINDS[spec.kind].presence(spec, _installed)
        roles = "reviewer, judge" if spec.can_judge else "reviewer"
        table.add_row(*cells(name, "yes" if found else "no", roles, spec.model or "-", spec.install or "-"))
    out.print(table)


def _installed(program: str) -> str | None:
    """Where this machine has ``program``: on PATH, or a path to an existing file."""
    return shutil.which(program) or (program if program and Path(program).is_file() else None)


def worker(
    queues: Annotated[str, typer.Option(help="Queues to consume.")] = ",".join(action_queues()),
    concurrency: Annotated[int | None, typer.Option(min=1, help="Tasks at once.")] = None,
    pool: Annotated[str, typer.Option(help="Celery pool: threads or prefork.")] = "threads",
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
    beat: Annotated[
        bool, typer.Option(help="Deprecated, does nothing: every worker takes its turn at reaping.")
    ] = False,
    scheduler: Annotated[
        bool,
        typer.Option(help="Also fire the operator's [[schedules]] (any number of workers may)."),
    ] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help="Serve Prometheus metrics on this port, /metrics (0: any free port, logged).",
        ),
    ] = None,
    metrics_host: Annotated[
        str,
        typer.Option(help="The address the metrics endpoint binds (0.0.0.0 for a scraper on another host)."),
    ] = "127.0.0.1",
) -> None:
    """Run a worker against the shared Redis of JURY_REDIS_URL. Every worker reaps in turn (one per
    JURY_REAP_EVERY, behind a Redis lock); SIGTERM drains it: running agents get JURY_SHUTDOWN_GRACE
    seconds, then their actions go back to the fleet."""
    loglevel = _check_worker_options(pool, loglevel)
    settings = settings_for(None)
    if beat:
        err.print(
            "jury worker: --beat is deprecated and does nothing: every worker takes its turn at reaping",
            markup=False,
            highlight=False,
        )
    if not settings.redis_url:
        raise UsageError("set JURY_REDIS_URL to the shared Redis (e.g. redis://host:6379/0) to run a worker")
    if metrics_port is not None and pool == "prefork":
        # Before anything imports prometheus_client: the pool's children then write their metrics where
        # this process reads them (prometheus-client's multiprocess mode, workers/fleet/metrics.py).
        metrics_dir(settings)
    _gate(settings.redis_url)
    celery = _worker_app(settings, queues, loglevel)
    _show_jurys_url(celery, settings.redis_url)
    bound = serve_metrics(settings, metrics_port, metrics_host) if metrics_port is not None else None
    from workers.runtime.embedded import worker_options

    argv = ["worker", *worker_options(queues, concurrency or settings.worker_concurrency, pool, loglevel)]
    # With JSON logs every line on stderr is one JSON event: Celery's banner (on stdout) is left out and
    # its facts logged as ``worker.started`` instead.
    json_logs = settings.log_json if settings.log_json is not None else not sys.stderr.isatty()
    started: dict[str, object] = {
        "queues": queues,
        "concurrency": argv[6],
        "pool": pool,
        "metrics_port": bound,
    }
    _log_started(started | {"broker": redact_url(settings.redis_url)})
    stop = _start_scheduler(settings) if scheduler else None
    try:
        celery.worker_main([*(["-q"] if json_logs else []), *argv])
    finally:
        if stop is not None:
            stop.set()


def _gate(redis_url: str) -> None:
    """Refuse to start (exit 2) on a fleet whose Redis a newer major of Jury laid out, or with a
    ``JURY_ARCHIVE`` that names no archive: said at start, in one line, not at the first run that ends."""
    from jury_cli.backend import shared_store
    from orchestrator.store.archive import archive_from_env
    from workers.fleet.schema import check_schema

    archive_from_env()
    store = shared_store(redis_url)
    try:
        log.info("worker.schema", schema=check_schema(store.client, store.prefix))
    finally:
        store.close()


def _check_worker_options(pool: str, loglevel: str) -> str:
    """The Celery log level, upper case, once the pool and the level are ones a worker runs with."""
    if pool not in POOLS:  # Celery's others (gevent, eventlet, solo) are not what the worker's threads assume
        raise UsageError(f"--pool {pool!r}: use threads or prefork")
    if loglevel.upper() not in LOG_LEVELS:
        raise UsageError(f"--loglevel {loglevel!r}: use one of {', '.join(LOG_LEVELS)}")
    return loglevel.upper()


def _worker_app(settings: Settings, queues: str, loglevel: str) -> Any:
    """The worker's Celery app, with logging set up first and ``queues`` checked against the known ones."""
    import logging

    from orchestrator import logs
    from workers.runtime.app import QUEUES, make_app

    # Set up now, not only when Celery starts (workers.runtime.app, setup_logging): what is said before that,
    # a warning included (running as root), is a JSON line too.
    logs.configure_process(settings.log_level, settings.log_json, library_level=loglevel)
    logging.captureWarnings(True)

    unknown = set(queues.split(",")) - set(QUEUES)
    if unknown:
        raise UsageError(f"unknown queue(s) {', '.join(sorted(unknown))}; known: {', '.join(QUEUES)}")
    return make_app(settings)


def _show_jurys_url(celery: Any, url: str | None) -> None:
    """Celery's banner and its "Connected to" log line show the broker as kombu spells it,
    ``redis://:**@host`` whether or not the URL has a password: they show Jury's own redacted URL
    instead (the password masked, if any)."""
    import logging

    shown = redact_url(url)
    kombus = celery.connection().as_uri()  # no connection is made: the URL as kombu prints it
    base = celery.Worker

    def jurys(record: logging.LogRecord) -> bool:  # Celery's "Connected to <url>" line, the same
        if isinstance(record.args, tuple):
            record.args = tuple(shown if arg == kombus else arg for arg in record.args)
        return True

    logging.getLogger("celery.worker.consumer.connection").addFilter(jurys)

    class Worker(base):  # type: ignore[misc, valid-type]
        def startup_info(self, artlines: bool = True) -> str:
            text: str = super().startup_info(artlines)
            return text.replace(self.app.connection().as_uri(), shown)

    celery.Worker = Worker


def _log_started(started: dict[str, object]) -> None:
    """Say ``worker.started`` with ``started`` once Celery has set the worker up."""
    from celery.signals import celeryd_after_setup

    celeryd_after_setup.connect(
        lambda sender=None, **_: log.info("worker.started", node=sender, **started), weak=False
    )


def _start_scheduler(settings: Settings) -> threading.Event:
    """The scheduler's loop (``workers.fleet.scheduler``) in a daemon thread of this worker; set the returned
    event to stop it. The schedules are checked here, so a bad one fails the command, not the thread."""
    from workers.fleet.scheduler import run_scheduler, store_for
    from workers.runtime import firings  # noqa: F401  (binds what each kind of schedule does)

    path = operator_config_file(settings)
    schedules = load_schedules(path)
    if not schedules:
        raise UsageError(f"--scheduler: no [[schedules]] in the operator's config ({path or 'none found'})")
    store, stop = store_for(settings), threading.Event()
    threading.Thread(
        target=run_scheduler,
        args=(settings, schedules, stop),
        kwargs={"config_file": path, "store": store},
        name="scheduler",
        daemon=True,
    ).start()
    return stop


def metrics_dir(settings: Settings) -> Path:
    """A fresh directory for the prefork children's metrics, named in ``PROMETHEUS_MULTIPROC_DIR``."""
    import atexit

    path = settings.dir / "metrics" / f"worker-{os.getpid()}"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, mode=0o700)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def serve_metrics(settings: Settings, port: int, host: str = "127.0.0.1") -> int:
    """Serve the worker's metrics endpoint from now on: the port bound (a port in use is a usage error,
    before the worker starts). Loopback unless the operator names another address: the figures (runs,
    spend) are the fleet's business."""
    from orchestrator.store.redis import from_url
    from workers.fleet.metrics import serve, worker_registry
    from workers.runtime.app import celery_url

    try:
        bound = serve(port, worker_registry(from_url(celery_url(settings.redis_url))), addr=host)
    except OSError as exc:
        raise UsageError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc
    return bound


def doctor(
    config: Annotated[Path | None, typer.Option("--config", help="The operator's config file.")] = None,
    dir: DirOpt = None,
) -> None:
    """Whether this machine can run Jury: git, Redis, bubblewrap, user namespaces, and the sandbox with
    the operator's [sandbox] settings. Exit 0 when it can, 1 with the reason otherwise."""
    from workers.doctor import diagnose

    settings = settings_for(dir)
    report = diagnose(settings, load_config(None, operator_config_file(settings, config)).sandbox)
    for c in report.checks:
        mark = "ok" if c.ok else ("--" if c.ok is None else "FAIL")
        out.print(f"{c.what:<10} {mark:<5} {c.text}", markup=False)
    for note in report.notes:
        out.print(f"note: {note}", markup=False)
    if report.problems:
        err.print(f"jury doctor: {'; '.join(report.problems)}", markup=False, highlight=False)
        raise typer.Exit(1)
