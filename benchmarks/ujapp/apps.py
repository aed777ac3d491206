from __future__ import annotations

from django.apps import AppConfig


class BenchConfig(AppConfig):
    name = "benchmarks.ujapp"
    label = "bench_uj"
