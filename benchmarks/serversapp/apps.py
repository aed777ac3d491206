from __future__ import annotations

from django.apps import AppConfig


class ServersConfig(AppConfig):
    name = "benchmarks.serversapp"
    label = "bench_servers"
