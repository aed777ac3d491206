"""django-q2 with its ORM broker; ``workers`` is the benchmark's concurrency."""

from __future__ import annotations

import os

from benchmarks.peers.django_base import *  # noqa: F403
from benchmarks.peers.django_base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_q"]
Q_CLUSTER = {
    "name": "bench",
    "orm": "default",
    "workers": int(os.environ.get("BENCH_CONCURRENCY", "4")),
}
