"""The outbox's rules that need no database: what counts as the caller's transaction,
the wake channel, the fences written into the statements, the relay role."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from ultimate_jobs import sql
from ultimate_jobs.enqueue.outbox import OUTBOX_CHANNEL, in_transaction
from ultimate_jobs.enqueue.rows import Row as JobRow
from ultimate_jobs.management.roles import DEFAULT_ROLES, ROLES


def block(*, from_testcase: bool) -> SimpleNamespace:
    return SimpleNamespace(_from_testcase=from_testcase)


def test_a_test_cases_atomic_blocks_are_not_the_callers_transaction():
    def conn(*blocks, connected=True, autocommit=False):
        return SimpleNamespace(
            atomic_blocks=list(blocks),
            connection=object() if connected else None,
            autocommit=autocommit,
        )

    assert not in_transaction(conn(block(from_testcase=True)))
    assert in_transaction(conn(block(from_testcase=True), block(from_testcase=False)))
    assert in_transaction(conn(block(from_testcase=False)))
    # No atomic block: a manual transaction (set_autocommit(False)) counts ...
    assert in_transaction(conn(autocommit=False))
    assert not in_transaction(conn(autocommit=True))
    # ... and a connection never opened holds none (and is not opened to ask).
    assert not in_transaction(conn(connected=False))


def test_staging_announces_the_channel_the_relay_listens_on():
    assert f"pg_notify('{OUTBOX_CHANNEL}', '')" in sql.QUERIES["outbox_stage"].text


def test_mark_and_release_are_fenced_on_the_claimant_and_skip_published_rows():
    for name in ("outbox_mark_published", "outbox_release"):
        text = sql.QUERIES[name].text
        assert "outbox.claimed_by = %(claimed_by)s::text" in text, name
        assert "outbox.published_at IS NULL" in text, name


def test_the_claim_is_ordered_and_leased():
    text = sql.QUERIES["outbox_claim"].text
    assert "ORDER BY outbox.staged_at, outbox.id" in text
    assert "FOR UPDATE SKIP LOCKED" in text
    assert "ORDER BY claimed.staged_at, claimed.id" in text  # publish order


def test_a_claimed_row_is_published_under_its_own_ids_with_its_resolved_run_at():
    job_id, run_id = uuid.uuid4(), uuid.uuid4()
    row = {
        "id": job_id,
        "run_id": run_id,
        "name": "app.x",
        "queue": "default",
        "priority": 3,
        "input": "{}",
        "tenant_id": None,
        "idempotency_key": "k",
        "max_attempts": 2,
        "run_at": "2030-01-01T00:00:00Z",
        "correlation_id": "c",
        "enqueued_by": "",
        "concurrency_key": None,
    }
    published = JobRow.from_record(row)
    assert (published.id, published.run_id, published.run_at, published.delay) == (
        job_id,
        run_id,
        "2030-01-01T00:00:00Z",
        0.0,
    )


def test_jobs_worker_runs_the_relay_by_default():
    assert "relay" in ROLES
    assert DEFAULT_ROLES == ("worker", "scheduler", "relay")  # W1: all three roles
