"""The test settings plus an app whose jobs.py declares an every-minute task, for the
scheduler process tests (tests/acceptance/test_scheduler_processes.py)."""

from __future__ import annotations

from tests.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.cronapp"]  # noqa: F405
