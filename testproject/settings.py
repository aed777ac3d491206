"""Settings of the test project: the demo, the test suite and the benchmarks.

The database is DATABASE_URL when set (read with django-environ); otherwise a private
PostgreSQL is started under the repository (testproject/embedded.py). SQLite is not
supported.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

SECRET_KEY = env.str("SECRET_KEY", default="insecure-demo-key-change-me")
DEBUG = env.bool("DEBUG", default=True)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ultimate_jobs",
    "testproject.demo",
]

MIDDLEWARE = [
    "ultimate_jobs.middleware.CorrelationIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "testproject.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if "DATABASE_URL" in os.environ:
    DATABASES = {"default": env.db("DATABASE_URL")}
else:
    from testproject.embedded import embedded_database

    DATABASES = {"default": embedded_database()}

# django-prometheus, when installed (the extra ultimate-jobs[prometheus]): its request
# metrics (the middleware) and database metrics (its PostgreSQL backend, for Django's
# connections; the worker's own stay plain) join the queue's in the default registry,
# and its /metrics serves them all (docs/observability.md).
if importlib.util.find_spec("django_prometheus") is not None:
    INSTALLED_APPS.append("django_prometheus")
    MIDDLEWARE = [
        "django_prometheus.middleware.PrometheusBeforeMiddleware",
        *MIDDLEWARE,
        "django_prometheus.middleware.PrometheusAfterMiddleware",
    ]
    for _database in DATABASES.values():
        _database["ENGINE"] = "django_prometheus.db.backends.postgresql"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"

ULTIMATE_JOBS: dict[str, object] = {}
