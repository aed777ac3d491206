"""One stop switch per process, shared by every loop in it (worker, relay, scheduler).

The first SIGTERM/SIGINT asks every loop to drain (``stopping``); a second one asks them
to give up the drain at once (``abandoning``). Loops wait on these events instead of
sleeping, so a stop is seen immediately.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

logger = logging.getLogger(__name__)

DRAIN = "DRAINING"  # a signal or stop(): drain, and cancel the runs in flight
FINISH = "FINISHED"  # --max-jobs reached: drain without cancelling anything


class Lifecycle:
    """The stop and abandon switches of one process."""

    def __init__(self, drain_timeout: float | None = None) -> None:
        # DRAIN_TIMEOUT, said when a signal starts the drain (None: not said)
        self.drain_timeout = drain_timeout
        self.stopping = threading.Event()
        self.abandoning = threading.Event()
        self.reason: str | None = None
        self._on_stop: list[Callable[[str], None]] = []
        self._on_abandon: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._signals = 0

    def on_stop(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(reason)`` once, when the process starts to stop."""
        self._on_stop.append(callback)

    def on_abandon(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once, when the drain is to end at once."""
        self._on_abandon.append(callback)

    def stop(self, reason: str = DRAIN) -> None:
        with self._lock:
            if self.stopping.is_set():
                return
            self.reason = reason
            self.stopping.set()
        for callback in self._on_stop:
            callback(reason)

    def abandon(self) -> None:
        self.stop()
        with self._lock:
            if self.abandoning.is_set():
                return
            self.abandoning.set()
        for callback in self._on_abandon:
            callback()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; answers True as soon as the process is stopping."""
        return self.stopping.wait(seconds)

    def install_signals(self) -> None:
        """Route SIGTERM and SIGINT here (main thread only; elsewhere a no-op)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        name = signal.Signals(signum).name
        if self._signals == 1:
            # Say how long the drain may take and how to cut it short (issue 30).
            said = {"signal": name}
            if self.drain_timeout is not None:
                said["drain_up_to"] = f"{self.drain_timeout:g}s"
            said["stop_now"] = "press Ctrl-C again (or send a second SIGTERM)"
            logger.warning("jobs.process.draining", extra=said)
            self._off_handler(self.stop, DRAIN)
        else:
            logger.error("jobs.process.drain-cut", extra={"signal": name})
            self._off_handler(self.abandon)

    @staticmethod
    def _off_handler(action: Callable[..., None], *args: str) -> None:
        """Run a stop and its callbacks in a thread of their own, not in the handler:
        a signal interrupts the main thread between any two bytecodes, even inside a
        lock the callbacks take (the worker's ledger, its wake event), and taking it
        again there would deadlock the main thread (the claim loop) for good."""
        threading.Thread(
            target=action, args=args, name="jobs-stop", daemon=True
        ).start()
