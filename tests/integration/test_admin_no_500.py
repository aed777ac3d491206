"""No 500 from any input of the admin (B4, issue 31 item 3).

A property test throws generated strings (NUL, lone surrogates, Unicode digits, long
text, JSON-looking text) at every query parameter of every list page of the app's
admin, and at every detail id, and asserts no request fails; a NUL or an over-long
value is answered 400 naming the parameter. The schedule form refuses deeply nested
JSON and a cron with a Unicode digit as form errors.
"""

from __future__ import annotations

import urllib.parse

import pytest
from django.contrib import admin
from django.urls import NoReverseMatch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.testapp.jobs import noop
from ultimate_jobs.models import Schedule

pytestmark = pytest.mark.django_db

ARABIC_ONE = "\u0661"


def app_admins() -> list[tuple[str, admin.ModelAdmin]]:  # type: ignore[type-arg]
    return sorted(
        (
            (f"admin:{model._meta.app_label}_{model._meta.model_name}", model_admin)
            for model, model_admin in admin.site._registry.items()
            if model._meta.app_label == "ultimate_jobs"
        ),
        key=lambda pair: pair[0],
    )


def parameters(model_admin) -> list[str]:
    """Every query parameter the list page reads: its filters', search, cursors, the
    admin's own (order, page, all, popup, error flag)."""
    names = ["q", "after", "before", "o", "p", "all", "e", "_popup", "_to_field"]
    for item in model_admin.list_filter:
        if isinstance(item, tuple):
            field = item[0]
            names += [f"{field}__gte", f"{field}__lt", f"{field}__exact"]
        elif isinstance(item, str):
            names += [f"{item}__exact", item]
        else:
            names.append(getattr(item, "parameter_name", "") or "x")
    return sorted(set(names))


ADMINS = app_admins()

hostile = st.one_of(
    st.text(st.characters(codec=None, exclude_categories=()), max_size=40),
    st.sampled_from(
        [
            "\x00",
            "a\x00b",
            "\ud800",
            ARABIC_ONE,
            f"{ARABIC_ONE} * * * *",
            "x" * 5000,
            "[" * 2000,
            "%00",
            "00000000-0000-0000-0000-00000000000\x00",
            "id:\x00",
            "9999-99-99",
            "-1",
            "1e309",
        ]
    ),
)


def query(params: dict[str, str]) -> str:
    """A query string of any text: lone surrogates as their UTF-8-ish bytes."""
    return "&".join(
        urllib.parse.quote(k.encode("utf-8", "surrogatepass"), safe="")
        + "="
        + urllib.parse.quote(v.encode("utf-8", "surrogatepass"), safe="")
        for k, v in params.items()
    )


@pytest.mark.parametrize(("prefix", "model_admin"), ADMINS, ids=[p for p, _ in ADMINS])
def test_no_list_page_answers_500_to_generated_query_parameters(
    admin_client, prefix, model_admin
):
    from django.urls import reverse

    url = reverse(f"{prefix}_changelist")
    names = parameters(model_admin)

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(st.dictionaries(st.sampled_from(names), hostile, min_size=1, max_size=3))
    def check(params):
        response = admin_client.get(f"{url}?{query(params)}")
        assert response.status_code in {200, 302, 400, 403}, (params, response)
        if any("\x00" in v or len(v) > 1000 for v in params.values()):
            assert response.status_code == 400
            assert b"X_INVALID_ARGUMENT" in response.content

    check()


@pytest.mark.parametrize(("prefix", "model_admin"), ADMINS, ids=[p for p, _ in ADMINS])
@pytest.mark.parametrize("object_id", ["a\x00b", "\x00", "x" * 2000])
def test_a_detail_id_holding_nul_or_too_long_is_a_400(
    admin_client, prefix, model_admin, object_id
):
    from django.urls import reverse

    base = reverse(f"{prefix}_changelist")
    quoted = urllib.parse.quote(object_id, safe="")
    response = admin_client.get(f"{base}{quoted}/change/")
    try:
        reverse(f"{prefix}_change", args=["x"])
    except NoReverseMatch:  # a page without details (the dashboard, the manifest)
        assert response.status_code == 404
        return
    assert response.status_code == 400
    assert b"X_INVALID_ARGUMENT: object_id=" in response.content


@pytest.mark.parametrize("key", ["q", "key", "queue", "tenant", "name", "fired_by"])
def test_a_nul_in_a_job_list_filter_names_the_parameter(admin_client, key):
    from django.urls import reverse

    url = reverse("admin:ultimate_jobs_job_changelist")
    response = admin_client.get(f"{url}?{key}=%00")
    assert response.status_code == 400
    assert response.content.decode().startswith(f"X_INVALID_ARGUMENT: {key}='\\x00'")


def schedule_form(admin_client, **fields):
    from django.urls import reverse

    data = {
        "key": "nested",
        "job": "testapp.noop",
        "input": "{}",
        "cron": "* * * * *",
        "tz": "UTC",
        "catch_up": "skip",
        "max_catch_up": "10",
        "description": "",
    }
    data.update(fields)
    return admin_client.post(reverse("admin:ultimate_jobs_schedule_add"), data)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"input": '{"a":' * 5000 + "1" + "}" * 5000}, "X_INPUT_TOO_DEEP"),
        ({"input": "[" * 100 + "]" * 100}, "X_INPUT_TOO_DEEP"),
        ({"input": '{"a": "\\u0000"}'}, "X_INVALID_PAYLOAD"),
        ({"cron": f"{ARABIC_ONE} * * * *"}, "X_INVALID_CRON"),
        ({"key": "a\x00b"}, "Null characters are not allowed"),
    ],
)
def test_the_schedule_form_refuses_bad_input_as_form_errors(admin_client, fields, says):
    response = schedule_form(admin_client, **fields)
    assert response.status_code == 200  # the form again, with its errors
    assert says in response.content.decode()
    assert not Schedule.objects.exists()


def test_the_property_test_covers_every_page_of_the_app():
    assert len(ADMINS) >= 13


KEYSET_PAGES = [
    m
    for m, a in admin.site._registry.items()
    if m._meta.app_label == "ultimate_jobs"
    and (getattr(a, "search_help_text", None) or "").startswith("A full id")
]


@pytest.mark.parametrize("model", KEYSET_PAGES, ids=lambda m: m._meta.model_name)
def test_the_list_pages_do_not_read_the_input_column(admin_client, model):
    """Issue 31: 100 inputs of ~1 MiB made the list take 5.6 s; no list shows an
    input, so no list query selects it (nor the result, progress or last error)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    noop.enqueue(key="deferred")
    with CaptureQueriesContext(connection) as queries:
        response = admin_client.get(
            reverse(f"admin:ultimate_jobs_{model._meta.model_name}_changelist")
        )
    assert response.status_code == 200
    table = model._meta.db_table
    reads = [
        q["sql"]
        for q in queries
        if q["sql"].startswith("SELECT") and f'FROM "{table}' in q["sql"]
    ]
    assert reads
    for sql in reads:
        for column in ("input", "result", "progress", "last_error"):
            assert f'"{table}"."{column}"' not in sql


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["job", "jobarchive"])
@pytest.mark.parametrize("key", ["created_from", "created_to"])
@pytest.mark.parametrize("value", ["0000-0-0", "2026-02-30", "2026-13-01T00:00"])
def test_an_impossible_date_in_a_list_filter_is_refused_not_a_500(
    admin_client, page, key, value
):
    """Found by the property test: ``created_from=0000-0-0`` is well formed, so
    Django's date parser raised ValueError ("year 0 is out of range") into a 500."""
    from django.urls import reverse

    url = reverse(f"admin:ultimate_jobs_{page}_changelist")
    response = admin_client.get(url, {key: value})
    assert response.status_code == 302 and "e=1" in response["Location"]
