"""The export and the webhook the process tests run (F4, F5); imported by jobs.py so
workers see them.

Its storage is a FileSystemStorage under ``$UJ_EXPORT_ROOT`` that can hold after a
write: when ``<root>/hold/<part name>`` exists, saving that part writes it, touches
``<root>/hold/<part name>.reached`` and waits for ``.release``, so a test can kill the
worker after the bytes landed and before the page's checkpoint. ``row()`` appends
``<pid> <pk>`` to ``<root>/rows.log``: which process read which row.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from django.core.files.storage import FileSystemStorage

from ultimate_jobs import (
    NO_TENANT,
    DatabaseWebhookLedger,
    Retry,
    WebhookEndpoint,
    WebhookEvent,
    export_rows,
    webhook,
)

from .models import Record


def export_root() -> Path:
    return Path(os.environ.get("UJ_EXPORT_ROOT") or tempfile.gettempdir())


class HoldingStorage(FileSystemStorage):
    def _save(self, name: str, content: Any) -> str:
        saved = super()._save(name, content)  # type: ignore[misc]
        hold = export_root() / "hold" / Path(name).name
        if hold.exists():
            Path(f"{hold}.reached").touch()
            while not Path(f"{hold}.release").exists():
                time.sleep(0.02)
        return saved


def logged_row(record: Record) -> dict[str, Any]:
    with (export_root() / "rows.log").open("a") as log:
        log.write(f"{os.getpid()} {record.pk}\n")
    return {"id": record.pk, "event": record.event, "n": record.attempt}


records_export = export_rows(
    "testapp.records_export",
    input={"tag": str},
    tenant=NO_TENANT,
    prefix=lambda p: f"exports/{p['tag']}",
    source=lambda p: Record.objects.filter(key=p["tag"]),
    columns=["id", "event", "n"],
    row=logged_row,
    storage=lambda: HoldingStorage(location=export_root()),
    batch=3,
    retry=Retry(attempts=3, delay="1s", jitter=False),
)


# -- F5: a webhook a worker process delivers; endpoints are Record rows -----------------

PARTNER_SECRET = "whsec_process-secret-never-logged"


def partner_endpoint(p: dict[str, Any]) -> WebhookEndpoint | None:
    row = Record.objects.filter(key=f"endpoint:{p['endpoint_id']}").first()
    if row is None:
        return None
    return WebhookEndpoint(id=p["endpoint_id"], url=row.event, secret=PARTNER_SECRET)


def partner_event(p: dict[str, Any]) -> WebhookEvent:
    return WebhookEvent(
        id=p["event_id"], topic="orders.paid", body=f'{{"event": "{p["event_id"]}"}}'
    )


partner_webhook = webhook(
    "testapp.partner_webhook",
    tenant=lambda p: p["tenant_id"],
    endpoint=partner_endpoint,
    event=partner_event,
    ledger=DatabaseWebhookLedger(),
    disable_after=2,
    timeout="5s",
    retry=Retry(attempts=5, delay="1s", jitter=False),
)
