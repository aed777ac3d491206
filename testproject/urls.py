from __future__ import annotations

from django.apps import apps
from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path

from testproject.demo.views import receive_webhook
from ultimate_jobs.views import metrics, readiness_view

# /metrics: django-prometheus's view when it is installed (the same registry, with
# Django's own series beside the queue's), else this package's.
if apps.is_installed("django_prometheus"):
    exporter: URLPattern | URLResolver = path("", include("django_prometheus.urls"))
else:
    exporter = path("metrics", metrics)

urlpatterns = [
    path("admin/", admin.site.urls),
    exporter,
    path("health/ready", readiness_view(max_depth=1000, max_lag="5m")),
    path("demo/webhook", receive_webhook),
    # P9: the MCP tools over HTTP for remote agents (docs/agents.md).
    path("jobs/", include("ultimate_jobs.urls")),
]
