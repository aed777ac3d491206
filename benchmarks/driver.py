"""The client side of one system, in a process of its own (the way an app enqueues).

    python -m benchmarks.driver SYSTEM single COUNT START      time COUNT enqueues, one by one
    python -m benchmarks.driver SYSTEM bulk COUNT START BATCH  time COUNT enqueues in batches
    python -m benchmarks.driver SYSTEM fill COUNT START        enqueue COUNT jobs, fastest way
    python -m benchmarks.driver SYSTEM pickup COUNT START GAP [outbox]
                                                              one job every GAP seconds;
                                                              answers each job's commit time
    python -m benchmarks.driver uj has_outbox

Prints one JSON line.
"""

from __future__ import annotations

import importlib
import json
import sys
import time

CLIENTS = {
    "uj": "benchmarks.systems.uj:UltimateJobsClient",
    "uj-app": "benchmarks.systems.uj_app:UltimateJobsAppClient",
    "pgqueuer": "benchmarks.systems.pgqueuer_:PgQueuerClient",
    "procrastinate": "benchmarks.systems.procrastinate_:ProcrastinateClient",
    "djq": "benchmarks.systems.djq:DjangoQ2Client",
    "djtasks": "benchmarks.systems.djtasks:DjangoTasksClient",
    "celery": "benchmarks.systems.celery_:CeleryClient",
}


def main(argv: list[str]) -> dict[str, object]:
    system, command, *args = argv
    module, _, cls = CLIENTS[system].partition(":")
    client = getattr(importlib.import_module(module), cls)()
    client.open()
    try:
        if command == "has_outbox":
            return client.has_outbox()
        count, start = int(args[0]), int(args[1])
        numbers = list(range(start, start + count))
        if command == "single":
            client.enqueue(start - 1)  # warm: connections, imports, prepared plans
            began = time.perf_counter()
            for n in numbers:
                client.enqueue(n)
            return {"seconds": time.perf_counter() - began}
        if command == "bulk":
            batch = int(args[2])
            client.enqueue_many([start - 1])
            began = time.perf_counter()
            for i in range(0, count, batch):
                client.enqueue_many(numbers[i : i + batch])
            return {"seconds": time.perf_counter() - began}
        if command == "fill":
            began = time.perf_counter()
            client.fill(numbers)
            return {"seconds": time.perf_counter() - began}
        if command == "pickup":
            gap = float(args[2])
            outbox = args[3:] == ["outbox"]
            through = client.enqueue_outbox if outbox else client.enqueue
            committed = {}
            began = time.perf_counter()
            for i, n in enumerate(numbers):
                pause = began + i * gap - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                client.commit_ns = None
                through(n)
                # the commit was acknowledged: the client's own stamp when it has one
                # (not through the outbox: there the announcement precedes the commit)
                stamp = None if outbox else client.commit_ns
                committed[n] = stamp or time.time_ns()
            return {"committed": committed}
        raise SystemExit(f"unknown command {command!r}")
    finally:
        client.close()


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
