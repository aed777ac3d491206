"""Queue names: the durable routing key a worker serves."""

from __future__ import annotations

import re

from ultimate_jobs.ground.exceptions import InvalidQueueName

QUEUE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
DEFAULT_QUEUE = "default"


def validate_queue(name: object, *, field: str = "queue", job: str = "") -> str:
    """Answer the queue name unchanged, or refuse it naming the field and the value."""
    if not isinstance(name, str) or not QUEUE_PATTERN.fullmatch(name):
        raise InvalidQueueName(
            field, name, "a queue name matches ^[a-z0-9][a-z0-9_.-]{0,62}$", job=job
        )
    return name
