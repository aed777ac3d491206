"""Django signals sent by ultimate_jobs (P4).

The sender is the job's registered handle, so a receiver can listen to one job with
``job_settled.connect(receiver, sender=send_welcome)``.

- ``job_enqueued(sender=handle, enqueued=Enqueued, handle=JobHandle)``: after a row was
  written (or staged in the outbox); not sent for a deduped enqueue.
- ``job_started(sender=handle, run=Run)``: before the body of an attempt runs.
- ``job_settled(sender=handle, settled=Settled)``: once per ending (completed,
  dead-lettered, dropped, refused), after the row is settled.
"""

from __future__ import annotations

from django.dispatch import Signal

job_enqueued = Signal()
job_started = Signal()
job_settled = Signal()
