"""The operator console driven in a real headless Chromium (issue 15): log in, open
the dashboard, pause and resume a queue, retry a dead job from a step, cancel a
running job, and read the attempt history. Each page is saved as a screenshot under
tests/.screenshots/ (gitignored; the chosen ones are copied into docs/).

Needs Debian's ``chromium`` and ``chromium-driver`` and selenium (the ``test``
extra); skipped, saying which is missing, without them. ``.ci/run`` installs them.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from tests import claiming
from tests.browser.chromium import NEEDS_CHROMIUM, By, Console, Select, work
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.models import Job, JobStep, QueuePause

pytestmark = NEEDS_CHROMIUM


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
    dead, retried = work(jobs)  # a dead job with steps, a retried one, jobs in "mail"
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

    # The jobs list: the whole id in the page (titles, copy buttons), no sideways scroll.
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
