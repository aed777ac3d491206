"""Django settings of the ultimate_jobs side of the benchmarks (DATABASE_URL).

DEBUG is off (Django keeps every query in memory under DEBUG, which would show as a
leak in the RSS scenarios). The benchmark job lives in ``benchmarks.ujapp.jobs``.
"""

from __future__ import annotations

import environ

env = environ.Env()

SECRET_KEY = "benchmarks-only"  # noqa: S105 - never served
DEBUG = False
ALLOWED_HOSTS: list[str] = []
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "ultimate_jobs",
    "benchmarks.ujapp",
]
DATABASES = {"default": env.db("DATABASE_URL")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
ULTIMATE_JOBS: dict[str, object] = {}
