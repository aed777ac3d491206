"""The Django app: autodiscovers ``<app>.jobs`` modules, registers the checks and the
queue gauges (metrics.py) in prometheus_client's default registry."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class UltimateJobsConfig(AppConfig):
    name = "ultimate_jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from ultimate_jobs import checks  # noqa: F401 - registers the system checks

        # M1: the collectors join prometheus_client's default registry now, not when a
        # URLconf or a worker first imports them, so every exporter of that registry
        # (django-prometheus's /metrics included) serves them from the first scrape.
        from ultimate_jobs.observability import metrics  # noqa: F401

        autodiscover_modules("jobs")
