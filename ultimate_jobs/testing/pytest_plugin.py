"""The pytest plugin (entry point ``pytest11``): the ``jobs`` fixture of X1."""

from __future__ import annotations

import pytest

from ultimate_jobs.testing import JobsTestRunner


@pytest.fixture
def jobs() -> JobsTestRunner:
    """Run due jobs inline with a test clock: ``jobs.run()``, ``jobs.travel(days=3)``."""
    return JobsTestRunner()
