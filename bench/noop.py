"""Celery's own floor: a no-op task on the bench's Redis, the yardstick for Jury's dispatch overhead.

    BENCH_REDIS_URL=redis://... celery -A bench.noop worker -P threads -c 1

Each task increments one Redis counter, so the bench sees when all of them ran without a result backend.
"""

from __future__ import annotations

import os

import redis
from celery import Celery

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
COUNTER = "bench:noop:done"

app = Celery("bench_noop", broker=URL)
app.conf.update(task_default_queue="bench-noop", worker_prefetch_multiplier=4, task_ignore_result=True)
_client = redis.Redis.from_url(URL)


@app.task(name="bench.noop")
def noop() -> None:
    _client.incr(COUNTER)
