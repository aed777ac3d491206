"""Redaction (B2, B5; issue 14): a planted secret reaches the body and no operator
surface.

The job ``signup`` carries three secrets: ``password`` and ``api_token`` (hidden by
the default REDACT key patterns) and ``card.number`` (a path the job declares with
``redact=``). Its body logs them, writes one in a progress note, returns one from a
step and raises an error quoting two. Every surface is then read and searched for the
secrets: the admin's list, detail and search (through the Django test client),
``manage.py jobs list/show`` with and without ``--json``, ``ultimate_jobs.api``,
every captured log record, the stored error text and an enqueue's own error.
"""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests.testapp import hardening_jobs
from tests.testapp.hardening_jobs import signup
from ultimate_jobs import REDACTED, InvalidJobPayload, api
from ultimate_jobs.models import Job, JobStep

pytestmark = pytest.mark.django_db

PASSWORD = "hunter2-pw-planted"
CARD = "4111-1111-1111-1111"
TOKEN = "tok-planted-api-9f8e"
SECRETS = (PASSWORD, CARD, TOKEN)


def assert_clean(surface: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} reached {surface}"


def plant() -> Any:
    return signup.enqueue(
        email="ada@example.com",
        org="acme",
        password=PASSWORD,
        card={"number": CARD, "exp": "12/30"},
        api_token=TOKEN,
    )


def test_a_planted_secret_reaches_the_body_and_no_surface(
    jobs, client, operator, caplog
):
    caplog.set_level(logging.DEBUG)
    hardening_jobs.seen_secrets.clear()
    answer = plant()
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    # The body received the real values.
    assert hardening_jobs.seen_secrets == [PASSWORD, CARD]
    job = Job.objects.get(pk=answer.id)
    assert job.input["password"] == PASSWORD  # stored as given: redaction is display
    # The step's output is stored as the body returned it, for its replay.
    output = JobStep.objects.get(job_id=answer.id).output
    assert output is not None
    assert output["api_token"] == TOKEN

    # The stored error text: the body quoted the card and the password.
    assert "was refused for" in job.last_error
    assert_clean("last_error (stored)", job.last_error)

    # ultimate_jobs.api
    shown = api.get(answer.id)
    assert shown["input"] == {
        "email": "ada@example.com",
        "org": "acme",
        "password": REDACTED,
        "card": {"number": REDACTED, "exp": "12/30"},
        "api_token": REDACTED,
    }
    assert REDACTED in shown["last_error"]
    assert shown["progress"]["note"] == f"charging {REDACTED}"
    assert_clean("api.get", json.dumps(shown))
    assert_clean("api.list_jobs", json.dumps(api.list_jobs(), default=str))

    # manage.py jobs
    for args in (
        ("list",),
        ("list", "--json"),
        ("show", str(answer.id)),
        ("show", str(answer.id), "--json"),
    ):
        out = io.StringIO()
        call_command("jobs", *args, stdout=out)
        assert_clean(f"manage.py jobs {' '.join(args)}", out.getvalue())
    out = io.StringIO()
    call_command("jobs", "show", str(answer.id), "--json", stdout=out)
    assert json.loads(out.getvalue())["input"]["card"]["number"] == REDACTED

    # The admin: list, detail (input, error, progress, step outputs), search.
    listing = client.get(reverse("admin:ultimate_jobs_job_changelist"))
    assert listing.status_code == 200
    assert str(answer.id)[:13] in listing.content.decode()
    assert_clean("the admin list", listing.content.decode())
    detail = client.get(reverse("admin:ultimate_jobs_job_change", args=[answer.id]))
    assert detail.status_code == 200
    html = detail.content.decode()
    assert html.count(REDACTED) >= 5  # input (3), error, progress, step output
    assert "ada@example.com" in html
    assert_clean("the admin detail", html)
    changelist = reverse("admin:ultimate_jobs_job_changelist")
    echoes = client.get(changelist, {"q": "zz-term"}).content.decode().count("zz-term")
    for secret in SECRETS:
        found = client.get(changelist, {"q": secret}).content.decode()
        assert str(answer.id)[:13] not in found, f"searching {secret!r} found the job"
        # The page repeats the term typed into the search box, and nothing more.
        assert found.count(secret) == echoes, secret

    # Every log record: messages, arguments, extra fields, tracebacks.
    logged = caplog.text + repr([r.__dict__ for r in caplog.records])
    assert "signing up ada@example.com with [redacted]" in caplog.text
    assert_clean("the logs", logged)


def test_an_enqueue_error_shows_no_redacted_value():
    with pytest.raises(InvalidJobPayload) as info:
        signup.enqueue(
            email="ada@example.com",
            org="acme",
            password=[PASSWORD],  # not a str: refused, naming the field
            card={"number": CARD},
            api_token=TOKEN,
        )
    assert info.value.field == "password"
    assert_clean("the enqueue error", str(info.value) + repr(info.value.value))
    with pytest.raises(InvalidJobPayload) as info:
        signup.enqueue(
            email="ada@example.com",
            org="acme",
            password=PASSWORD,
            card={"number": CARD + "\x00"},  # a NUL: refused by the bounds (B4)
            api_token=TOKEN,
        )
    assert info.value.field == "card.number"
    assert_clean("the bounds error", str(info.value))
    assert Job.objects.count() == 0


def test_the_redact_setting_adds_key_patterns(settings, jobs):
    settings.ULTIMATE_JOBS = {"REDACT": ["email", "PASSWORD"]}
    answer = plant()
    shown = api.get(answer.id)["input"]
    assert shown["email"] == REDACTED
    assert shown["password"] == REDACTED
    assert shown["api_token"] == TOKEN  # "token" is no longer a pattern
    assert shown["card"]["number"] == REDACTED  # the job's own path stays
