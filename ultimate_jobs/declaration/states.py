"""The states of a job and of its steps, and the catch-up policies of a task.

SQL uses these literals verbatim. They live apart from the models so that they can be
imported (and type-checked) before Django's apps are ready: ``from ultimate_jobs import
JobState`` works in a settings module.
"""

from __future__ import annotations

from django.db import models


class JobState(models.TextChoices):
    """Where a job is in its life; SQL uses these literals verbatim."""

    READY = "ready"  # due now, waiting for a worker
    DELAYED = "delayed"  # waiting for run_at (a delayed enqueue or a retry backing off)
    RUNNING = "running"  # claimed by a worker whose lease has not lapsed
    SUSPENDED = "suspended"  # parked by run.sleep / run.wait_for_event until run_at
    DONE = "done"  # completed
    FAILED = "failed"  # failed for good outside the dead-letter queue (dead_letter=False, refused)
    DEAD = "dead"  # dead-lettered: terminal error or attempts exhausted; requeueable
    CANCELLED = "cancelled"  # cancelled by an operator


LIVE_STATES = (JobState.READY, JobState.DELAYED, JobState.RUNNING, JobState.SUSPENDED)
FINISHED_STATES = (JobState.DONE, JobState.FAILED, JobState.DEAD, JobState.CANCELLED)


LIVE_STATES = (JobState.READY, JobState.DELAYED, JobState.RUNNING, JobState.SUSPENDED)
FINISHED_STATES = (JobState.DONE, JobState.FAILED, JobState.DEAD, JobState.CANCELLED)


class StepKind(models.TextChoices):
    """What a step row records (S1-S4, S9-S11)."""

    STEP = "step"  # run.step: a result computed once
    ATOMIC = "atomic"  # run.atomic_step: a result committed with its writes
    SLEEP = "sleep"  # run.sleep: wake_at is the wake time
    EVENT = "event"  # run.wait_for_event: wake_at is the timeout deadline (or NULL)
    SPAWN = "spawn"  # run.spawn: output is the child's ids (S10)
    JOBS = "jobs"  # run.wait_for_jobs: output is the children's outcomes (S11)


class StepStatus(models.TextChoices):
    """Where a step is; SQL uses these literals verbatim."""

    DONE = "done"  # finished: output holds its result
    WAITING = "waiting"  # a sleep or a wait that has not ended yet
    TIMED_OUT = "timed_out"  # a wait whose timeout passed with no matching event


class CatchUp(models.TextChoices):
    """What a task or schedule fires after downtime (C5)."""

    SKIP = "skip"  # the latest missed occurrence only
    RUN_ONCE = "run-once"  # the earliest missed occurrence, once
    RUN_ALL = "run-all"  # every missed occurrence, at most max_catch_up per tick
