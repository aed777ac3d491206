"""The Django app: autodiscovers every app's ``jobs`` and ``tasks`` modules (the
AUTODISCOVER setting), registers the checks, and has the metrics (metrics.py) join
prometheus_client's default registry as soon as prometheus_client is in the process."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules

from ultimate_jobs.conf import JobsSettings, get_settings
from ultimate_jobs.ground.exceptions import ConfigurationError


class UltimateJobsConfig(AppConfig):
    name = "ultimate_jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from ultimate_jobs import checks  # noqa: F401 - registers the system checks

        # M1: the collectors join prometheus_client's default registry now when it is
        # imported already, else the moment anything imports it, so every exporter of
        # that registry (django-prometheus's /metrics included) serves them from the
        # first scrape; a worker that exports nothing never loads it (N2's RSS).
        from ultimate_jobs.observability import metrics

        metrics.watch()

        try:
            modules = get_settings().AUTODISCOVER
        except ConfigurationError:  # manage.py check names the bad setting (E001/E002)
            modules = JobsSettings.AUTODISCOVER
        autodiscover_modules(*modules)
