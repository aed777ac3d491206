"""Settings of a realistic app for the pickup benchmark (benchmarks/pickup_app.py).

Like benchmarks.settings, plus what a real project has that the one-job app has not:
~40 declared jobs and a few cron tasks (benchmarks/realapp/jobs.py), bodies writing a
row through the ORM, and INFO logging to a file (BENCH_LOG_FILE, else /dev/null).
"""

from __future__ import annotations

import os

from benchmarks.settings import *  # noqa: F403

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "ultimate_jobs",
    "benchmarks.realapp",
]
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}
    },
    "handlers": {
        "file": {
            "class": "logging.FileHandler",
            "filename": os.environ.get("BENCH_LOG_FILE", os.devnull),
            "formatter": "plain",
        }
    },
    "root": {"handlers": ["file"], "level": "INFO"},
}

# Variants (benchmarks/pickup_app.py --debug / --prometheus / --demo): the test project's
# DEBUG=True and django-prometheus's database backend, as testproject.settings runs.
DEBUG = os.environ.get("BENCH_DEBUG") == "1"
if os.environ.get("BENCH_DEMO") == "1":  # the demo's declarations join (--demo)
    INSTALLED_APPS.append("testproject.demo")
if os.environ.get("BENCH_PROMETHEUS") == "1":
    INSTALLED_APPS.append("django_prometheus")
    DATABASES["default"]["ENGINE"] = "django_prometheus.db.backends.postgresql"  # noqa: F405
