"""The processes of a chaos run and the faults done to them.

``Fleet`` keeps 3 workers, 2 relays and 2 schedulers running against the private
PostgreSQL: a process that exits (killed, or stopped by a SIGTERM) is started again a
moment later, as a supervisor (systemd, Kubernetes) would. A slot the connection
budget refuses at its first start (X_CONNECTION_BUDGET, issue 31) is reported and not
started again; a restart it refuses is retried REFUSED_RETRY later. Every generation of every
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

REFUSED_RETRY = 5.0  # seconds before a slot whose restart the budget refused retries
REFUSED = "X_CONNECTION_BUDGET"  # what a process the connection budget refused says

ROLES = {
    # role: (count, manage.py command and arguments), in the order they start: one at
    # a time, each reading the room it starts in (issue 31: a process that would cross
    # the connection budget refuses to start; at --max-connections 20 the relays and
    # schedulers start first, so the budget refuses workers, which the others carry).
    "relay": (2, ["jobs_relay"]),
    "scheduler": (2, ["jobs_scheduler"]),
    "worker": (3, ["jobs_worker", "--roles", "worker", "--queues", "chaos"]),
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
    refused: bool = False  # the connection budget refused it (X_CONNECTION_BUDGET)

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

    def __init__(
        self,
        server: PrivateServer,
        run_dir: Path,
        env: dict[str, str],
        *,
        force: bool = False,
    ):
        self.server = server
        self.run_dir = run_dir
        self.env = env
        self.force = force  # every process started with --force (oversubscribed)
        self.refused_slots: set[tuple[str, int]] = set()  # refused at first start
        self.generations: list[Generation] = []
        self.current: dict[tuple[str, int], Generation] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, daemon=True)

    def start(self, timeout: float = 120) -> None:
        """Start every slot ONE AT A TIME, each once the previous one started or was
        refused by the connection budget (it reads the room it starts in); a slot
        refused at its first start is reported and not started again."""
        deadline = time.monotonic() + timeout
        for role, (count, _) in ROLES.items():
            for slot in range(count):
                generation = self._spawn(role, slot)
                while not _started(generation):
                    if generation.proc.poll() is not None:
                        generation.ended = time.time()
                        generation.refused = _refused(generation)
                        if generation.refused:
                            self.refused_slots.add((role, slot))
                        break  # otherwise the supervisor starts it again
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"the fleet did not start within {timeout:.0f} s"
                        )
                    time.sleep(0.1)
        self._supervisor.start()

    def wait_ready(self, timeout: float) -> None:
        """Wait until every first process says it started or was refused."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                current = [
                    g for k, g in self.current.items() if k not in self.refused_slots
                ]
            if all(_started(g) for g in current):
                return
            time.sleep(0.2)
        raise RuntimeError(f"the fleet did not start within {timeout:.0f} s")

    def serving(self) -> str:
        """The slots the budget let start, by role: "1 worker, 2 relays, ..."."""
        counts = {
            role: count - sum(1 for r, _ in self.refused_slots if r == role)
            for role, (count, _) in ROLES.items()
        }
        return ", ".join(
            f"{n} {role}{'s' if n != 1 else ''}" for role, n in counts.items()
        )

    def refusals(self) -> str:
        """What the connection budget refused: the slots never started, and how
        many later restarts it refused (each retried REFUSED_RETRY later)."""
        first = sorted(f"{role}-{slot}" for role, slot in self.refused_slots)
        later = sum(
            1
            for g in self.generations
            if g.refused and (g.role, g.slot) not in self.refused_slots
        )
        return f"{len(first)} never started ({', '.join(first) or 'none'}); {later} restarts refused"

    def _spawn(self, role: str, slot: int) -> Generation:
        command = ROLES[role][1] + (["--force"] if self.force else [])
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
            self.tend()
            self._stopping.wait(0.1)

    def tend(self) -> None:
        """One pass of the supervisor: start again what exited, a slot the budget
        refused at its first start never, a restart it refused REFUSED_RETRY later."""
        with self._lock:
            current = list(self.current.values())
        for generation in current:
            if (generation.role, generation.slot) in self.refused_slots:
                continue  # the budget has no room for it: it is not retried
            if generation.proc.poll() is not None:
                if generation.ended is None:
                    generation.ended = time.time()
                    generation.refused = _refused(generation)
                wait = REFUSED_RETRY if generation.refused else RESTART_AFTER
                if time.time() - generation.ended >= wait:
                    self._spawn(generation.role, generation.slot)

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


def _refused(generation: Generation) -> bool:
    text = generation.log.read_text(errors="replace") if generation.log.exists() else ""
    return REFUSED in text


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


def env_for(
    server: PrivateServer, records: Path, lease: float, *, sized: bool = False
) -> dict[str, Any]:
    """The environment of every role process; ``sized``: the small processes of the
    --max-connections phase (docs/operations.md, the connection arithmetic)."""
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
    if sized:
        # Issue 31: a worker then plans 3 (claim loop, heartbeat, acks) + 1 (pool) +
        # 2 (its bodies' ORM connections) = 6, a relay and a scheduler 1 each (no
        # LISTEN session). At max_connections 20 (14 usable) the two relays and the
        # two schedulers (4), the driver's enqueuing and settling sessions (2) and one
        # worker (6) fit with the session that reads the room, so a killed worker's
        # restart fits again; the budget refuses the other two workers.
        env |= {
            "ULTIMATE_JOBS_CONCURRENCY": "2",
            "ULTIMATE_JOBS_POOL_SIZE": "1",
            "ULTIMATE_JOBS_WAKE": "false",
        }
    return env
