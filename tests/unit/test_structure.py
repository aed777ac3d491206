"""Structural facts that keep the package honest: the public names, the SQL, the errors."""

from __future__ import annotations

import re
from importlib import resources

import pytest

import ultimate_jobs
from ultimate_jobs import sql
from ultimate_jobs.ground import exceptions
from ultimate_jobs.models import JobState


def test_all_is_complete_and_without_duplicates():
    # The order is ruff's (RUF022), checked by the lint step.
    assert len(set(ultimate_jobs.__all__)) == len(ultimate_jobs.__all__)
    for name in ultimate_jobs.__all__:
        assert getattr(ultimate_jobs, name) is not None
    public = {
        n for n in vars(ultimate_jobs) if not n.startswith("_") and n != "annotations"
    }
    modules = {
        n for n in public if type(getattr(ultimate_jobs, n)).__name__ == "module"
    }
    assert public - modules <= set(ultimate_jobs.__all__)


def test_every_error_has_a_stable_code_and_a_classification():
    errors = [
        obj
        for obj in vars(exceptions).values()
        if isinstance(obj, type)
        and issubclass(obj, exceptions.JobsError)
        and not obj.__name__.startswith("_")
    ]
    assert len(errors) >= 25
    for error in errors:
        assert re.fullmatch(r"X_[A-Z_]+", error.code), error
        assert error.classification in ("terminal", "retryable")
    required = {
        "JobDeclarationInvalid": "X_JOB_DECLARATION_INVALID",
        "IdempotencyRequired": "X_IDEMPOTENCY_REQUIRED",
        "JobTenantRequired": "X_JOB_TENANT_REQUIRED",
        "InvalidJobPayload": "X_INVALID_PAYLOAD",
        "JobDuplicate": "X_JOB_DUPLICATE",
        "JobNameTaken": "X_JOB_DUPLICATE",
        "StepDuplicate": "X_STEP_DUPLICATE",
        "JobAborted": "X_ABORTED",
        "JobTimeout": "X_JOB_TIMEOUT",
        "OutboxNoTx": "X_OUTBOX_NO_TX",
        "InvalidCron": "X_INVALID_CRON",
        "InvalidTimezone": "X_INVALID_TIMEZONE",
        "JobKeyBusy": "X_JOB_KEY_BUSY",
    }
    for name, code in required.items():
        assert getattr(exceptions, name).code == code


def test_sql_parses_name_cardinality_doc_and_params():
    text = "-- name: job_touch :exec\n-- Bump one job.\nUPDATE t SET n = %(n)s::int;\n"
    [query] = sql.parse("t.sql", text)
    assert (query.name, query.returns) == ("job_touch", "exec")
    assert (query.doc, set(query.params)) == ("Bump one job.", {"n"})


def test_native_form_numbers_each_parameter_once_in_first_use_order():
    text = (
        "-- name: job_touch :many\n-- Bump.\n"
        "SELECT %(b)s::int, %(a)s::int, %(b)s::int + 1;\n"
    )
    [query] = sql.parse("t.sql", text)
    assert query.native == "SELECT $1::int, $2::int, $1::int + 1;"
    assert query.order == ("b", "a")
    assert query.positional({"a": 1, "b": 2, "unused": 3}) == [2, 1]


def test_a_literal_percent_in_a_statement_is_refused():
    with pytest.raises(ValueError, match="literal '%'"):
        sql.parse("t.sql", "-- name: q :many\n-- Doc.\nSELECT 'a%%b';\n")


def test_every_shipped_statement_has_a_native_form():
    for query in sql.QUERIES.values():
        assert "%(" not in query.native, query.name
        assert set(query.order) == query.params, query.name


def test_state_literals_in_sql_are_job_states():
    pattern = re.compile(
        r"'(ready|delayed|running|suspended|done|failed|dead|cancelled|[a-z]+)'"
    )
    states = set(JobState.values)
    for query in sql.QUERIES.values():
        for literal in re.findall(r"state\s*(?:=|<>)\s*'(\w+)'", query.text):
            assert literal in states, (query.name, literal)
        for group in re.findall(r"state IN \(([^)]*)\)", query.text):
            for literal in re.findall(r"'(\w+)'", group):
                assert literal in states, (query.name, literal)
    assert pattern  # the pattern itself compiles


def test_every_placeholder_carries_a_cast_and_every_statement_a_doc():
    for query in sql.QUERIES.values():
        assert query.doc, query.name
        for match in re.finditer(r"%\((\w+)\)s(::)?", query.text):
            assert match.group(2) == "::", (query.name, match.group(1))
        assert "SELECT *" not in query.text.upper().replace("SELECT I.*", ""), (
            query.name
        )


def test_a_fragment_is_put_in_place_and_an_unknown_one_is_refused():
    text = (
        "-- fragment: picked\n-- Shared.\nSELECT id FROM t WHERE n = %(n)s::int;\n\n"
        "-- name: q :many\n-- Doc.\nWITH p AS ({{picked}}) SELECT id FROM p;\n"
    )
    [query] = sql.parse("t.sql", text)
    assert (
        query.text
        == "WITH p AS (SELECT id FROM t WHERE n = %(n)s::int) SELECT id FROM p;"
    )
    assert query.params == {"n"}
    with pytest.raises(ValueError, match="unknown fragment 'nope'"):
        sql.parse("t.sql", "-- name: q :many\n-- Doc.\nSELECT {{nope}};\n")


def test_a_fragment_may_include_fragments_but_never_itself():
    text = (
        "-- fragment: clock\n-- One clock.\n(SELECT now() AS now) AS clock\n\n"
        "-- fragment: due\n-- Due rows.\nSELECT id FROM t CROSS JOIN {{clock}}\n\n"
        "-- name: q :many\n-- Doc.\nWITH d AS ({{due}}) SELECT id FROM d;\n"
    )
    [query] = sql.parse("t.sql", text)
    assert query.text == (
        "WITH d AS (SELECT id FROM t CROSS JOIN (SELECT now() AS now) AS clock) "
        "SELECT id FROM d;"
    )
    looped = (
        "-- fragment: a\n-- Loop.\nSELECT {{a}}\n\n-- name: q :many\n-- D.\n{{a}};\n"
    )
    with pytest.raises(ValueError, match="fragment 'a' includes itself"):
        sql.parse("t.sql", looped)


def test_the_job_row_has_one_column_list_shared_by_every_write_path():
    """One row type, one column list: the fragment's arrays are JobRow's fields, and
    every statement that writes a job row (or stages one) reads that fragment."""
    from ultimate_jobs.enqueue.rows import FIELDS

    fragment = sql.QUERIES["job_enqueue"].text
    arrays = re.findall(
        r"%\((\w+)\)s::[a-z ]+\[\]", fragment.split("WITH ORDINALITY")[0]
    )
    assert tuple(arrays) == FIELDS
    [columns] = re.findall(r"WITH ORDINALITY AS i\(([^)]*)\)", fragment)
    assert tuple(c.strip() for c in columns.split(",")) == (*FIELDS, "ord")
    _, fragments = sql.split(
        resources.files(sql).joinpath("jobs.sql").read_text("utf-8")
    )
    shared = fragments["job_input"]
    for name in ("job_enqueue", "outbox_stage", "scheduler_fire"):
        assert shared in sql.QUERIES[name].text, name
