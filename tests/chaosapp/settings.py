"""Settings of the chaos run (benchmarks/chaos): the test settings plus the chaos jobs.

Only the chaos run installs this app, so its every-minute tasks never fire in the
test suite's schedulers.
"""

from __future__ import annotations

from tests.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.chaosapp"]  # noqa: F405
