"""The backfill the process tests run (F1, B3); imported by jobs.py so workers see it.

It runs only where ``ENVIRONMENT`` is ``"acceptance"`` (the process test starts its
workers so), so everywhere else it is ``excluded`` and never counts as pending.

``handle()`` holds before it writes when ``$UJ_BACKFILL_ROOT/hold/<first pk>`` exists:
it touches ``<that>.reached`` and waits for ``<that>.release``, so a test can kill the
worker in the middle of a page. It then adds 1 to each row's ``attempt`` (on purpose
not idempotent: the count says how often each row was handled) and appends
``<pid> <pk>`` to ``$UJ_BACKFILL_ROOT/handled.log``.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from django.db.models import F

from ultimate_jobs import CancelToken, Retry, backfill

from .models import Record

KEY = "backfill-process"


def backfill_root() -> Path:
    return Path(os.environ.get("UJ_BACKFILL_ROOT") or tempfile.gettempdir())


def bump(rows: list[Any], token: CancelToken) -> None:
    hold = backfill_root() / "hold" / str(rows[0].pk)
    if hold.exists():
        Path(f"{hold}.reached").touch()
        while not Path(f"{hold}.release").exists():
            time.sleep(0.02)
    pks = [row.pk for row in rows]
    Record.objects.filter(pk__in=pks).update(attempt=F("attempt") + 1)
    with (backfill_root() / "handled.log").open("a") as log:
        log.writelines(f"{os.getpid()} {pk}\n" for pk in pks)


records_backfill = backfill(
    "testapp.records_backfill",
    source=lambda: Record.objects.filter(key=KEY),
    handle=bump,
    batch=3,
    rate=100,
    environments=["acceptance"],
    count=lambda: Record.objects.filter(key=KEY, attempt=0).count(),
    retry=Retry(attempts=3, delay="1s", jitter=False),
)
