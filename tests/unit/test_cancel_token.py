"""The cancel token (W4) makes its Event only when something waits on it (N2)."""

from __future__ import annotations

import threading

from ultimate_jobs.ground.cancel import CANCELLED, DRAINING, CancelToken


def test_first_reason_wins_and_no_event_without_a_waiter() -> None:
    token = CancelToken()
    assert not token.is_set()
    assert token.cancel(DRAINING) is True
    assert token.cancel(CANCELLED) is False
    assert token.is_set()
    assert token.reason == DRAINING
    assert token._event is None  # nobody waited: no Event was made
    assert token.wait(0) is True


def test_wait_times_out_unset() -> None:
    token = CancelToken()
    assert token.wait(0.01) is False
    assert not token.is_set()


def test_a_waiting_thread_wakes_on_cancel() -> None:
    token = CancelToken()
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(token.wait(30)))
    waiter.start()
    while token._event is None:  # the waiter made the Event: it waits now
        waiter.join(0.001)
    token.cancel(CANCELLED)
    waiter.join(30)
    assert woke == [True]
    assert token.reason == CANCELLED
