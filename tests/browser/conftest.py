"""The ``browser`` fixture: a headless Chromium for one test, quit after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.chromium import start


@pytest.fixture
def browser() -> Iterator[Any]:
    driver = start()
    yield driver
    driver.quit()
