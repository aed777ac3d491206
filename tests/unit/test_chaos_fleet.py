"""The chaos fleet under the connection budget (benchmarks/chaos/fleet.py, issue 31):
processes start one at a time; a slot the budget refuses at its first start
(X_CONNECTION_BUDGET) is reported and never started again, the others carry the work
and are restarted as before. Popen is a stand-in: no process, no database."""

from __future__ import annotations

from typing import Any

from benchmarks.chaos import fleet as fleet_module
from benchmarks.chaos.fleet import Fleet

REFUSAL = "CommandError: X_CONNECTION_BUDGET: max_connections=20: this process opens 6"


class Stand:
    """A process that says it started, or that the budget refused it."""

    spawned: list[str] = []

    def __init__(self, args: list[str], stdout: Any, **_: Any) -> None:
        command = args[2]
        self.pid = 1000 + len(Stand.spawned)
        Stand.spawned.append(command)
        refused = command == "jobs_worker"
        line = REFUSAL if refused else f"jobs.{command.removeprefix('jobs_')}.started"
        stdout.write(f"{line}\n".encode())
        self.returncode: int | None = 1 if refused else None

    def poll(self) -> int | None:
        return self.returncode

    def kill(self) -> None:
        self.returncode = -9


def test_refused_slots_are_reported_and_not_restarted(tmp_path, monkeypatch):
    Stand.spawned = []
    monkeypatch.setattr("benchmarks.chaos.fleet.subprocess.Popen", Stand)
    monkeypatch.setattr(
        fleet_module,
        "ROLES",
        {"relay": (1, ["jobs_relay"]), "worker": (2, ["jobs_worker"])},
    )
    (tmp_path / "logs").mkdir()
    fleet = Fleet(server=None, run_dir=tmp_path, env={})  # type: ignore[arg-type]
    monkeypatch.setattr(fleet._supervisor, "start", lambda: None)
    fleet.start()
    assert Stand.spawned == ["jobs_relay", "jobs_worker", "jobs_worker"]  # in order
    assert fleet.serving() == "1 relay, 0 workers"
    assert (
        fleet.refusals() == "2 never started (worker-0, worker-1); 0 restarts refused"
    )
    fleet.wait_ready(timeout=1)  # the refused slots are not waited for
    relay = fleet.current[("relay", 0)]
    relay.proc.kill()
    relay.ended = 0.0  # exited long ago: due for its restart
    fleet.tend()
    assert Stand.spawned == ["jobs_relay", "jobs_worker", "jobs_worker", "jobs_relay"]
