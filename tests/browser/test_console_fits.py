"""Every page of the operator console fits a 1,400 px window (issue 30): no sideways
scroll on any admin page of the app with rows on it, one line per job row, and a
screenshot of each page under tests/.screenshots/fits-*.png to look at.

Needs Debian's chromium and chromium-driver (see test_admin_in_chromium.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin
from django.contrib.auth.models import User
from django.utils import timezone

from tests.browser import test_admin_in_chromium as chromium
from tests.browser.test_admin_in_chromium import WIDTH, Console, browser
from tests.integration.test_archive_readers import empty_archive, move_finished
from tests.testapp.console_jobs import three_steps
from tests.testapp.jobs import flaky, noop
from ultimate_jobs import recur
from ultimate_jobs.models import WebhookDelivery, WebhookEndpointState, Worker

pytestmark = chromium.pytestmark  # a database, selenium and Chromium, or a skip
__all__ = ["browser", "empty_archive"]  # fixtures, used by name

LONG = "a-rather-long-identifier-that-operators-paste-" * 3


def seed(jobs: Any) -> dict[str, Any]:
    """Rows on every page, with the long values real deployments have."""
    dead = three_steps.enqueue(
        key=f"report-{LONG}", token="s3cret", fail_at="transform"
    )
    retried = flaky.enqueue(key="flaky-1", fail_times=1)
    jobs.run()
    jobs.travel(seconds=11)
    jobs.run()
    noop.enqueue(key="finished")
    jobs.run()
    move_finished()
    for i in range(6):
        noop.using(queue="mail").enqueue(key=f"mail-{i}-{LONG}")
    jobs.run_scheduler()
    recur(
        noop,
        {"key": "nightly"},
        cron="0 3 * * *",
        tz="Europe/Paris",
        schedule_key=f"nightly-{LONG}"[:200],
        description="the nightly export of every tenant's rows, " * 3,
    )
    now = timezone.now()
    Worker.objects.create(
        id=f"host-{LONG}"[:200],
        host="worker-host.internal.example.com",
        pid=4242,
        started_at=now,
        queues=["default", "mail", "reports", "exports", "webhooks"],
        slots=8,
        in_flight=[str(dead.id)],
        heartbeat_at=now,
        expires_at=now + timedelta(minutes=5),
    )
    WebhookEndpointState.objects.create(
        endpoint_id=f"endpoint-{LONG}"[:200],
        consecutive_failures=5,
        disabled_at=now,
        disabled_reason="5 consecutive failures: HTTP 503 Service Unavailable " * 4,
    )
    WebhookDelivery.objects.create(
        endpoint_id=f"endpoint-{LONG}"[:200],
        event_id=f"evt-{LONG}"[:200],
        topic="orders.paid.with.a.long.topic.name",
        job_id=dead.id,
        attempt=3,
        ok=False,
        status=503,
        error="HTTP 503 Service Unavailable: upstream connect error " * 5,
        duration=0.25,
    )
    return {"dead": dead, "retried": retried}


def pages(seeded: dict[str, Any]) -> dict[str, str]:
    """Every page of the app, by the screenshot's name."""
    changelists = {
        f"fits-{model._meta.model_name}": (
            f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        )
        for model in admin.site._registry
        if model._meta.app_label == "ultimate_jobs"
    }
    return {
        "fits-index": "/admin/ultimate_jobs/",
        **dict(sorted(changelists.items())),
        "fits-job-dead": f"/admin/ultimate_jobs/job/{seeded['dead'].id}/change/",
        "fits-job-retried": f"/admin/ultimate_jobs/job/{seeded['retried'].id}/change/",
    }


def test_every_console_page_fits_1400_px(live_server, browser, jobs, empty_archive):
    User.objects.create_superuser("admin", "admin@example.com", "admin")
    seeded = seed(jobs)
    console = Console(browser, live_server.url)
    console.login("admin", "admin")
    overflowing = {}
    for name, path in pages(seeded).items():
        console.open(path)
        assert "Server Error" not in browser.title, path
        width = browser.execute_script(
            "var box = document.querySelector('#changelist .results');"
            "return [document.documentElement.scrollWidth,"
            " box === null ? 0 : box.scrollWidth - box.clientWidth];"
        )
        console.shot(name)
        if console.scrolls_sideways():
            overflowing[path] = width
    assert overflowing == {}, f"wider than {WIDTH} px: {overflowing}"


def test_a_job_row_is_one_line(live_server, browser, jobs, empty_archive):
    User.objects.create_superuser("admin", "admin@example.com", "admin")
    seed(jobs)
    console = Console(browser, live_server.url)
    console.login("admin", "admin")
    console.open("/admin/ultimate_jobs/job/")
    heights = [
        row.rect["height"]
        for row in browser.find_elements("css selector", "#result_list tbody tr")
    ]
    line = browser.execute_script(
        "return parseFloat(getComputedStyle(document.querySelector("
        "'#result_list tbody td')).lineHeight) || 16;"
    )
    assert len(heights) >= 5
    assert max(heights) < 2 * line + 12, (heights, line)


def test_a_job_page_shows_its_attempts_and_steps_above_the_fold(
    live_server, browser, jobs, empty_archive
):
    """Issue 30: the job page was 2,700 px tall with the attempts far below the fold."""
    User.objects.create_superuser("admin", "admin@example.com", "admin")
    seeded = seed(jobs)
    console = Console(browser, live_server.url)
    console.login("admin", "admin")
    console.open(f"/admin/ultimate_jobs/job/{seeded['dead'].id}/change/")
    fold = browser.execute_script("return window.innerHeight;")
    for selector in (".field-state", ".field-attempt_history", ".field-step_trace"):
        top = browser.execute_script(
            f"return document.querySelector('#job_form {selector}')"
            ".getBoundingClientRect().top;"
        )
        assert top < fold, (selector, top, fold)
    assert not console.scrolls_sideways()
    console.shot("fits-job-page-fold")
