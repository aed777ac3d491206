"""The test project's URLs plus views only the tests use."""

from __future__ import annotations

from django.urls import path

from testproject.urls import urlpatterns as project_urlpatterns
from ultimate_jobs.views import metrics, readiness_view

from .views import enqueue_chatty, meaning_of_life, meaning_of_life_async, task_result

urlpatterns = [
    # This package's view, first: the project's /metrics is django-prometheus's when
    # that is installed.
    path("metrics", metrics),
    *project_urlpatterns,
    path("chatty/<str:key>", enqueue_chatty),
    path("meaning-of-life", meaning_of_life, name="meaning-of-life"),
    path("meaning-of-life-async", meaning_of_life_async, name="meaning-of-life-async"),
    path("result/<str:result_id>", task_result, name="result"),
    path("ready/depth-3", readiness_view(max_depth=3, min_workers=0)),
    path("ready/depth-2", readiness_view(max_depth=2, min_workers=0)),
    path("ready/lag-5m", readiness_view(max_lag="5m", min_workers=0)),
    path("ready/lag-1m", readiness_view(max_lag="1m", min_workers=0)),
    path("ready/parked", readiness_view(max_depth=0, queues=["parked"])),
]
