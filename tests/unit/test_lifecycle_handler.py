"""A stop signal's callbacks run off the interrupted thread (W6, issue 26): the signal
handler interrupts the main thread (the claim loop) anywhere, even inside the worker's
ledger lock that the drain's callbacks take; running them there deadlocked it."""

from __future__ import annotations

import signal
import threading

from ultimate_jobs.runtime.lifecycle import DRAIN, Lifecycle


def test_a_signal_inside_a_lock_its_callbacks_take_does_not_deadlock():
    lifecycle = Lifecycle()
    lock = threading.Lock()  # the ledger's: not reentrant
    heard: list[tuple[str, bool]] = []
    done = threading.Event()

    def on_stop(reason: str) -> None:
        # Bounded, so the old behaviour (run here, in the handler) fails instead of
        # hanging the test run: the lock is this very thread's.
        if lock.acquire(timeout=2):
            lock.release()
            heard.append(
                (reason, threading.current_thread() is threading.main_thread())
            )
        done.set()

    lifecycle.on_stop(on_stop)
    with lock:  # the claim loop holds the lock when the signal lands
        lifecycle._on_signal(signal.SIGTERM, None)
        assert lifecycle.stopping.wait(5)  # the stop itself is not delayed
    assert done.wait(10)
    assert heard == [(DRAIN, False)]
