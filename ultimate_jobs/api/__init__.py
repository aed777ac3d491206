"""The operator API shared by the admin, ``manage.py jobs`` and Python callers (P1-P3).

``verbs`` change jobs and queues (retry, cancel, cancel_by_key, remove, promote,
pause, bulk); ``reads`` answer them as stable JSON (get, list_jobs, queue_stats,
workers); ``manifest`` lists what this deploy declares (J7) and ``deploy_check``
what the databases hold that it would break (P11). Every public name of each
is importable from here: ``from ultimate_jobs import api``.
"""

from __future__ import annotations

from ultimate_jobs.api.deploy import deploy_check
from ultimate_jobs.api.manifest import manifest
from ultimate_jobs.api.reads import (
    DEFAULT_PAGE,
    MAX_PAGE,
    action_json,
    find_job,
    get,
    job_actions,
    job_json,
    list_jobs,
    parse_job_id,
    queue_stats,
    workers,
)
from ultimate_jobs.api.verbs import (
    BULK_LIMIT,
    Operator,
    bulk,
    cancel,
    cancel_by_key,
    drain_worker,
    operator_of,
    pause_queue,
    paused_queues,
    promote,
    remove,
    resume_queue,
    retry,
)

__all__ = [
    "BULK_LIMIT",
    "DEFAULT_PAGE",
    "MAX_PAGE",
    "Operator",
    "action_json",
    "bulk",
    "cancel",
    "cancel_by_key",
    "deploy_check",
    "drain_worker",
    "find_job",
    "get",
    "job_actions",
    "job_json",
    "list_jobs",
    "manifest",
    "operator_of",
    "parse_job_id",
    "pause_queue",
    "paused_queues",
    "promote",
    "queue_stats",
    "remove",
    "resume_queue",
    "retry",
    "workers",
]
