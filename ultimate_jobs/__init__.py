"""Durable background jobs for Django on PostgreSQL.

Declare a job with ``@job``, put it on the queue with ``handle.enqueue(...)``, run it
with ``manage.py jobs_worker``; put jobs on the queue on a cron with ``@task`` or
``recur(...)``; trim tables with ``purge(...)``; sweep rows once with ``backfill(...)``.
See docs/ for the guide.
"""

from __future__ import annotations

import importlib
import typing

from ultimate_jobs.declaration.definition import NO_TENANT, Concurrency, JobDefinition
from ultimate_jobs.declaration.redaction import REDACTED
from ultimate_jobs.declaration.registry import Registry, registry
from ultimate_jobs.declaration.retry import Retry, register_error_retry, retry_schedule
from ultimate_jobs.declaration.run import CancelToken, Run
from ultimate_jobs.declaration.states import CatchUp, JobState, StepKind, StepStatus
from ultimate_jobs.durable.events import Published, publish_event
from ultimate_jobs.durable.workflows import Outcome
from ultimate_jobs.enqueue.handle import JobHandle, job
from ultimate_jobs.enqueue.options import Enqueued
from ultimate_jobs.ground.context import (
    correlation_scope,
    current_correlation_id,
    current_tenant,
)
from ultimate_jobs.ground.exceptions import (
    BackfillExcluded,
    BackfillInvalid,
    BackfillMigrationPending,
    BackfillStalled,
    ConfigurationError,
    EventTimeout,
    ExportInvalid,
    ExportPartTooLarge,
    ExportUnknownColumn,
    ExportWriteConflict,
    FanInTimeout,
    IdempotencyRequired,
    InputTooDeep,
    InputTooLarge,
    InputUpgradeFailed,
    InputVersionAhead,
    InstantOutOfRange,
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
    JobPageInvalid,
    JobsError,
    JobTenantMismatch,
    JobTenantRequired,
    JobTimeout,
    LeaseLost,
    OutboxNoTx,
    PurgeTargetDuplicate,
    PurgeTargetInvalid,
    QueryError,
    RetryAfter,
    RowUnreadable,
    RunSuspended,
    StepDuplicate,
    TaskDeclarationInvalid,
    TaskRunning,
    TenantScopeRequired,
    Terminal,
    UnknownBackfill,
    UnknownJob,
    UnknownSetting,
    UnknownTask,
    UnsupportedDatabase,
    WebhookAddressRefused,
    WebhookDeliveryFailed,
    WebhookEndpointDisabled,
    WebhookInvalid,
    WebhookNotFound,
    WebhookSignatureInvalid,
)
from ultimate_jobs.retention.purge import PurgeTarget, purge
from ultimate_jobs.scheduling.schedules import (
    TaskFire,
    next_run,
    pause_task,
    recur,
    resume_task,
    task_fires,
    trigger,
    unrecur,
)
from ultimate_jobs.scheduling.tasks import TaskHandle, task, task_registry

if typing.TYPE_CHECKING:
    from ultimate_jobs import api
    from ultimate_jobs.api.verbs import pause_queue, paused_queues, resume_queue
    from ultimate_jobs.backfills.runs import (
        BackfillState,
        backfill_states,
        pending_backfills,
    )
    from ultimate_jobs.backfills.sweep import Backfill, backfill, registered_backfills
    from ultimate_jobs.exports import export_part_key, export_rows
    from ultimate_jobs.tenancy import (
        TenantScopedManager,
        TenantScopedQuerySet,
        cross_tenant,
    )
    from ultimate_jobs.webhooks.delivery import WebhookEndpoint, WebhookEvent, webhook
    from ultimate_jobs.webhooks.ledger import (
        DatabaseWebhookLedger,
        DeliveryAttempt,
        MemoryWebhookLedger,
        WebhookLedger,
    )
    from ultimate_jobs.webhooks.signature import (
        VerifiedWebhook,
        verify_signature,
        verify_webhook_signature,
    )

__all__ = [
    "NO_TENANT",
    "REDACTED",
    "Backfill",
    "BackfillExcluded",
    "BackfillInvalid",
    "BackfillMigrationPending",
    "BackfillStalled",
    "BackfillState",
    "CancelToken",
    "CatchUp",
    "Concurrency",
    "ConfigurationError",
    "DatabaseWebhookLedger",
    "DeliveryAttempt",
    "Enqueued",
    "EventTimeout",
    "ExportInvalid",
    "ExportPartTooLarge",
    "ExportUnknownColumn",
    "ExportWriteConflict",
    "FanInTimeout",
    "IdempotencyRequired",
    "InputTooDeep",
    "InputTooLarge",
    "InputUpgradeFailed",
    "InputVersionAhead",
    "InstantOutOfRange",
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
    "JobPageInvalid",
    "JobState",
    "JobTenantMismatch",
    "JobTenantRequired",
    "JobTimeout",
    "JobsError",
    "LeaseLost",
    "MemoryWebhookLedger",
    "OutboxNoTx",
    "Outcome",
    "Published",
    "PurgeTarget",
    "PurgeTargetDuplicate",
    "PurgeTargetInvalid",
    "QueryError",
    "Registry",
    "Retry",
    "RetryAfter",
    "RowUnreadable",
    "Run",
    "RunSuspended",
    "StepDuplicate",
    "StepKind",
    "StepStatus",
    "TaskDeclarationInvalid",
    "TaskFire",
    "TaskHandle",
    "TaskRunning",
    "TenantScopeRequired",
    "TenantScopedManager",
    "TenantScopedQuerySet",
    "Terminal",
    "UnknownBackfill",
    "UnknownJob",
    "UnknownSetting",
    "UnknownTask",
    "UnsupportedDatabase",
    "VerifiedWebhook",
    "WebhookAddressRefused",
    "WebhookDeliveryFailed",
    "WebhookEndpoint",
    "WebhookEndpointDisabled",
    "WebhookEvent",
    "WebhookInvalid",
    "WebhookLedger",
    "WebhookNotFound",
    "WebhookSignatureInvalid",
    "api",
    "backfill",
    "backfill_states",
    "correlation_scope",
    "cross_tenant",
    "current_correlation_id",
    "current_tenant",
    "export_part_key",
    "export_rows",
    "job",
    "next_run",
    "pause_queue",
    "pause_task",
    "paused_queues",
    "pending_backfills",
    "publish_event",
    "purge",
    "recur",
    "register_error_retry",
    "registered_backfills",
    "registry",
    "resume_queue",
    "resume_task",
    "retry_schedule",
    "task",
    "task_fires",
    "task_registry",
    "trigger",
    "unrecur",
    "verify_signature",
    "verify_webhook_signature",
    "webhook",
]


# Loaded on first use: the operator API reads the models, which cannot be imported before
# Django's apps are (this package is imported first, from INSTALLED_APPS); backfills,
# exports, tenancy and webhooks are declared by the application's own modules, which
# import them, so a worker that serves none of them never loads them (N2, issue 26).
_LAZY = {
    "api": "ultimate_jobs.api",
    "pause_queue": "ultimate_jobs.api.verbs",
    "paused_queues": "ultimate_jobs.api.verbs",
    "resume_queue": "ultimate_jobs.api.verbs",
    "BackfillState": "ultimate_jobs.backfills.runs",
    "backfill_states": "ultimate_jobs.backfills.runs",
    "pending_backfills": "ultimate_jobs.backfills.runs",
    "Backfill": "ultimate_jobs.backfills.sweep",
    "backfill": "ultimate_jobs.backfills.sweep",
    "registered_backfills": "ultimate_jobs.backfills.sweep",
    "export_part_key": "ultimate_jobs.exports",
    "export_rows": "ultimate_jobs.exports",
    "TenantScopedManager": "ultimate_jobs.tenancy",
    "TenantScopedQuerySet": "ultimate_jobs.tenancy",
    "cross_tenant": "ultimate_jobs.tenancy",
    "WebhookEndpoint": "ultimate_jobs.webhooks.delivery",
    "WebhookEvent": "ultimate_jobs.webhooks.delivery",
    "webhook": "ultimate_jobs.webhooks.delivery",
    "DatabaseWebhookLedger": "ultimate_jobs.webhooks.ledger",
    "DeliveryAttempt": "ultimate_jobs.webhooks.ledger",
    "MemoryWebhookLedger": "ultimate_jobs.webhooks.ledger",
    "WebhookLedger": "ultimate_jobs.webhooks.ledger",
    "VerifiedWebhook": "ultimate_jobs.webhooks.signature",
    "verify_signature": "ultimate_jobs.webhooks.signature",
    "verify_webhook_signature": "ultimate_jobs.webhooks.signature",
}


def __getattr__(name: str) -> typing.Any:
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        value = module if name == "api" else getattr(module, name)
        globals()[name] = value  # the next access skips this function
        return value
    raise AttributeError(f"module 'ultimate_jobs' has no attribute {name!r}")
