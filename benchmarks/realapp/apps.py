from __future__ import annotations

from django.apps import AppConfig


class RealAppConfig(AppConfig):
    name = "benchmarks.realapp"
    label = "bench_real"
