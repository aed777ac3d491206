"""The queues this deployment declares, and the refusal of one it does not (issue 30):
work put on a queue no worker is started for waits forever without a word."""

from __future__ import annotations

from ultimate_jobs.conf import JobsSettings
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.declaration.suggest import did_you_mean
from ultimate_jobs.ground.exceptions import UnknownQueue


def declared_queues(settings: JobsSettings) -> set[str]:
    """Every queue QUEUES names (routes included) or a registered job declares."""
    return {*settings.QUEUES, *settings.ROUTES, *registry.queues()}


def check_declared(
    queue: str, settings: JobsSettings, *, field: str = "queue", job: str = ""
) -> str:
    """Answer ``queue`` when declared; else UnknownQueue naming the closest one."""
    known = declared_queues(settings)
    if queue in known:
        return queue
    raise UnknownQueue(
        field,
        queue,
        "no job and no QUEUES entry declares this queue, so no worker serves it"
        + did_you_mean(queue, known)
        + f" (declared: {', '.join(sorted(known)) or 'none'})",
        job=job,
    )
