"""The admin's jobs list (P1, issue 15): keyset pages, search by full id, by an
explicit id prefix, by key, tenant and name (``?q=4242`` found nothing before), the
tenant filter and the created range, full ids with a copy button, waits and run times."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.testapp.jobs import anything, noop
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db
LIST = "admin:ultimate_jobs_job_changelist"
# The whole id is the code's title; its text is the first and last 8 hex digits.
ID = re.compile(r'<code class="uj-id" title="([0-9a-f-]{36})">')


def ids(client, **params):
    response = client.get(reverse(LIST), params)
    assert response.status_code == 200, response.content[:500]
    return ID.findall(response.content.decode()), response


def test_q_finds_numeric_keys_and_tenants_not_only_id_prefixes(client, operator):
    by_key = anything.enqueue(key="4242")
    by_tenant = anything.enqueue(key="other", tenant="4242")
    prefixed = anything.enqueue(key="report:4242")
    anything.enqueue(key="unrelated")
    found, _ = ids(client, q="4242")
    assert sorted(found) == sorted([str(by_key.id), str(by_tenant.id)])
    found, _ = ids(client, q="report:")
    assert found == [str(prefixed.id)]
    found, _ = ids(client, q="testapp.anything")
    assert len(found) == 4


def test_a_full_id_and_an_explicit_id_prefix_find_their_jobs(client, operator):
    first = noop.enqueue(key="a")
    second = noop.enqueue(key="b")
    found, _ = ids(client, q=str(second.id))
    assert found == [str(second.id)]
    found, _ = ids(client, q=f"id:{str(first.id)[:8]}")
    assert str(first.id) in found and str(second.id) in found  # same millisecond range
    found, _ = ids(client, q=f"id:{first.id!s}")
    assert found == [str(first.id)]
    found, _ = ids(client, q="id:zz")
    assert found == []


def test_ids_show_their_ends_and_keep_the_whole_id_to_copy(client, operator):
    jobs = [noop.enqueue(key=f"k{i}") for i in range(3)]
    found, response = ids(client)
    assert found == [str(j.id) for j in reversed(jobs)]  # newest first, whole in title
    html = response.content.decode()
    assert html.count('class="uj-copy"') == 3
    for job in jobs:
        whole = str(job.id)
        assert f'title="{whole}">{whole[:8]}…{whole[-8:]}</code>' in html
        assert f'data-id="{whole}"' in html  # the button copies the whole id


def test_keyset_pages_read_no_count_and_no_offset(client, operator, settings):
    jobs = [noop.enqueue(key=f"p{i}") for i in range(250)]
    newest_first = [str(j.id) for j in reversed(jobs)]
    with CaptureQueriesContext(connection) as queries:
        page1, response = ids(client)
    sql = " ".join(q["sql"] for q in queries.captured_queries).upper()
    assert "COUNT(" not in sql and "OFFSET" not in sql
    assert page1 == newest_first[:100]
    older = re.search(r'href="([^"]+)" id="uj-older"', response.content.decode())
    page2, response = ids(client, after=page1[-1])
    assert older and f"after={page1[-1]}" in older.group(1)
    assert page2 == newest_first[100:200]
    page3, response = ids(client, after=page2[-1])
    assert page3 == newest_first[200:]
    assert 'id="uj-older"' not in response.content.decode()
    back, _ = ids(client, before=page3[0])
    assert back == page2


def test_tenant_filter_and_created_range(client, operator):
    mine = anything.enqueue(key="t1", tenant="acme")
    anything.enqueue(key="t2", tenant="other")
    found, _ = ids(client, tenant="acme")
    assert found == [str(mine.id)]
    created = Job.objects.get(pk=mine.id).created_at
    found, _ = ids(
        client,
        created_from=created.strftime("%Y-%m-%d"),
        tenant="acme",
    )
    assert found == [str(mine.id)]
    found, _ = ids(client, created_to="2000-01-01")
    assert found == []
    response = client.get(reverse(LIST), {"created_to": "yesterday"})
    assert response.status_code == 302 and "e=1" in response.url  # refused, not a 500


def test_filters_offer_declared_values_without_reading_the_table(client, operator):
    noop.enqueue(key="x")
    with CaptureQueriesContext(connection) as queries:
        _, response = ids(client)
    sql = " ".join(q["sql"] for q in queries.captured_queries).upper()
    assert "DISTINCT" not in sql
    html = response.content.decode()
    assert "?queue=default" in html and "?state=dead" in html
    assert "?name=testapp.noop" in html
