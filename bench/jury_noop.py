"""Jury's own Celery app running a task that does nothing: the part of a dispatch run Jury's code cannot
shed, for the dispatch table to show beside Celery's plain no-op.

    BENCH_REDIS_URL=redis://... celery -A bench.jury_noop worker -P threads -c 1 -Q bench-jury-noop \\
        --without-gossip --without-mingle

It is ``workers.runtime.app.make_app``'s app, as ``jury worker`` runs it: its configuration (each message
acknowledged after its task, one taken at a time), its task signals (every line a task logs names it) and
its logging (``orchestrator.logs``, Celery's own lines included), with one more task, ``bench.jury_noop``,
which increments one Redis counter as ``bench.noop`` does. What a worker spends on one of these is what
it spends handling any of Jury's tasks before Jury's code runs and after it returns.
"""

from __future__ import annotations

import redis

from bench.noop import COUNTER, URL
from orchestrator.config import Settings
from workers.runtime.app import make_app

QUEUE = "bench-jury-noop"

# Jury's settings but for the Redis: the bench's database (``BENCH_REDIS_URL``, as for ``bench.noop``), the
# one the Jury workers it is compared with use.
app = make_app(Settings(redis_url=URL))
app.conf.task_routes = {**app.conf.task_routes, "bench.jury_noop": {"queue": QUEUE}}
_client = redis.Redis.from_url(URL)


@app.task(name="bench.jury_noop")
def jury_noop() -> None:
    _client.incr(COUNTER)
