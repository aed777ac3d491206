"""purge() (F3): one step per target, one clock reading per pass, targets read per
attempt, two targets under one name refused before the first delete; the app's own
hourly purge fired by the scheduler, trimming its tables in bounded batches."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import pytest
from django.db import connection

from ultimate_jobs import (
    JobDeclarationInvalid,
    PurgeTargetDuplicate,
    PurgeTargetInvalid,
    Retry,
    purge,
)
from ultimate_jobs.conf import load_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.jobs import PURGE, purge_hourly, purge_tables
from ultimate_jobs.models import (
    Event,
    Job,
    JobStep,
    Lease,
    OutboxMessage,
    Worker,
)
from ultimate_jobs.retention.jobs import JobRetention
from ultimate_jobs.retention.purge import Target, delete_in_batches
from ultimate_jobs.testing.factories import (
    EventFactory,
    JobFactory,
    LeaseFactory,
    OutboxMessageFactory,
    WorkerFactory,
)

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


class Recorder:
    """Targets that record every call: the clock reading they got."""

    def __init__(self):
        self.calls: list[tuple[str, datetime]] = []
        self.fail_once: set[str] = set()

    def target(self, name, removed=0):
        def purge_expired(now):
            self.calls.append((name, now))
            if name in self.fail_once:
                self.fail_once.discard(name)
                raise RuntimeError(f"{name}: the store is down")
            return removed

        return Target(name, purge_expired)


def steps_of(job_id):
    return dict(
        JobStep.objects.filter(job_id=job_id)
        .values_list("name", "output")
        .order_by("id")
    )


def test_one_step_per_target_and_one_clock_reading_for_all_of_them(
    jobs, clean_registry
):
    """F3: the clock is read once per pass and handed to every target."""
    recorder = Recorder()
    sweep = purge(
        "test.sweep",
        lambda: [recorder.target("sessions", 3), recorder.target("tokens", 0)],
    )
    answer = sweep.enqueue()
    assert answer.id is not None
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    [(first, seen), (second, also)] = recorder.calls
    assert (first, second) == ("sessions", "tokens")
    assert seen == also  # one reading, not one per target
    steps = steps_of(answer.id)
    assert steps == {
        "clock": seen.isoformat(),
        "purge:sessions": 3,
        "purge:tokens": 0,
    }
    job = Job.objects.get(pk=answer.id)
    assert (job.idempotency_key, job.tenant_id) == ("test.sweep", None)


def test_a_retried_pass_resumes_at_its_target_with_the_same_clock_reading(
    jobs, clean_registry
):
    """F3: a failed attempt resumes at the target it stopped on, not at the first;
    the clock reading of the pass is kept with it."""
    recorder = Recorder()
    recorder.fail_once.add("tokens")
    sweep = purge(
        "test.resume",
        lambda: [recorder.target("sessions", 2), recorder.target("tokens", 5)],
        retry=Retry(attempts=3, delay="1m", jitter=False),
    )
    answer = sweep.enqueue()
    [first] = jobs.run()
    assert first.outcome == "retried"
    jobs.travel(minutes=5)
    [second] = jobs.run()
    assert second.outcome == "completed"
    names = [name for name, _ in recorder.calls]
    assert names == ["sessions", "tokens", "tokens"]  # sessions replayed from storage
    assert len({now for _, now in recorder.calls}) == 1  # the pass's one reading
    assert steps_of(answer.id)["purge:tokens"] == 5


def test_targets_are_read_at_every_attempt_never_at_import(jobs, clean_registry):
    reads = []

    def targets():
        reads.append(1)
        return [Target("t", lambda now: 0)]

    sweep = purge("test.lazy", targets)
    assert reads == []  # declaring reads nothing
    sweep.enqueue()
    jobs.run()
    assert reads == [1]
    with pytest.raises(JobDeclarationInvalid) as refused:
        purge("test.eager", [Target("t", lambda now: 0)])  # type: ignore[arg-type]
    assert refused.value.field == "targets"


def test_two_targets_under_one_name_are_refused_before_the_first_delete(
    jobs, clean_registry
):
    """F3: PurgeTargetDuplicate, terminal, before any target runs or any step is
    recorded (a second step of that name would fail with one table already empty)."""
    recorder = Recorder()
    sweep = purge(
        "test.twice",
        lambda: [
            recorder.target("sessions", 7),
            recorder.target("tokens"),
            recorder.target("sessions"),
        ],
    )
    answer = sweep.enqueue()
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    assert isinstance(attempt.error, PurgeTargetDuplicate)
    assert attempt.error.code == "X_PURGE_TARGET_DUPLICATE"
    assert attempt.error.field == "targets()[2].name"
    assert recorder.calls == []  # no target ran
    assert steps_of(answer.id) == {}  # not even the clock step
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.error_code) == ("dead", "X_PURGE_TARGET_DUPLICATE")


@pytest.mark.parametrize(
    ("answer", "field"),
    [
        ("sessions", "targets()"),
        ([object()], "targets()[0].name"),
        ([Target("", lambda now: 0)], "targets()[0].name"),
        ([Target("ok", lambda now: -1)], "ok.purge_expired()"),
        ([Target("ok", lambda now: True)], "ok.purge_expired()"),
    ],
)
def test_a_bad_target_or_count_is_refused_with_its_field(
    jobs, clean_registry, answer, field
):
    sweep = purge("test.bad", lambda: answer)
    sweep.enqueue()
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    assert isinstance(attempt.error, PurgeTargetInvalid)
    assert attempt.error.field == field


def test_delete_in_batches_asks_bounded_batches_up_to_its_cap_and_logs_what_is_left(
    caplog,
):
    asked = []
    backlog = [7, 5]  # two rules' rows

    def rule(index):
        def delete(batch):
            asked.append((index, batch))
            gone = min(batch, backlog[index])
            backlog[index] -= gone
            return gone

        return delete

    with caplog.at_level(logging.WARNING, logger="ultimate_jobs.retention.purge"):
        removed = delete_in_batches(
            "t", [rule(0), rule(1)], left=lambda: sum(backlog), batch=3, max_batches=4
        )
    # rule 0: 3, 3, 1 (short: next rule); rule 1: 3, then the cap.
    assert asked == [(0, 3), (0, 3), (0, 3), (1, 3)]
    assert (removed, backlog) == (10, [0, 2])
    [record] = [r for r in caplog.records if r.getMessage() == "jobs.purge.capped"]
    assert (record.target, record.removed, record.statements, record.left) == (
        "t",
        10,
        4,
        2,
    )


# -- the app's own hourly purge ------------------------------------------------------


def seed_tables(now):
    """One row to go and one to stay in every table the app's purge trims."""
    EventFactory.create(name="e", expires_at=now - timedelta(seconds=1))
    EventFactory.create(name="e", expires_at=now + DAY)
    for key, published in (
        ("old", now - 8 * DAY),  # past OUTBOX_RETENTION (7 days)
        ("recent", now - 6 * DAY),
        ("pending", None),  # never published: a relay is publishing it right now
    ):
        OutboxMessageFactory.create(
            name="testapp.noop",
            input={"key": key},
            idempotency_key=key,
            run_at=now - 9 * DAY,
            staged_at=now - 9 * DAY,
            staged_tx=1,
            claimed_at=None if published else now,
            claimed_by=None if published else "another-relay",
            published_at=published,
        )
    for key, age in (("old", 2 * DAY), ("recent", DAY / 2)):
        JobFactory.create(
            name="testapp.noop", done=True, idempotency_key=key, finished_at=now - age
        )
    for worker_id, expires in (
        ("gone", now - timedelta(seconds=1)),
        ("live", now + DAY),
    ):
        WorkerFactory.create(
            id=worker_id,
            host="h",
            pid=1,
            started_at=now - DAY,
            slots=1,
            heartbeat_at=now,
            expires_at=expires,
        )
    for slot, expires in ((0, now - timedelta(seconds=1)), (1, now + DAY)):
        LeaseFactory.create(
            key="job:x",
            slot=slot,
            name="x",
            holder=f"00000000-0000-0000-0000-00000000000{slot}",
            job_id=f"00000000-0000-0000-0000-0000000000a{slot}",
            acquired_at=now - DAY,
            expires_at=expires,
        )


def test_the_hourly_task_fires_the_purge_and_it_trims_every_app_table(jobs, caplog):
    """F3: the app ships an hourly purge that needs only the scheduler."""
    assert purge_hourly.definition.schedule.expression == "0 * * * *"
    assert purge_hourly.definition.schedule.tz == "UTC"
    jobs.run_scheduler()  # starts every task's watermark at the clock's time
    jobs.travel(hours=1)
    fires = jobs.run_scheduler()
    assert [fire.key for fire in fires] == ["task:ultimate_jobs.purge_hourly"]
    [pass_id] = fires[0].job_ids
    seed_tables(jobs.now())
    with caplog.at_level(logging.INFO, logger="ultimate_jobs.retention.purge"):
        [attempt] = jobs.run()
    assert (attempt.name, attempt.outcome) == (PURGE, "completed")
    removed = {k: v for k, v in steps_of(pass_id).items() if k != "clock"}
    assert removed == {
        "purge:events": 1,
        "purge:outbox": 1,
        "purge:jobs": 1,
        "purge:workers": 1,
        "purge:leases": 1,
    }
    assert Event.objects.count() == 1
    assert sorted(OutboxMessage.objects.values_list("idempotency_key", flat=True)) == [
        "pending",
        "recent",
    ]
    assert list(
        Job.objects.filter(name="testapp.noop").values_list(
            "idempotency_key", flat=True
        )
    ) == ["recent"]
    assert list(Worker.objects.values_list("id", flat=True)) == ["live"]
    assert list(Lease.objects.values_list("slot", flat=True)) == [1]
    job = Job.objects.get(pk=pass_id)
    assert job.idempotency_key.startswith(f"{PURGE}@")  # one job per occurrence
    [logged] = [r for r in caplog.records if r.getMessage() == "jobs.purge.pass"]
    assert (logged.purge, logged.job_id) == (PURGE, str(pass_id))
    assert logged.removed == {
        "events": 1,
        "outbox": 1,
        "jobs": 1,
        "workers": 1,
        "leases": 1,
    }


def test_the_app_purge_deletes_in_bounded_batches_up_to_its_cap(jobs, settings, caplog):
    """F3/F6: PURGE_BATCH rows per statement, PURGE_MAX_BATCHES statements per target
    per pass; the rest waits for the next pass, and the capped pass says what is
    left."""
    settings.ULTIMATE_JOBS = {"PURGE_BATCH": 2, "PURGE_MAX_BATCHES": 3}
    now = jobs.now()
    for i in range(10):
        JobFactory.create(
            name="testapp.noop",
            done=True,
            idempotency_key=f"k{i}",
            finished_at=now - 2 * DAY - timedelta(minutes=i),
        )
    old = Job.objects.filter(name="testapp.noop")
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs.retention.purge"):
        purge_tables.enqueue()
        jobs.run()
    assert old.count() == 4  # 3 statements of 2 rows
    [capped] = [r for r in caplog.records if r.getMessage() == "jobs.purge.capped"]
    assert (capped.target, capped.removed, capped.left) == ("jobs", 6, 4)
    assert list(
        old.order_by("finished_at").values_list("idempotency_key", flat=True)
    ) == [
        "k3",
        "k2",
        "k1",
        "k0",
    ]  # the oldest went first
    purge_tables.enqueue()
    jobs.run()
    assert old.count() == 0


class Counting:
    """A database that records what each statement answered, by name."""

    def __init__(self):
        self.inner = DjangoDatabase("default")
        self.answers = []

    def run(self, query, /, **params):
        rows = self.inner.run(query, **params)
        self.answers.append((query.name, params.get("batch"), rows))
        return rows


def test_no_statement_deletes_more_than_a_batch(jobs):
    now = jobs.now()
    for state in ("done", "dead"):
        for i in range(5):
            JobFactory.create(
                name="testapp.noop",
                **{state: True},
                idempotency_key=f"{state}{i}",
                finished_at=now - 40 * DAY,
            )
    db = Counting()
    target = JobRetention(
        db, settings=load_settings({"PURGE_BATCH": 3, "PURGE_MAX_BATCHES": 100})
    )
    assert target.purge_expired(now) == 10
    deletes = [
        (batch, rows[0]["deleted"])
        for name, batch, rows in db.answers
        if name == "job_purge_aged"
    ]
    assert deletes == [(3, 3), (3, 3), (3, 3), (3, 1)]


def test_the_purge_statements_read_their_indexes_on_a_large_table():
    """F6: each days rule reads its own (name, state, finished_at) range, and the
    outbox purge its published_at index (measured in docs/retention.md)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO ultimate_jobs_job (id, run_id, name, queue, priority, state,
                input, idempotency_key, attempt, max_attempts, run_at, created_at,
                finished_at)
            SELECT gen_random_uuid(), gen_random_uuid(), 'app.job' || mod(g, 20),
                   'default', 0, 'done', '{}', 'k' || g, 1, 1, now(), now(),
                   now() - make_interval(mins => g)
              FROM generate_series(1, 20000) AS g
            """
        )
        cursor.execute(
            """
            INSERT INTO ultimate_jobs_outbox (id, run_id, name, queue, priority, input,
                idempotency_key, max_attempts, run_at, staged_at, staged_tx, claims,
                published_at)
            SELECT gen_random_uuid(), gen_random_uuid(), 'app.job', 'default', 0, '{}',
                   'k' || g, 1, now(), now(), 1, 1, now() - make_interval(mins => g)
              FROM generate_series(1, 20000) AS g
            """
        )
        cursor.execute("ANALYZE ultimate_jobs_job")
        cursor.execute("ANALYZE ultimate_jobs_outbox")
        from ultimate_jobs.sql import QUERIES

        cursor.execute(
            "EXPLAIN " + QUERIES["job_purge_aged"].text,
            {
                "names": ["app.job1", "app.job2"],
                "states": ["done", "done"],
                "keep_seconds": [86400.0, 3 * 86400.0],
                "batch": 1000,
                "now": None,
            },
        )
        aged = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(
            "EXPLAIN " + QUERIES["outbox_purge_published"].text,
            {"keep_seconds": 86400.0, "batch": 1000, "now": None},
        )
        outbox = "\n".join(row[0] for row in cursor.fetchall())
    rules = aged.split("CTE gone")[0]  # the rows each rule picks
    assert "ultimate_jobs_job_name_age" in rules
    assert "Seq Scan" not in rules
    assert "ultimate_jobs_outbox_published" in outbox
    assert "Seq Scan on ultimate_jobs_outbox published" not in outbox
