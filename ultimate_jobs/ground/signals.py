"""Django signals sent by ultimate_jobs (P4).

The sender is the job's registered handle, so a receiver can listen to one job with
``job_settled.connect(receiver, sender=send_welcome)``.

- ``job_enqueued(sender=handle, enqueued=Enqueued, handle=JobHandle)``: after a row was
  written (or staged in the outbox); not sent for a deduped enqueue.
- ``job_started(sender=handle, run=Run)``: before the body of an attempt runs.
- ``job_settled(sender=handle, settled=Settled)``: once per ending (completed,
  dead-lettered, dropped, refused), after the row is settled.
- ``job_attempt_failed(sender=handle, job_id, name, attempt, outcome, error)``: once per
  attempt that raised, after its outcome (retried, dead-lettered or dropped) is written;
  the final one is also told to ``job_settled``.
- ``job_cancelled(sender=handle, job_id, name, state, reason)``: after an operator verb
  (``api.cancel``, ``api.cancel_by_key``, the bulk cancel, the admin, ``manage.py jobs
  cancel``) cancelled a live job; ``state`` is the one it was cancelled from. A running
  job's worker stops it at its next heartbeat.

A job no longer declared in this process is sent with ``sender=None``.
"""

from __future__ import annotations

from django.dispatch import Signal

job_enqueued = Signal()
job_started = Signal()
job_settled = Signal()
job_attempt_failed = Signal()
job_cancelled = Signal()
