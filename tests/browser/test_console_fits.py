"""The console fits the screen (issue 30 item 7): every page the app registers, in a
real headless Chromium at 1,400 px, with long names, tenants, keys, worker ids,
endpoints and errors in its rows, has no horizontal scroll; a job-list row is one
line (long fields cut with an ellipsis, the whole value in the title); the job page's
attempts and steps start within the first 1,400x900 screen; the dashboard and
manifest breadcrumbs are Django's styled bar; the manifest shows no raw dicts. Each
page is saved under tests/.screenshots/ (gitignored).

Needs Debian's chromium and chromium-driver and selenium (tests/browser/chromium.py);
``.ci/run`` installs them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import connection
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from tests.browser.chromium import NEEDS_CHROMIUM, SHOTS, Console, work
from tests.testapp.jobs import noop
from ultimate_jobs import recur
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.maintenance import archive
from ultimate_jobs.models import (
    BackfillLedger,
    Job,
    LeaderLease,
    TaskWatermark,
    WebhookDelivery,
    WebhookEndpointState,
    Worker,
)

pytestmark = NEEDS_CHROMIUM

WIDTH, FOLD = 1400, 900
LONG = "reports.quarterly.regional_sales_reconciliation_with_currency_conversion"
TENANT = "tenant-acme-corporation-europe-west-production-eu-1"
WORKER = "worker-host-with-a-long-name.eu-west-1.compute.internal:41234:9f8e7d6c"
ENDPOINT = "https://hooks.example.com/services/T00000000/B00000000/a-long-endpoint-path"

# The page wider than the window, or a box in it (the admin's results box) that
# scrolls sideways: what hides, and where.
OVERFLOW = """
var wide = [];
if (document.documentElement.scrollWidth > window.innerWidth) {
  wide.push('page ' + document.documentElement.scrollWidth + ' px');
}
document.querySelectorAll('body *').forEach(function (e) {
  var how = getComputedStyle(e).overflowX;
  if ((how === 'auto' || how === 'scroll') && e.scrollWidth > e.clientWidth + 1) {
    wide.push(e.tagName.toLowerCase() + '#' + e.id + '.' + e.className + ' '
      + e.scrollWidth + ' > ' + e.clientWidth + ' px');
  }
});
return wide;
"""
# Every job-list row as tall as one line of its cells (plus padding): nothing wraps.
ROW_LINES = """
return Array.from(document.querySelectorAll('#result_list tbody tr')).map(function (tr) {
  var tallest = 0;
  tr.querySelectorAll('td, th').forEach(function (cell) {
    var style = getComputedStyle(cell);
    var line = parseFloat(style.lineHeight) || 1.3 * parseFloat(style.fontSize);
    var pad = parseFloat(style.paddingTop) + parseFloat(style.paddingBottom);
    tallest = Math.max(tallest, (cell.getBoundingClientRect().height - pad) / line);
  });
  return tallest;
});
"""


@pytest.fixture
def archive_emptied(django_db_blocker: Any) -> Iterator[None]:
    yield
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("TRUNCATE ultimate_jobs_job_archive")


def seed(jobs: Any) -> dict[str, Any]:
    """Work on every page, with the longest values an operator meets."""
    now = timezone.now()
    dead, retried = work(jobs)
    for i in range(4):  # rows another deploy's code wrote: long names and values
        Job.objects.create(
            name=f"{LONG}_{i}",
            queue="reports-quarterly-regional",
            tenant_id=TENANT,
            idempotency_key=f"{LONG}:{TENANT}:{i}" * 3,
            input={"region": "eu-west", "rows": list(range(40))},
            max_attempts=25,
            parent_id=dead.id,  # children: the job page's parent/children section
        )
    Worker.objects.create(
        id=WORKER,
        host="worker-host-with-a-long-name.eu-west-1.compute.internal",
        pid=41234,
        started_at=now - timedelta(minutes=5),
        queues=["default", "mail", "reports-quarterly-regional", "webhooks-outbound"],
        slots=16,
        in_flight=[str(retried.id), str(dead.id)],
        heartbeat_at=now,
        expires_at=now + timedelta(seconds=30),
    )
    recur(
        noop,
        {"key": "nightly-" + "x" * 60},
        cron="0 9 * * 1-5",
        tz="Europe/Amsterdam",
        schedule_key="ops-nightly-report-for-all-regions-and-every-tenant",
    )
    TaskWatermark.objects.create(
        key="task:reports.nightly_reconciliation_of_all_regional_ledgers",
        kind="task",
        name="reports.nightly_reconciliation_of_all_regional_ledgers",
        spec="0 3 * * * Europe/Amsterdam",
        last_occurrence=now - timedelta(hours=3),
    )
    WebhookEndpointState.objects.create(
        endpoint_id=ENDPOINT,
        consecutive_failures=12,
        disabled_at=now,
        disabled_reason="12 consecutive failures: HTTP 503 Service Unavailable " * 4,
        last_attempt_at=now,
    )
    WebhookDelivery.objects.create(
        endpoint_id=ENDPOINT,
        event_id="evt_" + "0123456789abcdef" * 4,
        topic="job.dead.reports.quarterly.regional_sales_reconciliation",
        job_id=dead.id,
        attempt=3,
        tenant_id=TENANT,
        ok=False,
        status=503,
        error="HTTPError: 503 Service Unavailable from upstream gateway " * 4,
        duration=1.25,
    )
    LeaderLease.objects.create(
        role="scheduler",
        holder=WORKER,
        term=3,
        acquired_at=now,
        renewed_at=now,
        expires_at=now + timedelta(seconds=30),
    )
    BackfillLedger.objects.create(
        name="orders.recompute_totals_for_every_historical_order",
        checksum="f" * 64,
        status="running",
        app_version="2026.12.04-1234abcd-with-a-long-build-tag",
        job_id=dead.id,
        rows=1234567,
        batches=1235,
        started_at=now,
    )
    return {"dead": dead, "retried": retried}


def pages() -> list[tuple[str, str]]:
    """(name, path) of every page the app registers: each list, one object's page."""
    found = [("app-index", reverse("admin:app_list", args=["ultimate_jobs"]))]
    for model in admin.site._registry:
        meta = model._meta
        if meta.app_label != "ultimate_jobs":
            continue
        name = str(meta.model_name)
        found.append((name, reverse(f"admin:ultimate_jobs_{name}_changelist")))
        row = model._default_manager.order_by("pk").first()
        if row is None:
            continue
        try:
            change = reverse(f"admin:ultimate_jobs_{name}_change", args=[row.pk])
        except NoReverseMatch:
            continue
        found.append((f"{name}-page", change))
    return found


def test_every_console_page_fits_1400_px(live_server, browser, jobs, archive_emptied):
    User.objects.create_superuser("admin", "admin@example.com", "admin")
    made = seed(jobs)
    console = Console(browser, live_server.url)
    console.login("admin", "admin")
    assert browser.execute_script("return window.innerWidth") == WIDTH

    wide = []
    listed = pages()
    names = {name for name, _ in listed}
    assert {"dashboard", "job", "jobarchive", "worker", "schedule"} <= names
    assert {"taskwatermark", "webhookdelivery", "webhookendpointstate"} <= names
    assert {"declaredjob", "job-page", "worker-page", "schedule-page"} <= names
    for name, path in listed:
        console.open(path)
        assert "Server Error" not in browser.title, path
        console.shot(f"fits-{name}")
        wide += [f"{path}: {box}" for box in browser.execute_script(OVERFLOW)]
    # The archive list, with rows in it.
    archive.move(
        DjangoDatabase("default"),
        after=60.0,
        batch=1000,
        max_batches=10,
        now=timezone.now() + timedelta(minutes=5),
    )
    console.open(reverse("admin:ultimate_jobs_jobarchive_changelist"))
    console.shot("fits-jobarchive-rows")
    assert browser.find_elements("css selector", "#result_list tbody tr")
    wide += [f"archive rows: {box}" for box in browser.execute_script(OVERFLOW)]
    assert wide == []
    assert made


def test_a_job_row_is_one_line_and_cut_fields_keep_their_title(
    live_server, browser, jobs
):
    User.objects.create_superuser("admin", "admin@example.com", "admin")
    seed(jobs)
    console = Console(browser, live_server.url)
    console.login("admin", "admin")
    console.open(reverse("admin:ultimate_jobs_job_changelist"))
    console.shot("fits-job-list")
    lines = browser.execute_script(ROW_LINES)
    assert len(lines) == 9
    assert [round(n) for n in lines] == [1] * 9, lines
    # The long name is cut with an ellipsis; its title holds it whole.
    cut = browser.execute_script(
        "return Array.from(document.querySelectorAll('#result_list td.field-job_name "
        "[title]')).map(function (e) { return [e.title, e.scrollWidth > e.clientWidth,"
        " getComputedStyle(e).textOverflow]; });"
    )
    longs = [row for row in cut if row[0].startswith(LONG)]
    assert len(longs) == 4
    assert all(overflows and how == "ellipsis" for _, overflows, how in longs)
    # The short columns show their whole text: the id's ends, the state, the times.
    whole = browser.execute_script(
        "return Array.from(document.querySelectorAll('#result_list tbody td, "
        "#result_list tbody th')).filter(function (e) {"
        " return /field-(job_id|state|attempts|created|wait|run_time)/"
        ".test(e.className) && e.scrollWidth > e.clientWidth; })"
        ".map(function (e) { return e.className + ': ' + e.innerText; });"
    )
    assert whole == []
    tenants = browser.execute_script(
        "return Array.from(document.querySelectorAll('#result_list td.field-tenant "
        "[title]')).map(function (e) { return e.title; });"
    )
    assert tenants.count(TENANT) == 4
    assert browser.execute_script(OVERFLOW) == []


def test_the_job_page_shows_attempts_and_steps_in_the_first_screen(
    live_server, browser, jobs
):
    User.objects.create_superuser("admin", "admin@example.com", "admin")
    made = seed(jobs)
    console = Console(browser, live_server.url)
    console.login("admin", "admin")
    chrome = browser.execute_script("return window.outerHeight - window.innerHeight")
    browser.set_window_size(WIDTH, FOLD + chrome)  # a viewport of 1,400x900
    for job in (made["dead"], made["retried"]):
        console.open(reverse("admin:ultimate_jobs_job_change", args=[job.id]))
        assert browser.execute_script("return window.innerHeight") == FOLD
        where = browser.execute_script(
            "var h = document.querySelector('fieldset.uj-attempts-and-steps h2');"
            "var r = h.getBoundingClientRect(); return [r.top, r.bottom];"
        )
        assert where[1] <= FOLD, where
        summary = browser.find_element("css selector", "fieldset.uj-summary").text
        assert str(job.id) in summary
        assert Job.objects.get(pk=job.id).state in summary.lower()
        assert browser.execute_script(OVERFLOW) == []
    browser.save_screenshot(str(SHOTS / "fits-job-page-fold.png"))


def test_breadcrumbs_are_styled_and_the_manifest_is_a_table(live_server, browser, jobs):
    User.objects.create_superuser("admin", "admin@example.com", "admin")
    console = Console(browser, live_server.url)
    console.login("admin", "admin")
    # Django's bar: a div on 5.2, an ol on 6.x (base.html); ours is an ol on both,
    # with the same colours, links and a separator between the crumbs.
    styled = (
        "var b = document.querySelector('nav .breadcrumbs');"
        "var link = b.querySelector('a');"
        "var crumb = b.querySelector('li');"
        "return [getComputedStyle(b).backgroundColor, getComputedStyle(link).color,"
        " getComputedStyle(b).paddingLeft, b.innerText,"
        " crumb ? getComputedStyle(crumb, '::after').content : ''];"
    )
    console.open(reverse("admin:ultimate_jobs_job_changelist"))
    django_bar = browser.execute_script(styled)[:3]  # a page Django draws itself
    assert django_bar[0] not in ("rgba(0, 0, 0, 0)", "transparent")
    for page, last in (("dashboard", "Dashboard"), ("declaredjob", "Manifest")):
        console.open(reverse(f"admin:ultimate_jobs_{page}_changelist"))
        *bar, text, mark = browser.execute_script(styled)
        assert bar == django_bar, page
        assert "\u203a" in mark, page
        assert re.sub(r"\s+", " ", text).strip() == f"Home Jobs {last}"
    html = browser.page_source
    assert "{'days'" not in html and "{&#x27;days" not in html
    assert "'attempts':" not in html
    assert browser.find_elements("css selector", "#uj-manifest-jobs tbody tr")
    assert browser.execute_script(OVERFLOW) == []
