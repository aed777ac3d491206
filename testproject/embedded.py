"""A private PostgreSQL under the repository for when no DATABASE_URL is set.

The ``pgserver`` package ships the server binaries, so the demo runs on a machine with
no database installed. The data lives in ``.pgdata/`` (git-ignored; ``UJ_PGDATA`` names
another directory); the server is shared by every process of the project and stopped
when the last one exits.

pgserver counts the processes that hold the server in ``.pgdata/.handle_pids.json``: each
adds its pid when it starts and removes it at exit, and the last one out stops the
server. A process that dies without running its exit handlers (SIGKILL, or SIGTERM with
Python's default handler) leaves its pid behind, and then no process is ever the last
one. So every start forgets the pids of processes that no longer exist first.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA_DIR = REPO / ".pgdata"
HANDLES = ".handle_pids.json"


def data_dir() -> Path:
    """The embedded server's directory: ``$UJ_PGDATA``, else ``.pgdata/``."""
    return Path(os.environ.get("UJ_PGDATA") or DATA_DIR).resolve()


def _pgserver() -> Any:
    try:
        with (
            warnings.catch_warnings()
        ):  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from pgserver import postgres_server
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise SystemExit(
            "No DATABASE_URL is set and the embedded PostgreSQL is not installed.\n"
            "Either set DATABASE_URL=postgres://USER@HOST:5432/NAME, or install it:\n"
            "    pip install -e '.[embedded]'"
        ) from exc
    return postgres_server


def embedded_database(directory: Path | None = None) -> dict[str, Any]:
    """Start (or reuse) the embedded server and answer a DATABASES entry for it."""
    directory = directory or data_dir()
    postgres_server = _pgserver()
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    forget_dead_handles(directory)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = postgres_server.get_server(directory, cleanup_mode="stop")
    info = server.get_postmaster_info()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "USER": "postgres",
        "HOST": str(info.socket_dir),
        "PORT": str(info.port or ""),
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def forget_dead_handles(directory: Path | None = None) -> list[int]:
    """Drop the pids of dead processes from the server's handle list; answer them."""
    path = (directory or data_dir()) / HANDLES
    if not path.exists():
        return []
    with _pgserver().PostgresServer._lock:  # the lock pgserver takes around the list
        pids = json.loads(path.read_text() or "[]")
        dead = [pid for pid in pids if not _alive(pid)]
        if dead:
            path.write_text(json.dumps([pid for pid in pids if pid not in dead]))
    return dead


def holders(directory: Path | None = None) -> list[int]:
    """The pids that hold the embedded server (after forgetting the dead ones)."""
    path = (directory or data_dir()) / HANDLES
    forget_dead_handles(directory)
    return json.loads(path.read_text() or "[]") if path.exists() else []


def release_embedded(directory: Path | None = None) -> bool | None:
    """Let go of this process's hold on the server now rather than at exit.

    The server stops when no other live process holds it. Answer whether it is stopped,
    or None when this process holds no embedded server (DATABASE_URL was set).
    """
    directory = directory or data_dir()
    postgres_server = _pgserver()
    server = postgres_server.PostgresServer._instances.get(directory)
    if server is None:
        return None
    forget_dead_handles(directory)
    server._cleanup()  # stops the server when this is the last holder
    atexit.unregister(server._cleanup)
    return not (directory / "postmaster.pid").exists()


def running(directory: Path | None = None) -> bool:
    """Whether the embedded server of ``directory`` is up (its postmaster is alive)."""
    pid_file = (directory or data_dir()) / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return False
    return _alive(pid)


def stop(directory: Path | None = None) -> bool:
    """Stop the embedded server now, whoever holds it (a fast shutdown: sessions are
    ended), and forget its holders. Answer whether it was running."""
    directory = directory or data_dir()
    if not running(directory):
        return False
    postgres_server = _pgserver()
    # As root, pgserver runs the server as its own unprivileged user (pg_ctl refuses root).
    user = "pgserver" if os.name == "posix" and os.geteuid() == 0 else None
    postgres_server.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=directory, user=user)
    handles = directory / HANDLES
    if handles.exists():
        with postgres_server.PostgresServer._lock:
            handles.write_text("[]")
    return True


def main(argv: list[str]) -> int:
    """``python -m testproject.embedded running|stop``, for scripts/test's trap: exit
    status 0 when the server is (was) running, 1 when it is not."""
    if argv == ["running"]:
        return 0 if running() else 1
    if argv == ["stop"]:
        return 0 if stop() else 1
    print("usage: python -m testproject.embedded running|stop", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
