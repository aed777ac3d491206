"""The job rows' arrays travel in PostgreSQL's binary format (H3, issue 13 item 7).

What the server reads back must be exactly what the rows hold: every column type of
the job_input fragment, NULLs, repeated values (encoded once), non-ASCII text, and the
Django cursor path (queries logged) that sends the same values as plain lists.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from importlib import resources

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ultimate_jobs import sql
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.enqueue.rows import FIELDS, Row, array_params
from ultimate_jobs.sql import Query, arrays, build, split


def _echo(fragment: str = "job_input") -> Query[dict[str, object]]:
    """A statement reading the arrays back through a job row fragment (job_input, or
    job_input_shared for job_enqueue_many)."""
    _, fragments = split(resources.files(sql).joinpath("jobs.sql").read_text("utf-8"))
    return build(
        "t.sql",
        ("echo", "many", "", f"SELECT * FROM ({{{{{fragment}}}}}) AS r ORDER BY ord"),
        fragments,
    )


def _rows() -> list[Row]:
    at = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    return [
        Row(
            id=uuid.uuid4(),
            run_id=uuid.uuid4(),
            name="jobs.é",
            queue="q",
            priority=-3,
            input='{"a":"snow ☃","b":[1,2.5,null]}',
            tenant_id=None,
            idempotency_key="k:1",
            max_attempts=2**31 - 1,
            run_at=at,
            delay=1.25,
            correlation_id="",
            enqueued_by="7",
            concurrency_key=None,
        ),
        Row(
            id=uuid.uuid4(),
            run_id=uuid.uuid4(),
            name="jobs.é",
            queue="q",
            priority=32767,
            input="{}",
            tenant_id="t" * 200,
            idempotency_key='k "quoted", {braced} \\ back',
            max_attempts=1,
            run_at=None,
            delay=0.0,
            correlation_id="c" * 255,
            enqueued_by="",
            concurrency_key="jobs.é:key",
        ),
    ]


def test_array_params_name_every_field_of_the_row_in_order():
    assert tuple(array_params(_rows())) == FIELDS


@pytest.mark.django_db
@pytest.mark.parametrize("logged", [False, True], ids=["native", "django-cursor"])
@pytest.mark.parametrize("shared", [False, True], ids=["job_input", "job_input_shared"])
def test_the_server_reads_every_column_back_as_the_rows_hold_it(logged, shared):
    """Both fragments; the rows share a name and a queue, which job_input_shared's
    arrays carry once (issue 26)."""
    rows = _rows()
    db = DjangoDatabase("default")
    echo = _echo("job_input_shared" if shared else "job_input")
    params = {"now": None, **array_params(rows, shared=shared)}
    if logged:
        with CaptureQueriesContext(connection):
            answered = db.run(echo, **params)
    else:
        answered = db.run(echo, **params)
    assert [r["ord"] for r in answered] == [1, 2]
    for row, back in zip(rows, answered, strict=True):
        for name in FIELDS:
            expected, got = getattr(row, name), back[name]
            if name == "input":  # jsonb: compare the values (Django loads it as text)
                expected, got = json.loads(expected), json.loads(str(got))
            assert got == expected, name
    assert answered[0]["due"] == rows[0].run_at


@pytest.mark.django_db
def test_an_instant_in_any_offset_python_allows_is_read_as_the_same_instant():
    """PostgreSQL reads no UTC offset past 15:59; Python allows up to 24 h."""
    far = timezone(timedelta(hours=23, minutes=59, seconds=30))
    at = datetime(2031, 1, 1, 0, 0, 1, 5, tzinfo=far)
    row = _rows()[0]._replace(run_at=at)
    [back] = DjangoDatabase("default").run(_echo(), now=None, **array_params([row]))
    assert back["run_at"] == at


def test_an_empty_array_and_a_column_of_nulls_pack():
    assert arrays.texts([]).data == b"\x00\x00\x00\x00" * 2 + b"\x00\x00\x00\x19"
    packed = arrays.texts([None, None])
    assert packed.data[4:8] == b"\x00\x00\x00\x01"  # has-null flag
    assert packed.values == [None, None]
    assert arrays.plain({"a": packed, "b": 1}) == {"a": [None, None], "b": 1}
    ids = [uuid.uuid4(), None]
    with_null = arrays.uuids(ids)
    assert with_null.data[4:8] == b"\x00\x00\x00\x01"
    assert with_null.data.endswith(b"\xff\xff\xff\xff")  # the NULL, last
    assert ids[0] is not None and ids[0].bytes in with_null.data


@pytest.mark.parametrize(
    ("pack", "value", "element"),
    [
        (
            arrays.texts,
            "jobs.é",
            lambda v: len(v.encode()).to_bytes(4, "big") + v.encode(),
        ),
        (
            arrays.smallints,
            -3,
            lambda v: b"\x00\x00\x00\x02" + v.to_bytes(2, "big", signed=True),
        ),
        (
            arrays.integers,
            7,
            lambda v: b"\x00\x00\x00\x04" + v.to_bytes(4, "big", signed=True),
        ),
        (arrays.texts, None, None),
        (arrays.jsonbs, None, None),
    ],
)
def test_a_column_of_one_value_packs_as_each_element_would(pack, value, element):
    """Issue 26: a value repeated down the whole column (the name, the queue, a NULL)
    is its bytes repeated; the same bytes as element by element."""
    packed = pack([value] * 3)
    null = value is None
    assert packed.data[:20] == (
        (1).to_bytes(4, "big")
        + int(null).to_bytes(4, "big")
        + packed.data[8:12]  # the element oid
        + (3).to_bytes(4, "big")
        + (1).to_bytes(4, "big")
    )
    one = b"\xff\xff\xff\xff" if null else element(value)
    assert packed.data[20:] == one * 3
    assert packed.values == [value] * 3
