"""Django's tasks framework with the database backend of django-tasks (django-tasks-db)."""

from __future__ import annotations

from benchmarks.peers.django_base import *  # noqa: F403
from benchmarks.peers.django_base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks_db"]
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["bench"]}}
