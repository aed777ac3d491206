"""The held runs: the one ledger a worker's parts share (W2, W4, W6).

A run is held from the claim that took it until its handler thread let it go. The
claimer reads the ledger to size the next claim (W2, L3), the heartbeat renews what it
holds (W4), the pool adds and removes runs, and the drain waits for it to empty (W6).

A claim's rows are held in one step (``add_all``) and wait until a handler thread
starts one (``start``): a row that waits (``Held.started`` False) has its lease renewed
like any held run's (W4). Once a drain began no row claimed beyond the free slots
(``Held.extra``, PREFETCH) starts, and the drain takes them back (``withholding``,
``withdraw``) to hand them back unrun (W6); a row claimed for a free slot still starts.
The ledger owns the one lock and the conditions they all use; nothing else locks.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ultimate_jobs.ground.cancel import CancelToken
from ultimate_jobs.sql.rows import ClaimedJob


@dataclass(eq=False, slots=True)
class Held:
    """A job this worker claimed and has not settled yet (slots: one is made per
    claimed row, N2)."""

    row: ClaimedJob
    token: CancelToken = field(default_factory=CancelToken)
    # When the last renewal landed (monotonic clock).
    renewed_at: float = field(default_factory=time.monotonic)
    settling: bool = False  # the body ended; its outcome is being written
    # Failed at its deadline while the body runs on, ignoring its token (S6): its
    # handler thread is lost capacity until the body returns.
    overrun: bool = False
    # A handler thread took it and runs its body; until then it is prefetched: it
    # waits in the ledger's queue, its lease renewed, never started after a drain began.
    started: bool = False
    # Claimed beyond the free slots (PREFETCH): the one kind a drain withholds (W6). A
    # row claimed for a free slot starts even after a drain began, as it always did.
    extra: bool = False


class Ledger:
    """The runs one worker holds, behind one lock; a condition says when one left."""

    def __init__(self) -> None:
        self._held: dict[uuid.UUID, Held] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a run left (wait_empty)
        self._watchers = 0  # threads in wait_empty: only they need ``_changed``
        # Read without the lock (a plain int under the GIL) by the claim loop's wake
        # test after each run; exact under the lock.
        self.held_count = 0
        self.waiting_count = 0
        # W6: set (without the lock: a signal handler sets it) when a drain began; no
        # waiting run starts from then on.
        self.withholding = False

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def __contains__(self, job_id: object) -> bool:
        with self._lock:
            return job_id in self._held

    def add(self, row: ClaimedJob) -> Held:
        [entry] = self.add_all((row,))
        return entry

    def add_all(
        self, rows: Sequence[ClaimedJob], slots: int | None = None
    ) -> list[Held]:
        """Hold a claim's rows, in one lock; they wait (not started) until a handler
        thread starts one (``start``). The rows past the first ``slots`` were claimed
        beyond the free slots (prefetched: ``extra``)."""
        entries = [Held(row) for row in rows]
        if slots is not None:
            for entry in entries[slots:]:
                entry.extra = True
        if not entries:
            return entries
        with self._lock:
            held = self._held
            for entry in entries:
                held[entry.row["id"]] = entry
            self.held_count = len(held)
            self.waiting_count += len(entries)
        return entries

    def start(self, entry: Held) -> bool:
        """A handler thread is about to run ``entry``'s body: False when it was
        prefetched and a drain began (``withholding``), or a drain withdrew it; then it
        must not run."""
        with self._lock:
            if entry.started or entry.row["id"] not in self._held:
                return False
            if entry.extra and self.withholding:
                return False
            entry.started = True
            self.waiting_count -= 1
            return True

    def withdraw(self, *, everything: bool = False) -> list[Held]:
        """Start no prefetched run from now on and take the waiting ones out of the
        ledger (W6): the drain hands them back. ``everything``: every run no handler
        started, for the drain's deadline. Answers them in claim order."""
        with self._lock:
            self.withholding = True
            entries = [
                entry
                for entry in self._held.values()
                if not entry.started and (everything or entry.extra)
            ]
            for entry in entries:
                del self._held[entry.row["id"]]
            self.held_count = len(self._held)
            self.waiting_count -= len(entries)
            if self._watchers:
                self._changed.notify_all()
            return entries

    def remove(self, entry: Held) -> None:
        with self._lock:
            held = self._held
            held.pop(entry.row["id"], None)
            self.held_count = len(held)
            if self._watchers:
                self._changed.notify_all()

    def entries(self) -> list[Held]:
        with self._lock:
            return list(self._held.values())

    def rows(self) -> list[ClaimedJob]:
        with self._lock:
            return [entry.row for entry in self._held.values()]

    def ids(self) -> list[uuid.UUID]:
        with self._lock:
            return list(self._held)

    def unsettled(self) -> list[Held]:
        """The runs whose bodies still run: the heartbeat renews these (W4)."""
        with self._lock:
            return [entry for entry in self._held.values() if not entry.settling]

    def overrun_ids(self) -> list[uuid.UUID]:
        """The jobs whose bodies ran past their deadline and still hold a thread."""
        with self._lock:
            return [job_id for job_id, entry in self._held.items() if entry.overrun]

    def live(self, entry: Held) -> bool:
        """Whether ``entry`` is held and its body still runs (not settling)."""
        with self._lock:
            return not entry.settling and entry.row["id"] in self._held

    def settling(self, entry: Held) -> None:
        """From here the heartbeat neither renews nor reports ``entry`` (W4)."""
        with self._lock:
            entry.settling = True

    def overran(self, entry: Held) -> None:
        with self._lock:
            entry.overrun = True

    def free(self, count: Callable[[list[ClaimedJob]], int]) -> int:
        """``count`` of the held rows, asked under the lock (a budget's free room)."""
        with self._lock:
            return count([entry.row for entry in self._held.values()])

    def notify(self) -> None:
        """Wake whoever waits for the ledger (a second signal ends the drain)."""
        with self._lock:
            self._changed.notify_all()

    def wait_empty(self, deadline: float, stop: threading.Event) -> list[Held]:
        """Wait until nothing is held, ``deadline`` (monotonic) passes or ``stop`` is
        set; answer the runs still unsettled then."""
        with self._lock:
            self._watchers += 1
            try:
                while self._held and not stop.is_set():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._changed.wait(min(remaining, 0.5))
            finally:
                self._watchers -= 1
            return [entry for entry in self._held.values() if not entry.settling]
