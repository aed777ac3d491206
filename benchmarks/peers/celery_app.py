"""Celery on the local Redis (database 13), results ignored."""

from __future__ import annotations

import os

from celery import Celery

from benchmarks.record import record

BROKER = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
app = Celery("bench", broker=BROKER)
app.conf.task_ignore_result = True
app.conf.task_default_queue = "bench"
app.conf.broker_connection_retry_on_startup = True


@app.task(name="noop")
def noop(n: int) -> None:
    record(n)
