"""Settings of the test suite: the test project plus the jobs the tests declare."""

from __future__ import annotations

from testproject.settings import *  # noqa: F403

# The demo's app is left out: its cron task would fire in every test's scheduler, and
# its jobs would be enqueued beside the tests' own (tests/acceptance/test_demo.py runs
# the demo as a newcomer does).
INSTALLED_APPS = [
    *(app for app in INSTALLED_APPS if app != "testproject.demo"),  # noqa: F405
    "tests.testapp",
]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING_CONFIG = None
TASKS = {"default": {"BACKEND": "ultimate_jobs.backend.JobsBackend"}}

# A second alias on the same database: the jobs tables seen from another alias than the
# business rows (the two-database arrangement of the outbox, docs/outbox.md).
DATABASES["jobs"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}  # noqa: F405
# Q1: a second database for the queues routed to another alias. Its NAME is derived
# from the default's, so the test runner makes test_<name>_b beside test_<name>, and a
# worker process started on the test database finds its sibling the same way.
DATABASES["jobs_b"] = {  # noqa: F405
    **DATABASES["default"],  # noqa: F405
    "NAME": f"{DATABASES['default']['NAME']}_b",  # noqa: F405
}
