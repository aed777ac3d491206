"""Django signals sent by ultimate_jobs (P4).

- ``job_enqueued(sender=<job name>, enqueued=Enqueued, handle=JobHandle)``: after a row
  was written (or staged in the outbox); not sent for a deduped enqueue.
- ``job_started(sender=<job name>, run=Run)``: before the body of an attempt runs.
- ``job_settled(sender=<job name>, settled=Settled)``: once per ending (completed,
  dead-lettered, dropped, refused), after the row is settled.
"""

from __future__ import annotations

from django.dispatch import Signal

job_enqueued = Signal()
job_started = Signal()
job_settled = Signal()
