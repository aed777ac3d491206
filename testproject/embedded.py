"""A private PostgreSQL under the repository for when no DATABASE_URL is set.

The ``pgserver`` package ships the server binaries, so the demo runs on a machine with
no database installed. The data lives in ``.pgdata/`` (git-ignored); the server is
shared by every process of the project and stopped when the last one exits.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA_DIR = REPO / ".pgdata"


def embedded_database(data_dir: Path = DATA_DIR) -> dict[str, Any]:
    """Start (or reuse) the embedded server and answer a DATABASES entry for it."""
    try:
        with (
            warnings.catch_warnings()
        ):  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from pgserver.postgres_server import get_server
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise SystemExit(
            "No DATABASE_URL is set and the embedded PostgreSQL is not installed.\n"
            "Either set DATABASE_URL=postgres://USER@HOST:5432/NAME, or install it:\n"
            "    pip install -e '.[embedded]'"
        ) from exc
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = get_server(data_dir, cleanup_mode="stop")
    info = server.get_postmaster_info()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "USER": "postgres",
        "HOST": str(info.socket_dir),
        "PORT": str(info.port or ""),
    }
