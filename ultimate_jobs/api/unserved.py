"""Work that waits with no one to run it (issue 30): due jobs in a queue no live worker
serves, and due jobs of a name no live worker serving their queue declares (a worker
claims only the names its code declares: its registry row records them). The dashboard
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
    that no live worker serves; ``names``, (name, queue, workers) for each job name
    among the oldest due rows of a queue with due jobs that no live worker serving
    the queue declares (``workers``: how many serve it), or, in a queue no live worker
    serves, that no code of this process declares (``workers`` 0)."""
    live = workers()
    waiting = [q for q in queues if q["depth"] > 0 and q["queue"] != "?"]
    names: set[tuple[str, str, int]] = set()
    for queue in waiting:
        serving = [w for w in live if queue["queue"] in w["queues"]]
        if any(w["names"] is None for w in serving):
            continue  # a worker that did not record its names may serve any
        declared = (
            {name for w in serving for name in w["names"]} if serving else registry
        )
        due = (
            Job.objects.using(queue["database"])
            .filter(queue=queue["queue"], state=JobState.READY, run_at__lte=Now())
            .order_by("-priority", "run_at", "id")
            .values_list("name", flat=True)[:SAMPLE]
        )
        for name in due:
            if name not in declared:
                names.add((name, queue["queue"], len(serving)))
    served = {queue for worker in live for queue in worker["queues"]}
    return {
        "queues": [
            q["queue"] for q in waiting if q["queue"] not in served and not q["paused"]
        ],
        "names": sorted(names),
    }
