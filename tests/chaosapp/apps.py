from __future__ import annotations

from django.apps import AppConfig


class ChaosAppConfig(AppConfig):
    name = "tests.chaosapp"
    label = "chaosapp"
