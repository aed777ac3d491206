"""Settings of the test suite: the test project plus the jobs the tests declare."""

from __future__ import annotations

from testproject.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]  # noqa: F405
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING_CONFIG = None
TASKS = {"default": {"BACKEND": "ultimate_jobs.backend.JobsBackend"}}
