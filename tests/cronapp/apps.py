from __future__ import annotations

from django.apps import AppConfig


class CronAppConfig(AppConfig):
    name = "tests.cronapp"
    label = "cronapp"
