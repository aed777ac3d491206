"""Durable background jobs for Django on PostgreSQL.

Declare a job with ``@job``, put it on the queue with ``handle.enqueue(...)``, run it
with ``manage.py jobs_worker``. See docs/ for the guide.
"""

from __future__ import annotations

import typing

from ultimate_jobs.context import (
    correlation_scope,
    current_correlation_id,
    current_tenant,
)
from ultimate_jobs.declarations import (
    NO_TENANT,
    Concurrency,
    JobDefinition,
    Registry,
    job,
    registry,
)
from ultimate_jobs.events import Published, publish_event
from ultimate_jobs.exceptions import (
    ConfigurationError,
    EventTimeout,
    IdempotencyRequired,
    InvalidArgument,
    InvalidCron,
    InvalidDuration,
    InvalidJobPayload,
    InvalidQueueName,
    InvalidTimezone,
    JobAborted,
    JobControl,
    JobDeclarationInvalid,
    JobDuplicate,
    JobKeyBusy,
    JobNameTaken,
    JobNotCancellable,
    JobNotFound,
    JobNotPromotable,
    JobNotRemovable,
    JobNotRequeueable,
    JobsError,
    JobTenantRequired,
    JobTimeout,
    LeaseLost,
    OutboxNoTx,
    QueryError,
    RetryAfter,
    RunSuspended,
    StepDuplicate,
    Terminal,
    UnknownJob,
    UnsupportedDatabase,
)
from ultimate_jobs.handle import Enqueued, JobHandle
from ultimate_jobs.retry import Retry, register_error_retry, retry_schedule
from ultimate_jobs.run import CancelToken, Run

__all__ = [
    "NO_TENANT",
    "CancelToken",
    "Concurrency",
    "ConfigurationError",
    "Enqueued",
    "EventTimeout",
    "IdempotencyRequired",
    "InvalidArgument",
    "InvalidCron",
    "InvalidDuration",
    "InvalidJobPayload",
    "InvalidQueueName",
    "InvalidTimezone",
    "JobAborted",
    "JobControl",
    "JobDeclarationInvalid",
    "JobDefinition",
    "JobDuplicate",
    "JobHandle",
    "JobKeyBusy",
    "JobNameTaken",
    "JobNotCancellable",
    "JobNotFound",
    "JobNotPromotable",
    "JobNotRemovable",
    "JobNotRequeueable",
    "JobState",
    "JobTenantRequired",
    "JobTimeout",
    "JobsError",
    "LeaseLost",
    "OutboxNoTx",
    "Published",
    "QueryError",
    "Registry",
    "Retry",
    "RetryAfter",
    "Run",
    "RunSuspended",
    "StepDuplicate",
    "Terminal",
    "UnknownJob",
    "UnsupportedDatabase",
    "correlation_scope",
    "current_correlation_id",
    "current_tenant",
    "job",
    "publish_event",
    "register_error_retry",
    "registry",
    "retry_schedule",
]


def __getattr__(name: str) -> typing.Any:
    # JobState lives with the models, which cannot be imported before Django's apps are.
    if name == "JobState":
        from ultimate_jobs.models import JobState

        return JobState
    raise AttributeError(f"module 'ultimate_jobs' has no attribute {name!r}")
