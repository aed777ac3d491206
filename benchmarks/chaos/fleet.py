"""The processes of a chaos run and the faults done to them.

``Fleet`` keeps 3 workers, 2 relays and 2 schedulers running against the private
PostgreSQL: a process that exits (killed, or stopped by a SIGTERM) is started again a
moment later, as a supervisor (systemd, Kubernetes) would. Every generation of every
process is kept: pid, start, end, how it ended, its log (JSON lines).

``inject`` does one fault and answers what it did; the outcome columns that need the
bodies' records (what a killed worker held, what ran again) are filled in later by
verify.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.private_pg import PrivateServer

REPO = Path(__file__).resolve().parents[2]
RESTART_AFTER = 0.5  # seconds before a supervisor starts an exited process again

ROLES = {
    # role: (count, manage.py command and arguments)
    # --force: the fleet is oversubscribed on purpose at --max-connections 20 (issue
    # 31); without it the workers past the budget would refuse to start.
    "worker": (3, ["jobs_worker", "--roles", "worker", "--queues", "chaos", "--force"]),
    "relay": (2, ["jobs_relay"]),
    "scheduler": (2, ["jobs_scheduler"]),
}


@dataclass
class Generation:
    """One process started for one slot of a role."""

    role: str
    slot: int
    proc: subprocess.Popen[bytes]
    log: Path
    started: float
    ended: float | None = None
    signal: str = ""  # the fault signal sent to it, if any
    signalled_at: float | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def name(self) -> str:
        return f"{self.role}-{self.slot}"


@dataclass
class Fault:
    """One injected fault and what became of it."""

    index: int
    kind: str  # SIGKILL, SIGTERM, fast restart, immediate restart, outage
    target: str  # a role slot, or "postgresql"
    at: float  # wall clock
    ended: float | None = None  # the process exited / the server answered again
    pid: int | None = None
    exit_code: int | None = None
    outcome: list[str] = field(default_factory=list)


class Fleet:
    """The role processes of one chaos run, each restarted when it exits."""

    def __init__(self, server: PrivateServer, run_dir: Path, env: dict[str, str]):
        self.server = server
        self.run_dir = run_dir
        self.env = env
        self.generations: list[Generation] = []
        self.current: dict[tuple[str, int], Generation] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, daemon=True)

    def start(self) -> None:
        for role, (count, _) in ROLES.items():
            for slot in range(count):
                self._spawn(role, slot)
        self._supervisor.start()

    def wait_ready(self, timeout: float) -> None:
        """Wait until every first process says it started (faults begin after)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                current = list(self.current.values())
            if all(_started(g) for g in current):
                return
            time.sleep(0.2)
        raise RuntimeError(f"the fleet did not start within {timeout:.0f} s")

    def _spawn(self, role: str, slot: int) -> Generation:
        command = ROLES[role][1]
        number = sum(1 for g in self.generations if (g.role, g.slot) == (role, slot))
        log = self.run_dir / "logs" / f"{role}-{slot}.{number}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, str(REPO / "manage.py"), *command],
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        generation = Generation(role, slot, proc, log, started=time.time())
        with self._lock:
            self.generations.append(generation)
            self.current[(role, slot)] = generation
        return generation

    def _supervise(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                current = list(self.current.values())
            for generation in current:
                if generation.proc.poll() is not None:
                    if generation.ended is None:
                        generation.ended = time.time()
                    if time.time() - generation.ended >= RESTART_AFTER:
                        self._spawn(generation.role, generation.slot)
            self._stopping.wait(0.1)

    def pick(self, role: str, index: int) -> Generation | None:
        """A live process of the role (slots in turn), or None."""
        count = ROLES[role][0]
        for offset in range(count):
            with self._lock:
                generation = self.current.get((role, (index + offset) % count))
            if generation is not None and generation.proc.poll() is None:
                return generation
        return None

    def signal(self, generation: Generation, signum: int) -> None:
        generation.signal = signal.Signals(signum).name
        generation.signalled_at = time.time()
        try:
            os.kill(generation.pid, signum)
        except ProcessLookupError:
            pass

    def stop(self, timeout: float) -> dict[str, int]:
        """SIGTERM every process (each drains), then SIGKILL what is left; answers
        the exit codes of the last generation of each slot."""
        self._stopping.set()
        if self._supervisor.is_alive():
            self._supervisor.join()
        with self._lock:
            last = dict(self.current)
        for generation in last.values():
            if generation.proc.poll() is None:
                generation.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        codes = {}
        for key, generation in last.items():
            try:
                code = generation.proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                generation.proc.kill()
                code = generation.proc.wait()
            generation.ended = generation.ended or time.time()
            codes[f"{key[0]}-{key[1]}"] = code
        return codes

    def by_pid(self) -> dict[int, Generation]:
        return {g.pid: g for g in self.generations}


def _started(generation: Generation) -> bool:
    text = generation.log.read_text(errors="replace") if generation.log.exists() else ""
    return f"jobs.{generation.role}.started" in text


def inject(fleet: Fleet, fault: Fault, *, outage: float, pick: int) -> None:
    """Do one fault now; fills ``fault`` with what happened at once."""
    fault.at = time.time()
    if fault.target == "postgresql":
        server = fleet.server
        if fault.kind == "outage":
            server.stop("fast")
            time.sleep(outage)
            server.start()
        else:
            server.restart("fast" if fault.kind == "fast restart" else "immediate")
        fault.ended = time.time()
        fault.outcome.append(f"down {fault.ended - fault.at:.1f} s")
        return
    generation = fleet.pick(fault.target, pick)
    if generation is None:
        fault.outcome.append("no live process to signal")
        return
    fault.target = generation.name
    fault.pid = generation.pid
    signum = signal.SIGKILL if fault.kind == "SIGKILL" else signal.SIGTERM
    fleet.signal(generation, signum)
    try:
        fault.exit_code = generation.proc.wait(60)
    except subprocess.TimeoutExpired:
        fault.outcome.append("still running 60 s after the signal")
        return
    fault.ended = time.time()
    if fault.kind == "SIGTERM":
        fault.outcome.append(
            f"exit {fault.exit_code} after {fault.ended - fault.at:.1f} s"
        )
    else:
        fault.outcome.append(f"exit {fault.exit_code}")


def plan(short: bool, seed: int) -> list[Fault]:
    """The faults of a run, in the order they are injected: every role killed and
    stopped, restarts of both kinds, and one outage in the middle."""
    import random

    rng = random.Random(seed)
    kills, terms, restarts = (2, 1, 1) if short else (9, 6, 3)
    faults = [
        (kind, role)
        for role in ROLES
        for kind, times in (("SIGKILL", kills), ("SIGTERM", terms))
        for _ in range(times)
    ]
    faults += [("fast restart", "postgresql")] * restarts
    faults += [("immediate restart", "postgresql")] * restarts
    rng.shuffle(faults)
    faults.insert(len(faults) // 2, ("outage", "postgresql"))
    return [
        Fault(index=i + 1, kind=kind, target=target, at=0.0)
        for i, (kind, target) in enumerate(faults)
    ]


def env_for(server: PrivateServer, records: Path, lease: float) -> dict[str, Any]:
    """The environment of every role process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_JOBS_")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "tests.chaosapp.settings",
            "DATABASE_URL": server.url,
            "PYTHONUNBUFFERED": "1",
            "UJ_CHAOS_RECORDS": str(records),
            "ULTIMATE_JOBS_LEASE": f"{lease}s",
            "ULTIMATE_JOBS_SCHEDULER_LEASE": f"{lease}s",
            "ULTIMATE_JOBS_CONCURRENCY": "4",
            "ULTIMATE_JOBS_DRAIN_TIMEOUT": "10s",
            "ULTIMATE_JOBS_IDLE_POLL_MAX": "1s",
            "ULTIMATE_JOBS_LOG_FORMAT": "json",
            # Q2: finished jobs move to the archive within the run, so the mover is under
            # the same faults and every check reads both tables.
            "ULTIMATE_JOBS_ARCHIVE_AFTER": "10s",
        }
    )
    return env
