"""The operator console's page in the admin index (P7, issue 15).

``Dashboard`` is a proxy with no rows of its own (like ``DeclaredJob``): it gives the
dashboard and queues page its place in the admin index and its URL
(``admin:ultimate_jobs_dashboard_changelist``).
"""

from __future__ import annotations

from ultimate_jobs.models.jobs import Job


class Dashboard(Job):
    """The admin's dashboard and queues page: per queue numbers, charts, pause/resume."""

    class Meta:
        proxy = True
        verbose_name = "dashboard"
        verbose_name_plural = "dashboard and queues"
