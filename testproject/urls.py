from __future__ import annotations

from django.contrib import admin
from django.urls import path

from testproject.demo.views import receive_webhook
from ultimate_jobs.views import metrics, readiness_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("metrics", metrics),
    path("health/ready", readiness_view(max_depth=1000, max_lag="5m")),
    path("demo/webhook", receive_webhook),
]
