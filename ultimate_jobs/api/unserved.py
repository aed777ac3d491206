"""Work that waits with no one to run it (issue 30): due jobs in a queue no live worker
serves, and due jobs of a name no code of this deployment declares. The dashboard
warns of both; without it such jobs sit ``ready`` without a word."""

from __future__ import annotations

from typing import Any

from django.db.models.functions import Now

from ultimate_jobs.api.reads import workers
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.models import Job, JobState

SAMPLE = 200  # due rows read per queue (its oldest, on the claim's index) for names


def unserved(queues: list[dict[str, Any]]) -> dict[str, Any]:
    """From ``api.overview``'s queues: ``queues``, the unpaused queues with due jobs
    that no live worker serves; ``names``, each undeclared job name among the oldest
    due rows of every queue with due jobs, with its queue."""
    served = {queue for worker in workers() for queue in worker["queues"]}
    waiting = [q for q in queues if q["depth"] > 0 and q["queue"] != "?"]
    names: dict[str, str] = {}
    for queue in waiting:
        due = (
            Job.objects.using(queue["database"])
            .filter(queue=queue["queue"], state=JobState.READY, run_at__lte=Now())
            .order_by("-priority", "run_at", "id")
            .values_list("name", flat=True)[:SAMPLE]
        )
        for name in due:
            if name not in registry:
                names.setdefault(name, queue["queue"])
    return {
        "queues": [
            q["queue"] for q in waiting if q["queue"] not in served and not q["paused"]
        ],
        "names": sorted(names.items()),
    }
