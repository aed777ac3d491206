"""Settings shared by the Django-based peers (DATABASE_URL; DEBUG off)."""

from __future__ import annotations

import environ

env = environ.Env()

SECRET_KEY = "benchmarks-only"  # noqa: S105 - never served
DEBUG = False
ALLOWED_HOSTS: list[str] = []
DATABASES = {"default": env.db("DATABASE_URL")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes"]
