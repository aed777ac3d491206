"""The scheduler on a driven clock (C3-C8): one leader, durable watermarks, one
statement per occurrence, catch-up after downtime, pauses, idle cost.

Each test drives ``Scheduler.run_once(now=...)``: the clock is the test's, the SQL is
the real one (lease, sync, fire) on the test's connection.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from tests.testapp.jobs import noop, touch
from ultimate_jobs import pause_task, resume_task, task, task_registry, trigger
from ultimate_jobs.conf import load_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.ground.exceptions import QueryError, TaskRunning
from ultimate_jobs.models import Job, LeaderLease, TaskWatermark
from ultimate_jobs.scheduling.scheduler import Scheduler
from ultimate_jobs.testing.factories import TaskWatermarkFactory

# The app's own hourly purge is a task too: hidden here, where each test counts the
# watermarks and jobs of the tasks it declares.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("without_app_purge")]

T0 = datetime(2025, 6, 2, 8, 0, 30, tzinfo=UTC)  # a Monday, half a minute past 08:00


@pytest.fixture
def declare():
    """Declare tasks on the fly; each answers one `noop` job keyed by the task name."""
    made: list[str] = []

    def make(cron, *, catch_up="skip", max_catch_up=10, tz="UTC", name=None):
        name = name or f"t{len(made)}"

        @task(cron=cron, tz=tz, catch_up=catch_up, max_catch_up=max_catch_up, name=name)
        def fire(occurrence):
            return [(noop, {"key": name})]

        made.append(name)
        return fire

    yield make
    for name in made:
        task_registry.unregister(name)


class Counting:
    """A database that counts the statements it runs, by name (and can fail some)."""

    def __init__(self):
        self.inner = DjangoDatabase("default")
        self.counts = {}
        self.failing = set()

    def run(self, query, /, **params):
        self.counts[query.name] = self.counts.get(query.name, 0) + 1
        if query.name in self.failing:
            raise QueryError(query.name, "connection refused (simulated)")
        return self.inner.run(query, **params)

    def total(self):
        return sum(self.counts.values())


def scheduler(holder="a", db=None, **settings):
    return Scheduler(
        db=db or DjangoDatabase("default"),
        holder=holder,
        settings=load_settings(settings),
    )


def fired(name):
    """The occurrences fired for a task, from the jobs' idempotency keys."""
    keys = Job.objects.filter(idempotency_key__startswith=f"{name}@").values_list(
        "idempotency_key", flat=True
    )
    return sorted(key.split("@", 1)[1] for key in keys)


def minutes(start, count, step=1):
    return [
        (start + timedelta(minutes=step * i)).strftime("%Y-%m-%dT%H:%MZ")
        for i in range(count)
    ]


def test_the_first_round_takes_the_lease_and_starts_the_watermark_without_firing(
    declare,
):
    declare("*/5 * * * *")
    assert scheduler().run_once(now=T0) == []
    lease = LeaderLease.objects.get()
    assert (lease.role, lease.holder, lease.term) == ("scheduler", "a", 1)
    assert lease.expires_at == T0 + timedelta(seconds=30)
    mark = TaskWatermark.objects.get()
    assert (mark.key, mark.spec, mark.last_occurrence) == (
        "task:t0",
        "*/5 * * * * UTC",
        T0,
    )
    assert Job.objects.count() == 0


def test_each_occurrence_fires_once_in_one_statement_with_the_occurrence_in_the_key(
    declare,
):
    declare("*/5 * * * *")
    db = Counting()
    s = scheduler(db=db)
    s.run_once(now=T0)
    [fire] = s.run_once(now=T0 + timedelta(minutes=5))
    assert fire.occurrence == datetime(2025, 6, 2, 8, 5, tzinfo=UTC)
    assert s.run_once(now=T0 + timedelta(minutes=5, seconds=20)) == []
    assert db.counts["scheduler_fire"] == 1  # jobs and watermark: one statement
    job = Job.objects.get()
    assert (job.idempotency_key, job.state, job.name) == (
        "t0@2025-06-02T08:05Z",
        "ready",
        "testapp.noop",
    )
    assert job.correlation_id == "task:t0@2025-06-02T08:05:00+00:00"
    assert job.enqueued_by == "scheduler a"
    mark = TaskWatermark.objects.get()
    assert (mark.last_occurrence, mark.last_fired_occurrence, mark.fires) == (
        fire.occurrence,
        fire.occurrence,
        1,
    )
    s.run_once(now=T0 + timedelta(minutes=10))
    assert fired("t0") == minutes(datetime(2025, 6, 2, 8, 5), 2, step=5)


def test_a_crash_after_the_fire_never_fires_the_occurrence_again(declare):
    """C4: the watermark moved with the jobs; a new process reads it back."""
    declare("*/5 * * * *")
    scheduler("a").run_once(now=T0)
    scheduler("a").run_once(now=T0 + timedelta(minutes=5))  # a fresh process each time
    # Another process after the lease lapsed: it syncs the watermark, fires nothing old.
    later = scheduler("b")
    assert later.run_once(now=T0 + timedelta(minutes=6)) == []
    assert later.leading
    assert fired("t0") == ["2025-06-02T08:05Z"]


@pytest.mark.parametrize(
    ("catch_up", "expected"),
    [
        ("skip", ["2025-06-02T11:00Z"]),  # the latest missed occurrence only
        ("run-once", ["2025-06-02T08:01Z"]),  # the earliest, once
    ],
)
def test_three_hours_down_skip_and_run_once_fire_once(declare, catch_up, expected):
    """C5: 180 missed occurrences; one fires, and the watermark passes the rest."""
    declare("* * * * *", catch_up=catch_up)
    scheduler("before").run_once(now=T0)  # then it is down for three hours
    s = scheduler("restarted")
    fires = s.run_once(now=T0 + timedelta(hours=3))
    assert [f.watermark for f in fires] == [datetime(2025, 6, 2, 11, 0, tzinfo=UTC)]
    # Bisection over the gap: a bounded number of cron evaluations, not 180 (this
    # round read the watermark back, so it counts from the first one: 2 + log2(180)
    # for the bisection, plus the first occurrence and the next one).
    assert s.firing.entries["task:t0"].schedule.evaluations <= 13
    assert fired("t0") == expected
    # Nothing more until the next real occurrence.
    assert s.run_once(now=T0 + timedelta(hours=3, seconds=20)) == []
    s.run_once(now=T0 + timedelta(hours=3, minutes=1))
    assert fired("t0") == sorted([*expected, "2025-06-02T11:01Z"])


def test_three_hours_down_run_all_fires_every_occurrence_at_most_max_catch_up_a_round(
    declare,
):
    declare("*/5 * * * *", catch_up="run-all", max_catch_up=10)
    scheduler("before").run_once(now=T0)  # then it is down for three hours
    s = scheduler("restarted")
    after = T0 + timedelta(hours=3)  # 36 occurrences missed: 08:05 ... 11:00
    rounds = [len(s.run_once(now=after + timedelta(seconds=i))) for i in range(5)]
    assert rounds == [10, 10, 10, 6, 0]
    assert fired("t0") == minutes(datetime(2025, 6, 2, 8, 5), 36, step=5)


def test_a_standby_fires_nothing_and_takes_over_when_the_lease_lapses(declare):
    declare("* * * * *")
    leader, standby = scheduler("a"), scheduler("b")
    leader.run_once(now=T0)
    assert standby.run_once(now=T0) == []
    assert (leader.leading, standby.leading) == (True, False)
    assert leader.run_once(now=T0 + timedelta(seconds=25)) == []  # renewed
    # The leader dies now: its lease runs to 08:01:25, and 08:01 passes meanwhile.
    assert standby.run_once(now=T0 + timedelta(seconds=40)) == []
    assert standby.run_once(now=T0 + timedelta(seconds=54)) == []
    assert not standby.leading
    [fire] = standby.run_once(now=T0 + timedelta(seconds=56))
    assert standby.leading
    assert fire.occurrence == datetime(2025, 6, 2, 8, 1, tzinfo=UTC)  # late, once
    assert LeaderLease.objects.get().term == 2
    assert standby.run_once(now=T0 + timedelta(seconds=58)) == []
    assert fired("t0") == ["2025-06-02T08:01Z"]


def test_a_leader_that_cannot_renew_stops_firing_before_its_lease_can_be_taken(
    declare, caplog
):
    """C3: two thirds of the TTL without a renewal and it steps down, a third of the
    TTL before the lease can pass to anyone."""
    declare("* * * * *")
    start = datetime(2025, 6, 2, 8, 0, 35, tzinfo=UTC)  # the lease ends at 08:01:05
    db = Counting()
    leader = scheduler("a", db=db)
    leader.run_once(now=start)
    db.failing.add("leader_acquire")
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs"):
        assert leader.run_once(now=start + timedelta(seconds=10)) == []
        # 08:01 is due, but 25 s (over 2/3 of the TTL) passed without a renewal.
        assert leader.run_once(now=start + timedelta(seconds=25)) == []
    assert "jobs.scheduler.lease-failed" in caplog.messages
    assert "jobs.scheduler.stepped-down" in caplog.messages
    assert db.counts.get("scheduler_fire", 0) == 0
    # The lease is still the leader's until 08:01:05: nobody else fires before that.
    other = scheduler("b")
    assert other.run_once(now=start + timedelta(seconds=29)) == []
    assert not other.leading
    [fire] = other.run_once(now=start + timedelta(seconds=31))
    assert fire.occurrence == datetime(2025, 6, 2, 8, 1, tzinfo=UTC)
    assert fired("t0") == ["2025-06-02T08:01Z"]


def test_a_demoted_leader_writes_nothing_even_if_it_still_believes_it_leads(declare):
    """The fire statement is fenced on the lease in SQL, not only on the local clock."""
    declare("*/5 * * * *")
    old = scheduler("a")
    old.run_once(now=T0)  # its lease ends at 08:01:00
    new = scheduler("b")
    assert new.run_once(now=T0 + timedelta(seconds=31)) == []
    assert new.leading
    # a's process was frozen and its clock says it still holds its lease; its
    # watermark is even still the database's, so only the lease fence can stop it.
    old.leadership._valid_until = float("inf")
    old.leadership._next_attempt = float("inf")
    assert old.run_once(now=T0 + timedelta(minutes=5)) == []
    assert not old.leading  # the statement answered not-leader
    assert fired("t0") == []
    [fire] = new.run_once(now=T0 + timedelta(minutes=5))
    assert fire.occurrence == datetime(2025, 6, 2, 8, 5, tzinfo=UTC)
    assert fired("t0") == ["2025-06-02T08:05Z"]


def test_a_stale_watermark_is_refused_and_read_back(declare):
    declare("* * * * *")
    s = scheduler()
    for second in (0, 10, 20):  # leading, renewed on time
        s.run_once(now=T0 + timedelta(seconds=second))
    # Another fire moved the watermark behind this leader's back.
    TaskWatermark.objects.update(last_occurrence=datetime(2025, 6, 2, 8, 1, tzinfo=UTC))
    assert s.run_once(now=T0 + timedelta(seconds=35)) == []  # refused: moved
    assert s.leading
    assert fired("t0") == []
    [fire] = s.run_once(now=T0 + timedelta(seconds=95))
    assert fire.occurrence == datetime(2025, 6, 2, 8, 2, tzinfo=UTC)


def test_idle_rounds_read_nothing_and_evaluate_no_cron_whatever_the_task_count(
    declare,
):
    """C8: while leading and idle, only the lease renewal reaches the database (every
    third of the TTL), for 3 tasks as for 40."""
    per_minute = []
    for count in (3, 40):
        for _ in range(count):
            declare("0 0 1 1 *")
        db = Counting()
        s = scheduler(f"idle{count}", db=db)
        s.run_once(now=T0)
        db.counts.clear()
        for entry in s.firing.entries.values():
            entry.schedule.evaluations = 0
        for second in range(1, 61):  # one round a second for a minute
            assert s.run_once(now=T0 + timedelta(seconds=second)) == []
        assert sum(e.schedule.evaluations for e in s.firing.entries.values()) == 0
        assert set(db.counts) == {"leader_acquire"}
        per_minute.append(db.total())
        LeaderLease.objects.all().delete()
    assert per_minute == [6, 6]


def test_trigger_fires_now_under_the_jobs_own_key_apart_from_the_occurrence(declare):
    handle = declare("*/5 * * * *")
    s = scheduler()
    s.run_once(now=T0)
    s.run_once(now=T0 + timedelta(minutes=5))
    # C7: the 08:05 occurrence's job is live, so a plain trigger would overlap it.
    with pytest.raises(TaskRunning):
        trigger(handle)
    [manual] = trigger(handle, force=True)
    again = trigger("t0", force=True)
    assert again[0].deduped and again[0].id == manual.id  # one live manual run
    keys = sorted(Job.objects.values_list("idempotency_key", flat=True))
    assert keys == ["t0", "t0@2025-06-02T08:05Z"]
    # The manual fire moved no watermark: the next occurrence still fires.
    s.run_once(now=T0 + timedelta(minutes=10))
    assert fired("t0") == ["2025-06-02T08:05Z", "2025-06-02T08:10Z"]


@pytest.mark.parametrize(
    ("catch_up", "after_resume"),
    [
        ("skip", ["2025-06-02T08:30Z"]),
        ("run-once", ["2025-06-02T08:10Z"]),
        ("run-all", minutes(datetime(2025, 6, 2, 8, 10), 5, step=5)),
    ],
)
def test_a_paused_task_does_not_fire_and_resumes_per_its_catch_up_policy(
    declare, catch_up, after_resume
):
    handle = declare("*/5 * * * *", catch_up=catch_up)
    s = scheduler()
    s.run_once(now=T0)
    s.run_once(now=T0 + timedelta(minutes=5))  # 08:05 fires
    assert pause_task(handle, by="ops") is True
    assert pause_task("t0") is False  # already paused
    for minute in (10, 15, 20, 25, 30):
        assert s.run_once(now=T0 + timedelta(minutes=minute)) == []
    assert fired("t0") == ["2025-06-02T08:05Z"]
    mark = TaskWatermark.objects.get()
    assert (mark.paused, mark.paused_by) == (True, "ops")
    assert mark.last_occurrence == datetime(2025, 6, 2, 8, 5, tzinfo=UTC)
    assert resume_task("t0") is True
    # No notification here: the due task is looked at again 5 s after its last refusal.
    assert s.run_once(now=T0 + timedelta(minutes=30, seconds=4)) == []
    s.run_once(now=T0 + timedelta(minutes=30, seconds=6))
    assert fired("t0") == ["2025-06-02T08:05Z", *after_resume]


def test_a_task_paused_before_any_scheduler_saw_it_does_not_fire(declare):
    declare("* * * * *")
    pause_task("t0")  # at the database's time: the row starts there
    start = datetime.now(UTC).replace(second=30, microsecond=0) + timedelta(minutes=1)
    s = scheduler()
    s.run_once(now=start)
    assert s.run_once(now=start + timedelta(minutes=3)) == []
    resume_task("t0")
    [fire] = s.run_once(now=start + timedelta(minutes=3, seconds=6))
    assert fire.occurrence == start.replace(second=0) + timedelta(minutes=3)


def test_a_changed_cron_restarts_the_watermark_instead_of_catching_up(declare):
    declare("0 * * * *", name="hourly")
    s = scheduler()
    s.run_once(now=T0)
    task_registry.unregister("hourly")
    declare("* * * * *", name="hourly")  # a new release: every minute
    s2 = scheduler("b")
    s2.run_once(now=T0 + timedelta(minutes=40))  # a's lease lapsed; b syncs
    mark = TaskWatermark.objects.get()
    assert (mark.spec, mark.last_occurrence) == (
        "* * * * * UTC",
        T0 + timedelta(minutes=40),
    )
    assert fired("hourly") == []
    s2.run_once(now=T0 + timedelta(minutes=41))
    assert fired("hourly") == ["2025-06-02T08:41Z"]


def test_a_failing_task_function_is_logged_and_retried_without_moving_on(
    declare, caplog
):
    calls = []

    @task(cron="*/5 * * * *", tz="UTC", name="broken")
    def broken(occurrence):
        calls.append(occurrence)
        if len(calls) == 1:
            raise RuntimeError("the task's own bug")
        return [(touch, {"key": "b", "tenant": "acme"})]

    try:
        s = scheduler()
        s.run_once(now=T0)
        with caplog.at_level(logging.ERROR, logger="ultimate_jobs"):
            assert s.run_once(now=T0 + timedelta(minutes=5)) == []
        assert "jobs.scheduler.task-failed" in caplog.messages
        assert s.run_once(now=T0 + timedelta(minutes=5, seconds=1)) == []  # backoff
        [fire] = s.run_once(now=T0 + timedelta(minutes=5, seconds=3))
        assert fire.occurrence == datetime(2025, 6, 2, 8, 5, tzinfo=UTC)
        assert Job.objects.get().tenant_id == "acme"
    finally:
        task_registry.unregister("broken")


def test_the_jobs_fixture_fires_tasks_on_its_clock_and_runs_their_jobs(jobs):
    @task(cron="0 9 * * mon-fri", tz="Europe/Paris", name="digest")
    def digest(occurrence):
        return [(touch, {"key": f"digest:{occurrence:%a}", "tenant": "acme"})]

    try:
        jobs.run_scheduler()  # starts the watermark at the clock's time
        jobs.travel(days=7)
        [fire] = jobs.run_scheduler()  # skip: the latest weekday 09:00 only
        assert fire.occurrence.astimezone(digest.definition.schedule.zone).hour == 9
        [attempt] = jobs.run()
        assert attempt.outcome == "completed"
    finally:
        task_registry.unregister("digest")


def test_a_run_all_backlog_waits_a_full_tick_between_rounds(declare):
    """C5: never a burst beyond max_catch_up per tick, on the real clock too."""
    declare("* * * * *", catch_up="run-all", max_catch_up=10)
    now = datetime.now(UTC)
    TaskWatermarkFactory.create(name="t0", last_occurrence=now - timedelta(hours=3))
    s = Scheduler(
        db=DjangoDatabase("default"), holder="real", settings=load_settings({})
    )
    assert len(s.run_once()) == 10
    assert s._sleep_for() == 1.0  # SCHEDULER_TICK, although more is due already


def test_a_clean_stop_hands_the_lease_back_and_a_standby_takes_it_at_once(declare):
    declare("* * * * *")
    leader, standby = scheduler("a"), scheduler("b")
    leader.run_once(now=T0)
    assert standby.run_once(now=T0 + timedelta(seconds=1)) == []
    assert leader.leadership.release(T0 + timedelta(seconds=2)) is True
    assert not leader.leading
    standby.leadership.ask_now()  # what the 'lease' notification does
    standby.run_once(now=T0 + timedelta(seconds=3))  # 27 s before the old expiry
    assert standby.leading
    lease = LeaderLease.objects.get()
    assert (lease.holder, lease.term) == ("b", 2)
    assert leader.leadership.release(T0 + timedelta(seconds=4)) is False


# -- C9: occurrences are decided on the database's clock, not the host's ----------------


def database_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")  # the test's transaction: one instant throughout
        return cursor.fetchone()[0]


def skewed(minutes_ahead=35, holder="a"):
    """A scheduler on the database's clock whose host clock runs ``minutes_ahead``."""
    return Scheduler(
        db=DjangoDatabase("default"),
        holder=holder,
        settings=load_settings({}),
        wall=lambda: datetime.now(UTC) + timedelta(minutes=minutes_ahead),
    )


def rewind_watermark(name, by):
    TaskWatermark.objects.filter(key=f"task:{name}").update(
        last_occurrence=database_now() - by
    )


@pytest.mark.parametrize("catch_up", ["skip", "run-all"])
def test_a_leader_whose_clock_runs_fast_neither_fires_early_nor_skips(
    declare, catch_up
):
    """The 14:30-at-14:03 incident: a host clock 35 minutes fast must not fire a future
    occurrence nor move the watermark past occurrences that have not come yet."""
    declare("* * * * *", catch_up=catch_up, max_catch_up=60)
    db_now = database_now()
    assert skewed().run_once() == []  # takes the lease; the watermark starts at db now
    assert TaskWatermark.objects.get().last_occurrence == db_now
    rewind_watermark("t0", timedelta(minutes=5))  # five occurrences are due
    fires = skewed().run_once()
    assert fires, "the due occurrences fire"
    assert max(f.occurrence for f in fires) <= db_now  # none early
    mark = TaskWatermark.objects.get()
    assert mark.last_occurrence <= db_now  # and none in the future is skipped
    latest = db_now.replace(second=0, microsecond=0)
    if catch_up == "run-all":
        start = latest - timedelta(minutes=4)
        assert fired("t0") == minutes(start.replace(tzinfo=None), 5)
    else:
        assert fired("t0") == [latest.strftime("%Y-%m-%dT%H:%MZ")]


def test_the_fire_statement_refuses_a_watermark_past_the_database_clock(
    declare, caplog
):
    """C9 in SQL: a leader whose clock reading went stale (the host clock jumped after
    the lease renewal measured it) writes nothing early, then fires on time."""
    declare("* * * * *")
    s = skewed()
    s.run_once()  # takes the lease: the offset is measured
    rewind_watermark("t0", timedelta(minutes=2))
    s.firing.loaded = False  # read the rewound watermark at the next round
    s.leadership.clock_offset = timedelta(0)  # believes its host clock is right
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs.scheduling.firing"):
        assert s.run_once() == []
    assert "jobs.scheduler.clock-ahead" in caplog.messages
    assert Job.objects.count() == 0
    assert TaskWatermark.objects.get().last_occurrence < database_now()
    [fire] = s.run_once()  # the answer corrected the offset
    assert fire.occurrence <= database_now()


def test_a_failed_release_at_shutdown_leaves_the_lease_to_lapse(declare, caplog):
    """C3: the stop's leader_release fails (the server is gone): the process still
    stops, logs jobs.scheduler.release-failed, and the row is left as it was, so a
    standby takes over at the expiry instead of at once, and fires each minute once."""
    declare("* * * * *")
    db = Counting()
    leader, standby = scheduler("a", db=db), scheduler("b")
    leader.run_once(now=T0)
    db.failing.add("leader_release")
    leader.lifecycle.stop()
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs"):
        assert leader.run() == 0  # the loop ends at once; the release is attempted
    assert db.counts["leader_release"] == 1
    assert "jobs.scheduler.release-failed" in caplog.messages
    assert not leader.leading
    lease = LeaderLease.objects.get()
    assert (lease.holder, lease.term) == ("a", 1)  # untouched
    standby.leadership.ask_now()
    assert standby.run_once(now=T0 + timedelta(seconds=3)) == []  # not released
    assert not standby.leading
    [fire] = standby.run_once(now=T0 + timedelta(seconds=31))  # the lease lapsed
    assert standby.leading
    assert fire.occurrence == datetime(2025, 6, 2, 8, 1, tzinfo=UTC)
    assert (LeaderLease.objects.get().holder, LeaderLease.objects.get().term) == (
        "b",
        2,
    )
    assert fired("t0") == ["2025-06-02T08:01Z"]
