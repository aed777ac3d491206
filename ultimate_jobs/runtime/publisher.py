"""Publishing a claimed outbox batch (O2, Q1): each row into its queue's alias, in
order per alias. Rows of this relay's alias go in with the ``job_enqueue`` statement an
enqueue runs (an id that already names a job inserts nothing); rows of another alias
are delivered there with ``outbox_deliver``, on a connection of the relay's own, keyed
on the staged rows' ids, so a re-delivery inserts nothing either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ultimate_jobs.conf import JobsSettings
from ultimate_jobs.db import Database, DirectDatabase
from ultimate_jobs.enqueue.rows import Row as JobRow
from ultimate_jobs.enqueue.rows import array_params
from ultimate_jobs.enqueue.write import publish
from ultimate_jobs.sql.rows import OUTBOX_DELIVER, StagedJob

logger = logging.getLogger(__name__)


class Publisher:
    """Publishes one relay's batches; holds its connections to the other aliases."""

    def __init__(
        self,
        settings: JobsSettings,
        *,
        alias: str,
        relay_id: str,
        now: Callable[[], Any],
    ) -> None:
        self.settings = settings
        self.alias = alias
        self.relay_id = relay_id
        self.now = now
        self.targets: dict[str, DirectDatabase] = {}

    def publish(self, db: Database, rows: list[StagedJob]) -> tuple[int, set[str]]:
        """Publish a claimed batch, each row into its queue's alias (Q1), in order per
        alias; answer how many jobs were written and the queues that got one here."""
        by_alias: dict[str, list[StagedJob]] = {}
        for row in rows:
            target = self.settings.database_for(row["queue"])
            by_alias.setdefault(target, []).append(row)
        inserted = 0
        queues: set[str] = set()
        for target, part in by_alias.items():
            if target != self.alias:
                inserted += self.deliver(target, part)
                continue
            answers = publish(
                db, [JobRow.from_record(row) for row in part], now=self.now()
            )
            for row, answer in zip(part, answers, strict=True):
                if not answer.deduped:
                    inserted += 1
                    queues.add(row["queue"])
                elif answer.id != row["id"]:
                    logger.info(
                        "jobs.outbox.deduped",
                        extra={
                            "job_id": str(row["id"]),
                            "job_name": row["name"],
                            "held_by": str(answer.id),
                        },
                    )
        return inserted, queues

    def close(self) -> None:
        """Close the connections this relay opened to the other aliases (Q1)."""
        for target in self.targets.values():
            target.close()
        self.targets.clear()

    def deliver(self, target: str, rows: list[StagedJob]) -> int:
        """Q1: publish rows into another alias's queue exactly once, keyed on the
        staged rows' ids there (outbox_deliver); answer how many jobs were written.
        Its commits are synchronous (issue 31): the relay's mark that drops the staged
        rows is durable only after this insert is."""
        db = self.targets.get(target)
        if db is None:
            name = f"ultimate_jobs relay {self.relay_id} to {target}"
            db = self.targets[target] = DirectDatabase(
                target, application_name=name[:63], synchronous_commit=True
            )
        delivered = db.run(
            OUTBOX_DELIVER,
            now=self.now(),
            **array_params([JobRow.from_record(row) for row in rows]),
        )
        written = sum(1 for row in delivered if row["inserted"])
        logger.info(
            "jobs.outbox.delivered",
            extra={
                "relay_id": self.relay_id,
                "alias": target,
                "rows": len(rows),
                "received": len(delivered),
                "inserted": written,
            },
        )
        return written
