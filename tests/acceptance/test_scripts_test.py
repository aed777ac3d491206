"""``scripts/test`` as the README runs it (issue 30): with no DATABASE_URL it starts the
embedded PostgreSQL, and a run interrupted with Ctrl-C stops the server it started even
when a process it left behind still holds it."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path

import psutil
import pytest

from testproject.embedded import running
from tests.acceptance.test_demo import venv_environment
from tests.conftest import REPO, start_deadline, wait_for

pytestmark = pytest.mark.processes


def test_an_interrupted_run_stops_the_embedded_server_it_started(tmp_path):
    # Not under tmp_path: see tests/acceptance/test_demo.py's Demo.
    pgdata = Path(tempfile.mkdtemp(prefix="uj-scripts-test-")) / "pgdata"
    marker = tmp_path / "holder.pid"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV")
        and not key.startswith(("ULTIMATE_JOBS_", "UJ_"))
    }
    env.update(venv_environment())
    env.update(UJ_PGDATA=str(pgdata), UJ_TEST_HOLDER_MARKER=str(marker))
    log = tmp_path / "scripts-test.log"
    with log.open("wb") as out:
        run = subprocess.Popen(
            [str(REPO / "scripts" / "test"), "tests/scripts_test_holder.py", "-q"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's job
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    holder = None
    try:

        def holder_started() -> str:
            assert run.poll() is None, log.read_text()[-3000:]
            return marker.exists() and marker.read_text()

        # ruff, mypy and manage.py check come first
        wait_for(holder_started, timeout=4 * start_deadline())
        holder = psutil.Process(int(marker.read_text()))
        assert running(pgdata)
        os.killpg(run.pid, signal.SIGINT)  # Ctrl-C reaches the run's process group
        assert run.wait(timeout=start_deadline()) == 130
        assert not running(pgdata), log.read_text()
        assert "==> embedded PostgreSQL stopped" in log.read_text()
        assert holder.is_running()  # the holder was never told: the trap stopped it
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        if holder is not None and holder.is_running():
            holder.kill()
        if running(pgdata):
            from testproject.embedded import stop

            stop(pgdata)
