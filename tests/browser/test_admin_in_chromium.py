"""The operator console driven in a real headless Chromium (issue 15): log in, open
the dashboard, pause and resume a queue, retry a dead job from a step, cancel a
running job, and read the attempt history. Each page is saved as a screenshot under
tests/.screenshots/ (gitignored; the chosen ones are copied into docs/).

Needs Debian's ``chromium`` and ``chromium-driver`` and selenium (the ``test``
extra); skipped, saying which is missing, without them. ``.ci/run`` installs them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from tests import claiming
from tests.testapp.console_jobs import three_steps
from tests.testapp.jobs import flaky, noop
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.models import Job, JobStep, QueuePause

SHOTS = Path(__file__).resolve().parent.parent / ".screenshots"
WIDTH, HEIGHT = 1400, 1000  # the width: no sideways scroll at 1,400 px

webdriver: Any
try:
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as expected
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:  # pragma: no cover - the test extra installs it
    webdriver = None

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(webdriver is None, reason="selenium is not installed"),
    pytest.mark.skipif(
        CHROMIUM is None or DRIVER is None,
        reason="Chromium not found: apt-get install chromium chromium-driver",
    ),
]


@pytest.fixture
def browser() -> Iterator[Any]:
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
    yield driver
    driver.quit()


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
        """Press a button that posts a form, and wait for the page it leads to."""
        page = self.driver.find_element(By.TAG_NAME, "html")
        self.driver.find_element(By.ID, element_id).click()
        WebDriverWait(self.driver, 30).until(expected.staleness_of(page))

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


def running(job_id: Any) -> None:
    """Claim ``job_id`` as a worker would: running, under a live lease."""
    claiming.claim(
        DjangoDatabase("default"),
        queues=["default"],
        limit=10,
        worker_id="browser-test-worker",
        lease_seconds=600.0,
        names=None,
        now=None,
    )
    assert Job.objects.get(pk=job_id).state == "running"


def test_an_operator_drives_the_console(live_server, browser, jobs):
    User.objects.create_superuser("admin", "admin@example.com", "admin")
    # Work to look at: a dead job with steps, a job that retried once then
    # completed, jobs waiting in two queues.
    dead = three_steps.enqueue(key="report-42", token="s3cret", fail_at="transform")
    retried = flaky.enqueue(key="flaky-1", fail_times=1)
    jobs.run()
    jobs.travel(seconds=11)
    jobs.run()
    for i in range(3):
        noop.using(queue="mail").enqueue(key=f"mail-{i}")
    console = Console(browser, live_server.url)

    console.login("admin", "admin")
    console.open("/admin/ultimate_jobs/dashboard/")
    assert "Dashboard" in browser.title
    console.shot("dashboard")
    assert browser.find_elements(By.CSS_SELECTOR, "svg.uj-chart")
    assert not console.scrolls_sideways()

    # Pause and resume a queue from its buttons.
    console.click("uj-pause-mail")
    assert console.messages() == ["Queue 'mail' paused."]
    assert QueuePause.objects.get(queue="mail").paused_by == "admin (admin)"
    console.shot("dashboard-paused")
    console.click("uj-resume-mail")
    assert console.messages() == ["Queue 'mail' resumed; its workers were woken."]
    assert not QueuePause.objects.filter(queue="mail").exists()

    # The jobs list: whole ids, no sideways scroll at 1,400 px.
    console.open("/admin/ultimate_jobs/job/")
    console.shot("jobs")
    assert str(dead.id) in browser.page_source
    assert not console.scrolls_sideways()

    # The attempt history of the job that retried.
    console.open(f"/admin/ultimate_jobs/job/{retried.id}/change/")
    rows = browser.find_elements(By.CSS_SELECTOR, "#uj-attempts tr.uj-attempt")
    assert [r.find_elements(By.TAG_NAME, "td")[5].text for r in rows] == [
        "retried",
        "completed",
    ]
    console.shot("job-attempts")

    # Retry the dead job from its second step.
    console.open(f"/admin/ultimate_jobs/job/{dead.id}/change/")
    assert "s3cret" not in browser.page_source  # step outputs redacted (B5)
    console.shot("job-dead")
    Select(browser.find_element(By.ID, "uj-from-step")).select_by_value("transform")
    console.click("uj-retry")
    assert console.messages() == [f"Job {dead.id}: retried from step 'transform'."]
    assert Job.objects.get(pk=dead.id).state == "ready"
    assert list(
        JobStep.objects.filter(job_id=dead.id, archived=False).values_list(
            "name", flat=True
        )
    ) == ["fetch"]

    # Cancel a running job.
    running(dead.id)
    console.open(f"/admin/ultimate_jobs/job/{dead.id}/change/")
    console.click("uj-cancel")
    assert console.messages() == [f"Job {dead.id}: cancelled."]
    assert Job.objects.get(pk=dead.id).state == "cancelled"
    console.shot("job-cancelled")
