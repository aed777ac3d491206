"""A project that installs only what a worker needs (no admin, no django-prometheus,
no exporter): what ``jobs_worker`` imports there is what the package itself pulls in
(tests/acceptance/test_worker_imports.py, N2's RSS)."""

from __future__ import annotations

import environ

env = environ.Env()

SECRET_KEY = "tests-only"
DEBUG = False
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "ultimate_jobs",
]
DATABASES = {"default": env.db("DATABASE_URL")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
