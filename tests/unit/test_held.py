"""The ledger of held runs the worker's parts share (W4, W6): what each part sees."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, cast

from ultimate_jobs.runtime.held import Ledger
from ultimate_jobs.sql.rows import ClaimedJob


def row(**fields: Any) -> ClaimedJob:
    return cast(ClaimedJob, {"id": uuid.uuid4(), "queue": "default", **fields})


def test_a_settling_run_is_held_but_no_longer_renewed_and_a_removed_one_is_gone():
    ledger = Ledger()
    running, settling = ledger.add(row()), ledger.add(row())
    ledger.settling(settling)
    assert ledger.unsettled() == [running]  # the heartbeat renews only this one
    assert ledger.ids() == [running.row["id"], settling.row["id"]]
    assert (ledger.live(running), ledger.live(settling)) == (True, False)
    ledger.remove(running)
    assert ledger.live(running) is False
    assert len(ledger) == 1 and running.row["id"] not in ledger


def test_overrun_runs_are_reported_and_free_counts_every_held_row():
    ledger = Ledger()
    late = ledger.add(row())
    ledger.add(row())
    ledger.overran(late)
    assert ledger.overrun_ids() == [late.row["id"]]
    assert ledger.free(lambda held: 4 - len(held)) == 2


def test_the_drain_waits_for_the_last_run_to_leave_and_answers_nothing_left():
    ledger = Ledger()
    entry = ledger.add(row())
    leaving = threading.Timer(0.05, ledger.remove, args=(entry,))
    leaving.start()
    left = ledger.wait_empty(time.monotonic() + 30, threading.Event())
    leaving.join()
    assert left == []


def test_the_drain_answers_the_unsettled_runs_at_its_deadline_or_on_a_second_signal():
    ledger = Ledger()
    stuck, settling = ledger.add(row()), ledger.add(row())
    ledger.settling(settling)
    assert ledger.wait_empty(time.monotonic() + 0.01, threading.Event()) == [stuck]
    abandon = threading.Event()
    abandon.set()
    assert ledger.wait_empty(time.monotonic() + 30, abandon) == [stuck]
