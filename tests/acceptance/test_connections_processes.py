"""The connections one worker process holds (issue 18, Q3; docs/scaling.md): counted
in pg_stat_activity by the process's own sockets (TCP, or a Unix socket as to the
embedded PostgreSQL), so nothing else is mistaken for it."""

from __future__ import annotations

import re
import subprocess
from collections import Counter

import psutil
import pytest

from tests.conftest import WorkerProcess, wait_for
from tests.testapp.jobs import capped, terminal, touch
from ultimate_jobs.models import Job

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.processes,
    # Behind PgBouncer the process's sockets lead to the pooler, not to sessions.
    pytest.mark.needs_session,
]


def unix_peers(pid: int) -> list[int]:
    """The pids at the other end of process ``pid``'s connected Unix sockets (the
    embedded PostgreSQL, like any server on a socket directory, is reached that way;
    psutil names neither end of such a socket, ``ss`` reads both from the kernel)."""
    listing = subprocess.run(
        ["ss", "-xpnH"], capture_output=True, text=True, check=True
    ).stdout
    inode_pid: dict[str, int] = {}
    peer_of: dict[str, str] = {}
    for line in listing.splitlines():
        fields = line.split()
        owner = re.search(r"pid=(\d+)", line)
        if len(fields) < 8 or fields[1] != "ESTAB" or owner is None:
            continue
        local, peer = fields[5], fields[7]
        inode_pid[local] = int(owner.group(1))
        peer_of[local] = peer
    return [
        inode_pid[peer]
        for local, peer in peer_of.items()
        if inode_pid[local] == pid and peer in inode_pid
    ]


def held(pid: int, second_connection) -> Counter[str]:
    """The package's server sessions whose client socket belongs to process ``pid``,
    counted by purpose (the second word of their application_name): TCP sessions by
    the client's port, Unix-socket sessions by the server process at the other end.
    The sessions of the job bodies' own ORM queries (Django's connections) are the
    app's, not counted.
    """
    ports = [
        c.laddr.port
        for c in psutil.Process(pid).net_connections(kind="tcp")
        if c.raddr and c.status == psutil.CONN_ESTABLISHED
    ]
    rows = second_connection.execute(
        "SELECT application_name FROM pg_stat_activity"
        " WHERE (client_port = ANY(%s) OR (client_port = -1 AND pid = ANY(%s)))"
        " AND application_name LIKE 'ultimate_jobs %%'",
        [ports, unix_peers(pid)],
    ).fetchall()
    return Counter(name.split(" ")[1] for (name,) in rows)


def finished(ids) -> bool:
    states = Job.objects.filter(pk__in=ids).values_list("state", flat=True)
    return all(state in {"done", "dead"} for state in states)


@pytest.mark.parametrize(
    ("args", "settings", "expected"),
    [
        # The worker role alone: claim loop, heartbeat, batched acks, POOL_SIZE
        # handler connections (fewer handler threads than that: one each), LISTEN.
        (
            ("--roles", "worker", "--concurrency", "4"),
            {"POOL_SIZE": "2"},
            {"worker": 1, "heartbeat": 1, "acks": 1, "pool": 2, "wake": 1},
        ),
        (
            ("--roles", "worker", "--concurrency", "2"),
            {},  # POOL_SIZE 4 by default, at most CONCURRENCY opened
            {"worker": 1, "heartbeat": 1, "acks": 1, "pool": 2, "wake": 1},
        ),
        # The default roles add the scheduler's and the relay's connection.
        (
            ("--concurrency", "8"),
            {},
            {
                "worker": 1,
                "heartbeat": 1,
                "acks": 1,
                "pool": 4,
                "wake": 1,
                "scheduler": 1,
                "relay": 1,
            },
        ),
        # Poll-only (WAKE=False, as behind PgBouncer): no LISTEN session.
        (
            ("--roles", "worker", "--concurrency", "8"),
            {"WAKE": "false", "POOL_SIZE": "3"},
            {"worker": 1, "heartbeat": 1, "acks": 1, "pool": 3},
        ),
    ],
    ids=["pool-2-of-4-threads", "pool-capped-by-threads", "default-roles", "poll-only"],
)
def test_a_worker_process_holds_exactly_the_documented_connections(
    start_worker, second_connection, args, settings, expected
):
    """docs/scaling.md's count holds from the start and while jobs write through the
    handlers' pool (dead letters, slot releases), however many threads share it."""
    worker = start_worker(*args, **settings)
    if settings.get("WAKE") != "false":
        # The wake proves LISTEN with a probe sent on a connection of a moment; once
        # the probe came back that connection is gone.
        worker.wait_log("jobs.wake.live")
    wait_for(
        lambda: held(worker.pid, second_connection) == expected,
        message=f"the worker to hold {expected}",
    )
    ids = [terminal.enqueue(key=f"t{i}").id for i in range(6)]
    ids += [capped.enqueue(key=f"c{i}").id for i in range(6)]
    ids += [touch.enqueue(key=f"d{i}", tenant="acme").id for i in range(6)]
    peak: Counter[str] = Counter()

    def sampled_until_finished() -> bool:
        peak.update(held(worker.pid, second_connection) - peak)
        return finished(ids)

    wait_for(sampled_until_finished, message="every job to finish")
    assert Job.objects.filter(pk__in=ids, state="dead").count() == 6
    assert dict(peak) == expected
    assert held(worker.pid, second_connection) == expected


@pytest.mark.parametrize(
    ("command", "started", "expected"),
    [
        ("jobs_relay", "jobs.relay.started", {"relay": 1, "wake": 1}),
        ("jobs_scheduler", "jobs.scheduler.started", {"scheduler": 1, "wake": 1}),
    ],
)
def test_the_relay_and_the_scheduler_alone_hold_two_connections(
    worker_env, tmp_path, second_connection, command, started, expected
):
    """docs/scaling.md: a process of one other role holds its loop's connection and the
    LISTEN session."""
    process = WorkerProcess([], worker_env(), tmp_path / f"{command}.log", command)
    try:
        process.wait_log(started)
        process.wait_log("jobs.wake.live")
        wait_for(
            lambda: held(process.pid, second_connection) == expected,
            message=f"{command} to hold {expected}",
        )
    finally:
        process.stop()
