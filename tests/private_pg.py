"""A PRIVATE PostgreSQL (pgserver) for tests and tools that restart or stop the server:
never the machine's shared one. Unix socket only, in a temporary directory.

``restart("fast")`` and ``restart("immediate")`` are ``pg_ctl restart -m MODE``;
``stop(mode)`` and ``start()`` make an outage of any length. The chaos run
(benchmarks/chaos) and tests/acceptance/test_database_restart.py use it.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import database_url


class PrivateServer:
    """A PostgreSQL server of this process's own, with its data in a temporary dir."""

    def __init__(self, prefix: str = "uj-pg-") -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pgserver import _commands
            from pgserver.postgres_server import get_server
        self._commands = _commands
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.server = get_server(self.dir, cleanup_mode=None)
        info = self.server.get_postmaster_info()
        self.socket_dir = str(info.socket_dir)
        self.url = self.url_of("postgres")

    def url_of(self, dbname: str) -> str:
        return database_url(
            {"USER": "postgres", "HOST": self.socket_dir, "NAME": dbname}
        )

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=self.socket_dir, dbname=dbname, user="postgres", autocommit=True
        )

    def _pg_ctl(self, *args: str) -> None:
        self._commands.pg_ctl(  # type: ignore[attr-defined]
            list(args), pgdata=self.dir, user=self.server.system_user
        )

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m fast|immediate``: every session is cut."""
        self._pg_ctl("-w", "-m", mode, "restart")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (an outage begins); ``start()`` ends it."""
        self._pg_ctl("-w", "-m", mode, "stop")

    def start(self) -> None:
        """Start the stopped server again, on the same socket."""
        self._pg_ctl(
            "-w",
            "-o",
            '-h ""',
            "-o",
            f"-k {self.socket_dir}",
            "-l",
            str(self.dir / "restart.log"),
            "start",
        )

    def destroy(self) -> None:
        """Stop the server at once and delete its data."""
        try:
            self._pg_ctl("-w", "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
