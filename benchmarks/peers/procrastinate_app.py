"""Procrastinate: an App on psycopg 3 and one async no-op task."""

from __future__ import annotations

import os

from procrastinate import App, PsycopgConnector

from benchmarks.record import record

app = App(connector=PsycopgConnector(conninfo=os.environ["DATABASE_URL"]))


@app.task(queue="bench", name="noop")
async def noop(n: int) -> None:
    record(n)
