"""The tables, one module per group; every model is importable from here.

The hot statements that write these tables are the named SQL in ``sql/``; the models own
the schema (through ordinary migrations) and the read QuerySets the admin and the
operator API use. ``db_table`` names are explicit because the .sql files name them.
The states (``JobState``, ...) live in ultimate_jobs.declaration.states, importable
before Django's apps are ready, and are re-exported here.
"""

from __future__ import annotations

from ultimate_jobs.declaration.states import (
    FINISHED_STATES,
    LIVE_STATES,
    CatchUp,
    JobState,
    StepKind,
    StepStatus,
)
from ultimate_jobs.models.agents import AgentToken
from ultimate_jobs.models.archive import ArchiveCount, JobArchive
from ultimate_jobs.models.attempts import Attempt
from ultimate_jobs.models.backfills import BackfillLedger, BackfillStatus
from ultimate_jobs.models.console import Dashboard
from ultimate_jobs.models.jobs import (
    CounterTier,
    Event,
    Job,
    JobAction,
    JobCounter,
    JobStep,
    Lease,
    QueuePause,
    Worker,
)
from ultimate_jobs.models.outbox import OutboxMessage, OutboxReceipt
from ultimate_jobs.models.runlogs import DeclaredJob, RunLog
from ultimate_jobs.models.scheduling import LeaderLease, Schedule, TaskWatermark
from ultimate_jobs.models.webhooks import WebhookDelivery, WebhookEndpointState

__all__ = [
    "FINISHED_STATES",
    "LIVE_STATES",
    "AgentToken",
    "ArchiveCount",
    "Attempt",
    "BackfillLedger",
    "BackfillStatus",
    "CatchUp",
    "CounterTier",
    "Dashboard",
    "DeclaredJob",
    "Event",
    "Job",
    "JobAction",
    "JobArchive",
    "JobCounter",
    "JobState",
    "JobStep",
    "LeaderLease",
    "Lease",
    "OutboxMessage",
    "OutboxReceipt",
    "QueuePause",
    "RunLog",
    "Schedule",
    "StepKind",
    "StepStatus",
    "TaskWatermark",
    "WebhookDelivery",
    "WebhookEndpointState",
    "Worker",
]
