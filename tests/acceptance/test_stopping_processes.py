"""Stopping a worker as a person does (issue 30): the first Ctrl-C says how long the
drain may take and that a second one stops now; a body that returns, rather than
raises, once its token is set during the drain is marked done and logged at WARNING."""

from __future__ import annotations

import re
import signal

import pytest

from tests.conftest import wait_for
from tests.testapp.jobs import returns_on_cancel
from tests.testapp.models import Record
from ultimate_jobs.models import Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def events(key: str) -> list[str]:
    return list(
        Record.objects.filter(key=key).order_by("id").values_list("event", flat=True)
    )


def test_ctrl_c_says_the_drain_and_a_body_returning_on_its_token_is_warned_of(
    start_worker,
):
    answer = returns_on_cancel.enqueue(key="quiet")
    worker = start_worker(
        "--roles", "worker", "--concurrency", "1", DRAIN_TIMEOUT="40s"
    )
    wait_for(lambda: events("quiet") == ["started"])
    worker.signal(signal.SIGINT)
    assert worker.wait() == 0
    log = worker.log()
    draining = next(
        line for line in log.splitlines() if "jobs.process.draining" in line
    )
    assert re.search(
        r"WARNING jobs\.process\.draining signal=SIGINT drain_up_to=40s ", draining
    )
    assert 'stop_now="press Ctrl-C again (or send a second SIGTERM)"' in draining
    warned = [line for line in log.splitlines() if "returned-while-draining" in line]
    assert len(warned) == 1 and "WARNING" in warned[0]
    assert f"job_id={answer.id}" in warned[0]
    assert "raise_if_cancelled" in warned[0]
    assert events("quiet") == ["started", "returned:DRAINING"]
    assert Job.objects.get(pk=answer.id).state == "done"
