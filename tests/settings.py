"""Settings of the test suite: the test project plus the jobs the tests declare."""

from __future__ import annotations

from testproject.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]  # noqa: F405
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING_CONFIG = None
TASKS = {"default": {"BACKEND": "ultimate_jobs.backend.JobsBackend"}}

# A second alias on the same database: the jobs tables seen from another alias than the
# business rows (the two-database arrangement of the outbox, docs/outbox.md).
DATABASES["jobs"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}  # noqa: F405
