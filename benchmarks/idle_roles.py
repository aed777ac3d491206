"""Idle statements per minute of one ``jobs_worker`` by ``--roles`` and by statement.

``python -m benchmarks.idle_roles [seconds] [repo]``: a private PostgreSQL with every
statement logged (benchmarks/idle.py), one database per roles setting, the workers
idling side by side (``--concurrency 4``, 20 s warm-up, then ``seconds``, default 60).
Prints, per roles setting, statements per minute, the statements by kind (the first
table or function each names) and the CPU-seconds per minute of the process tree.
``repo`` runs another checkout's code (an A/B pair) with this interpreter.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from collections import Counter

from benchmarks.idle import PrivateServer
from benchmarks.procs import Group
from benchmarks.systems.base import REPO

ROLES = {"worker": ["--roles", "worker"], "default": []}
# A logged statement's kind: the named statement's first distinctive table or call.
# The staging pass first: since issue 26 (stop 27) it names the leader lease, the
# outbox and the worker registry too, as the roles it carries.
KINDS = [
    ("stage", re.compile(r"state IN \('delayed', 'suspended'\)", re.I)),
    ("leader", re.compile(r"ultimate_jobs_leader|scheduler_leader", re.I)),
    ("outbox", re.compile(r"ultimate_jobs_outbox", re.I)),
    ("worker_beat", re.compile(r"ultimate_jobs_worker", re.I)),
    ("heartbeat", re.compile(r"lease_expires_at = coalesce", re.I)),
]


def kind(text: str) -> str:
    for name, pattern in KINDS:
        if pattern.search(text):
            return name
    return text[:60]


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    repo = sys.argv[2] if len(sys.argv) > 2 else str(REPO)
    server = PrivateServer()
    groups: dict[str, Group] = {}
    logs = tempfile.mkdtemp(prefix="uj-idle-roles-")
    try:
        server.start()
        for name, extra in ROLES.items():
            dsn = server.create(f"idle_{name}")
            env = dict(os.environ)
            env.update(
                DATABASE_URL=dsn,
                PYTHONPATH=repo,
                DJANGO_SETTINGS_MODULE="benchmarks.settings",
            )
            manage = os.path.join(repo, "manage.py")
            Group(
                [[sys.executable, manage, "migrate", "--noinput", "-v0"]],
                env,
                os.path.join(logs, f"{name}-migrate.log"),
            ).popens[0].wait()
            groups[name] = Group(
                [[sys.executable, manage, "jobs_worker", "--concurrency", "4", *extra]],
                env,
                os.path.join(logs, f"{name}.log"),
            )
        time.sleep(20)
        begin = server.size()
        cpu0 = {name: group.cpu_seconds() for name, group in groups.items()}
        began = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - began
        cpu1 = {name: group.cpu_seconds() for name, group in groups.items()}
        end = server.size()
        with open(server.log, "rb") as handle:
            handle.seek(begin)
            text = handle.read(end - begin).decode(errors="replace")
        per: dict[str, Counter[str]] = {name: Counter() for name in groups}
        current: tuple[str, list[str]] | None = None
        entries: list[tuple[str, str]] = []
        for line in text.splitlines():
            database, sep, rest = line.partition(":")
            match = (
                re.match(r"LOG:  (statement|execute [^:]*): (.*)", rest)
                if sep
                else None
            )
            if match:
                if current:
                    entries.append((current[0], "\n".join(current[1])))
                current = (database, [match.group(2)])
            elif current and (line.startswith(("\t", " ")) or not sep):
                current[1].append(line)
            elif current:
                entries.append((current[0], "\n".join(current[1])))
                current = None
        if current:
            entries.append((current[0], "\n".join(current[1])))
        for database, statement in entries:
            name = database.removeprefix("idle_")
            if name in per:
                per[name][kind(statement)] += 1
        scale = 60.0 / elapsed
        for name, group in groups.items():
            total = sum(per[name].values()) * scale
            kinds = ", ".join(
                f"{k} {v * scale:.1f}" for k, v in per[name].most_common()
            )
            print(
                f"{name}: {total:.1f} statements/min ({kinds}); "
                f"cpu {(cpu1[name] - cpu0[name]) * scale:.4f} s/min; "
                f"alive {group.alive()}"
            )
    finally:
        for group in groups.values():
            group.stop()
        server.stop()


if __name__ == "__main__":
    main()
