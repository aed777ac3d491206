"""Settings of two common mistakes (tests/acceptance/test_misconfiguration_processes.py),
chosen by UJ_MISTAKE: ``no-app`` leaves ultimate_jobs out of INSTALLED_APPS; ``sqlite``
runs on SQLite, as ``manage.py shell`` of a new Django project does."""

from __future__ import annotations

import os

from testproject.settings import *  # noqa: F403

MISTAKE = os.environ.get("UJ_MISTAKE", "")
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]
if MISTAKE == "sqlite":
    INSTALLED_APPS.append("ultimate_jobs")
    DATABASES = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    }
LOGGING_CONFIG = None
