"""The headless Chromium the browser tests drive, and the console as an operator
uses it (pages by path, buttons by id, whole-page screenshots). The ``browser``
fixture is in conftest.py; tests skip, saying what is missing, without Debian's
``chromium`` and ``chromium-driver`` or selenium (the ``test`` extra), and fail
instead when ``UJ_REQUIRE_CHROMIUM=1`` (as ``.ci/run`` sets)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.testapp.console_jobs import three_steps
from tests.testapp.jobs import flaky, noop

SHOTS = Path(__file__).resolve().parent.parent / ".screenshots"
WIDTH, HEIGHT = 1400, 1000  # the width: no sideways scroll at 1,400 px

webdriver: Any
By: Any
Select: Any
WebDriverWait: Any
WebDriverException: Any
try:
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:  # pragma: no cover - the test extra installs it
    webdriver = By = Select = WebDriverWait = WebDriverException = None

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
)

MISSING = (
    "selenium is not installed"
    if webdriver is None
    else "Chromium not found: apt-get install chromium chromium-driver"
    if CHROMIUM is None or DRIVER is None
    else ""
)
# .ci/run sets UJ_REQUIRE_CHROMIUM=1: there a missing browser fails the tests
# instead of skipping them, so CI cannot pass without running them.
REQUIRED = os.environ.get("UJ_REQUIRE_CHROMIUM") == "1"

NEEDS_CHROMIUM = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(bool(MISSING) and not REQUIRED, reason=MISSING),
]


def start() -> Any:
    """A headless Chromium at WIDTH x HEIGHT."""
    if MISSING:
        pytest.fail(f"{MISSING} (UJ_REQUIRE_CHROMIUM=1: the browser tests must run)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={WIDTH},{HEIGHT}",
    ):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=DRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(60)
    SHOTS.mkdir(exist_ok=True)
    return driver


class Console:
    """The admin as an operator uses it: pages by path, buttons by id."""

    def __init__(self, driver: Any, base: str) -> None:
        self.driver = driver
        self.base = base

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)

    def shot(self, name: str) -> None:
        # The whole page, not only the window: the height the document needs.
        height = self.driver.execute_script("return document.body.scrollHeight")
        self.driver.set_window_size(WIDTH, max(HEIGHT, min(int(height) + 40, 4000)))
        self.driver.save_screenshot(str(SHOTS / f"{name}.png"))
        self.driver.set_window_size(WIDTH, HEIGHT)

    def click(self, element_id: str) -> None:
        """Press a button that posts a form, and wait for the page it leads to: a
        new document (without the old one's mark) that has finished loading. Asking
        the old page's nodes instead races the navigation (chromedriver may answer
        "Node ... does not belong to the document" rather than a stale element)."""
        self.driver.execute_script("window.ujLeaving = true;")
        self.driver.find_element(By.ID, element_id).click()
        WebDriverWait(self.driver, 30, ignored_exceptions=(WebDriverException,)).until(
            lambda d: d.execute_script(
                "return window.ujLeaving === undefined"
                " && document.readyState === 'complete';"
            )
        )

    def messages(self) -> list[str]:
        return [
            e.text
            for e in self.driver.find_elements(By.CSS_SELECTOR, "ul.messagelist li")
        ]

    def scrolls_sideways(self) -> bool:
        """The page, or the admin's results box, is wider than what shows."""
        return bool(
            self.driver.execute_script(
                "var box = document.querySelector('#changelist .results');"
                "return document.documentElement.scrollWidth > window.innerWidth"
                " || (box !== null && box.scrollWidth > box.clientWidth);"
            )
        )

    def login(self, username: str, password: str) -> None:
        self.open("/admin/login/")
        self.driver.find_element(By.ID, "id_username").send_keys(username)
        self.driver.find_element(By.ID, "id_password").send_keys(password)
        self.driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        WebDriverWait(self.driver, 30).until(
            lambda d: "/admin/login/" not in d.current_url
        )


def work(jobs: Any) -> tuple[Any, Any]:
    """Work to look at, through the testing runner ``jobs``: a dead job with steps,
    a job that retried once then completed, three jobs waiting in queue "mail".
    Answers (dead, retried), as enqueued."""
    dead = three_steps.enqueue(key="report-42", token="s3cret", fail_at="transform")
    retried = flaky.enqueue(key="flaky-1", fail_times=1)
    jobs.run()
    jobs.travel(seconds=11)
    jobs.run()
    for i in range(3):
        noop.using(queue="mail").enqueue(key=f"mail-{i}")
    return dead, retried
