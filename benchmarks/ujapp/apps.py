from __future__ import annotations

from django.apps import AppConfig


class BenchConfig(AppConfig):
    name = "benchmarks.ujapp"
    label = "bench_uj"

    def ready(self) -> None:
        from benchmarks import trace

        trace.install()  # BENCH_TRACE=1 only: stamps of the pickup's stages
