"""LISTEN/NOTIFY wake-up (N1): throttled announcements in the statements, a proven
listening session per process, re-dialled when it is killed."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

import pytest

from tests.conftest import wait_for
from tests.testapp.jobs import noop
from ultimate_jobs import api
from ultimate_jobs.conf import load_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.enqueue.rows import build_rows
from ultimate_jobs.enqueue.write import publish
from ultimate_jobs.models import Job
from ultimate_jobs.runtime.relay import Relay
from ultimate_jobs.runtime.wake import QUEUE_CHANNEL, Wake
from ultimate_jobs.runtime.worker import Worker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def listener(second_connection):
    second_connection.execute(f"LISTEN {QUEUE_CHANNEL}")

    def received():
        return [n.payload for n in second_connection.notifies(timeout=0.3)]

    return received


def test_enqueues_in_one_slot_announce_their_queue_once(listener):
    now = datetime.now(UTC)
    db = DjangoDatabase("default")
    for i in range(20):
        publish(db, build_rows(noop, [{"key": f"k{i}"}]), now=now)
    assert listener() == ["default"]


def test_a_claimed_job_does_not_silence_the_next_in_its_slot(listener):
    """N1: the slot throttle holds only while the earlier job is still unclaimed."""
    now = datetime.now(UTC)
    db = DjangoDatabase("default")
    publish(db, build_rows(noop, [{"key": "first"}]), now=now)
    assert listener() == ["default"]
    publish(db, build_rows(noop, [{"key": "second"}]), now=now)
    assert listener() == []  # the first is still ready: a woken worker finds both
    Job.objects.filter(state="ready").update(state="running")  # a worker took them
    publish(db, build_rows(noop, [{"key": "third"}]), now=now)
    assert listener() == ["default"]


def test_rows_due_later_deduped_keys_and_other_queues(listener):
    noop.using(delay="5s").enqueue(key="later")
    assert listener() == []
    noop.using(queue="mail").enqueue(key="a")
    noop.using(queue="reports").enqueue(key="b")
    assert sorted(listener()) == ["mail", "reports"]
    db = DjangoDatabase("default")
    far = datetime(2030, 1, 1, tzinfo=UTC)
    publish(
        db, build_rows(noop.using(queue="mail"), [{"key": "a"}]), now=far
    )  # deduped
    assert listener() == []


def test_requeue_promote_and_resume_announce_the_queue(listener, jobs):
    delayed = noop.using(queue="slow", delay="1h").enqueue(key="p")
    listener()
    api.promote(delayed.id)
    assert listener() == ["slow"]
    jobs.run(queues=["slow"])
    listener()
    api.retry(delayed.id)
    assert listener() == ["slow"]
    api.pause_queue("slow")
    api.resume_queue("slow")
    assert listener() == ["slow"]


def test_a_wake_proves_itself_and_dispatches_payloads(settings):
    wake = Wake("default")
    heard: list[str] = []
    wake.subscribe(QUEUE_CHANNEL, heard.append)
    wake.start()
    try:
        assert wake.proven.wait(5)
        noop.using(queue="mail").enqueue(key="x")
        wait_for(lambda: heard == ["mail"], timeout=5)
    finally:
        wake.stop()


class SilentWake(Wake):
    """A session whose probe never comes back (as behind a transaction pooler)."""

    def _send_probe(self, params, channel):
        self._probe = "__probe__:never"
        import time

        self._probe_deadline = time.monotonic() + 0.2


def test_an_unproven_wake_keeps_the_short_idle_ceiling(caplog):
    settings = load_settings({"IDLE_POLL_MAX": "2s", "WOKEN_IDLE_POLL_MAX": "5s"}, {})
    silent = SilentWake("default")
    silent.subscribe(QUEUE_CHANNEL, lambda queue: None)
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs.runtime.wake"):
        silent.start()
        wait_for(lambda: "jobs.wake.unverified" in caplog.messages, timeout=5)
    assert Worker(settings=settings, wake=silent).idle_ceiling() == 2.0
    assert Relay(settings=settings, wake=silent).idle_ceiling() == 2.0
    silent.stop()
    proven = Wake("default")
    proven.subscribe(QUEUE_CHANNEL, lambda queue: None)
    proven.start()
    try:
        assert proven.proven.wait(5)
        assert Worker(settings=settings, wake=proven).idle_ceiling() == 5.0
        assert Worker(settings=settings).idle_ceiling() == 2.0  # no wake at all
        # No outbox row is due later: a proven relay polls six times as rarely.
        assert Relay(settings=settings, wake=proven).idle_ceiling() == 30.0
        assert Relay(settings=settings).idle_ceiling() == 2.0
    finally:
        proven.stop()


def test_a_killed_listen_session_is_redialled(second_connection, caplog):
    wake = Wake("default")
    heard: list[str] = []
    got = threading.Event()

    def hear(queue: str) -> None:
        heard.append(queue)
        got.set()

    wake.subscribe(QUEUE_CHANNEL, hear)
    wake.start()
    try:
        assert wake.proven.wait(5)
        with caplog.at_level(logging.INFO, logger="ultimate_jobs.runtime.wake"):
            second_connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'ultimate_jobs wake' AND datname = current_database() AND pid <> pg_backend_pid()"
            )
            wait_for(lambda: "jobs.wake.lost" in caplog.messages, timeout=10)
            wait_for(lambda: caplog.messages.count("jobs.wake.live") >= 1, timeout=10)
        noop.using(queue="after").enqueue(key="y")
        assert got.wait(5)
        assert heard == ["after"]
    finally:
        wake.stop()
