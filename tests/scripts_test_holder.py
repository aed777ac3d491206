"""Run by tests/acceptance/test_scripts_test.py through ``scripts/test`` (not collected
by the suite: its name does not start with ``test_``). It leaves a process holding the
embedded PostgreSQL that no Ctrl-C reaches (its own session), then waits to be
interrupted, as a run interrupted while a worker it started still holds the server."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO

HOLD = (
    "import time; from testproject.embedded import embedded_database; "
    "embedded_database(); print('held', flush=True); time.sleep(600)"
)


def test_holds_the_server_until_interrupted() -> None:
    marker = Path(os.environ["UJ_TEST_HOLDER_MARKER"])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    marker.write_text(str(holder.pid))
    time.sleep(600)  # the run is interrupted long before
