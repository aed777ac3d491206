"""The Django app: autodiscovers every app's ``jobs`` and ``tasks`` modules (the
AUTODISCOVER setting), registers the checks and the queue gauges (metrics.py) in
prometheus_client's default registry."""

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

        # M1: the collectors join prometheus_client's default registry now, not when a
        # URLconf or a worker first imports them, so every exporter of that registry
        # (django-prometheus's /metrics included) serves them from the first scrape.
        from ultimate_jobs.observability import metrics  # noqa: F401

        try:
            modules = get_settings().AUTODISCOVER
        except ConfigurationError:  # manage.py check names the bad setting (E001/E002)
            modules = JobsSettings.AUTODISCOVER
        autodiscover_modules(*modules)
