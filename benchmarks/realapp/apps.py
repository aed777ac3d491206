from __future__ import annotations

from django.apps import AppConfig


class RealAppConfig(AppConfig):
    name = "benchmarks.realapp"
    label = "bench_real"

    def ready(self) -> None:
        from benchmarks import trace

        trace.install()  # BENCH_TRACE=1 only: stamps of the pickup's stages
