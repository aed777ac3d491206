"""An enqueue outside a transaction is one prepared round trip on Django's connection
(issue 26): the hot door's ``uj_job_enqueue_one`` statement (``uj_job_enqueue`` for a
batch), binary parameters; inside a
transaction the statement joins it (the door sends no BEGIN), and dedupe (J2) and the
refusal of a held key answer exactly as through the cursor.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from tests.testapp.jobs import noop, touch
from ultimate_jobs import Enqueued, JobDuplicate
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def _prepared() -> dict[str, int]:
    """This connection's prepared statements of the hot door, by name: executions."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, generic_plans + custom_plans FROM pg_prepared_statements"
            " WHERE name LIKE 'uj_%'"
        )
        return dict(cursor.fetchall())


def test_one_by_one_is_the_prepared_statement_of_the_door(settings):
    settings.DEBUG = False
    first = touch.enqueue(key="a", tenant="acme")
    second = touch.enqueue(key="b", tenant="acme")
    again = touch.enqueue(key="a", tenant="acme")  # J2: the live key answers its job
    # One row: job_enqueue_one, scalar parameters, not the arrays' statement.
    assert _prepared() == {"uj_job_enqueue_one": 3, "uj_job_holders": 1}
    assert again == Enqueued(first.id, first.run_id, deduped=True)
    rows = {j.idempotency_key: (j.id, j.run_id) for j in Job.objects.all()}
    assert rows == {"a": (first.id, first.run_id), "b": (second.id, second.run_id)}


def test_enqueue_many_through_the_door_dedupes_in_order(settings):
    settings.DEBUG = False
    held = noop.enqueue(key="k1")
    answers = noop.enqueue_many([{"key": "k0"}, {"key": "k1"}, {"key": "k0"}])
    assert _prepared() == {
        "uj_job_enqueue_one": 1,
        "uj_job_enqueue_many": 1,  # enqueue_many's own statement (issue 26)
        "uj_job_holders": 1,
    }
    assert answers[1] == Enqueued(held.id, held.run_id, deduped=True)
    assert answers[2] == Enqueued(answers[0].id, answers[0].run_id, deduped=True)
    assert not answers[0].deduped
    assert Job.objects.count() == 2


def test_inside_a_transaction_the_statement_joins_it(settings):
    settings.DEBUG = False
    touch.enqueue(key="held", tenant="t")
    with pytest.raises(JobDuplicate):  # enqueue_many under on_conflict=error: atomic
        touch.using(on_conflict="error").enqueue_many(
            [{"key": "new", "tenant": "t"}, {"key": "held", "tenant": "t"}]
        )
    assert sorted(Job.objects.values_list("idempotency_key", flat=True)) == ["held"]
    # The atomic one took the cursor; its ROLLBACK made psycopg DEALLOCATE ALL.
    assert _prepared() == {}
    after = touch.enqueue(key="after", tenant="t")  # prepared again, and it runs
    assert _prepared() == {"uj_job_enqueue_one": 1}
    assert Job.objects.get(idempotency_key="after").id == after.id
    with transaction.atomic():  # O1: staged in the outbox, no job row yet
        touch.enqueue(key="staged", tenant="t")
    assert Job.objects.count() == 2
