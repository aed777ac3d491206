"""The demo of ``scripts/demo``, supervised: ``manage.py demo_run``.

This process holds the database for the whole demo (the embedded PostgreSQL when no
DATABASE_URL is set), migrates, seeds, then starts the web server and a worker as its
children and watches them:

- a worker that exits while the demo is not stopping (a crash, a SIGTERM from outside)
  is restarted, and the demo says so loudly; one that exits 5 times in a minute stops
  the demo with exit status 1, as does a web server that exits (the admin IS the demo);
- the web server runs with runserver's autoreload, so a code change is served without
  a restart; its process group (the reloader and the server it runs) is signalled;
- SIGINT (Ctrl-C), SIGTERM or SIGHUP stops the demo: the worker drains (SIGTERM; a
  second Ctrl-C cuts the drain; past DRAIN_TIMEOUT and a margin, SIGKILL), the web
  server gets SIGINT (runserver then exits 0 and lets go of the embedded server), then
  this process lets go of it too, which stops it when no other process holds it; exit
  status 0.

The children run in their own process group, so a Ctrl-C in the terminal reaches this
process only and the stop happens in that order. On Linux they get SIGTERM if this
process dies without stopping them.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable
from types import FrameType
from typing import TextIO

from django.core.management import call_command
from django.db import connections

from testproject.embedded import REPO, holders, release_embedded
from ultimate_jobs.conf import get_settings

MANAGE = str(REPO / "manage.py")
WORKER_EXITS_TO_GIVE_UP = 5  # worker exits within WORKER_EXIT_WINDOW that stop the demo
WORKER_EXIT_WINDOW = 60.0
READY_TIMEOUT = 60.0  # seconds the web server has to answer the admin's login page
SETTLE_TIMEOUT = 20.0  # seconds the banner waits for the worker's start-up lines
SETTLE_QUIET = 1.0  # and then for the lines of the jobs it just claimed
STOP_MARGIN = 15.0  # seconds on top of the worker's DRAIN_TIMEOUT for the rest to stop


def _as_child() -> None:
    """Run in each child between fork and exec."""
    os.setpgid(0, 0)  # out of the terminal's group: Ctrl-C reaches the demo only
    # runserver stops cleanly (exit handlers included) on SIGINT only, so it must not
    # inherit an ignored SIGINT (a shell's background job has one): the demo's own
    # handler is reset by exec anyway; this keeps it so if that handler ever changes.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if sys.platform == "linux":  # SIGTERM when the demo dies (PR_SET_PDEATHSIG)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


class Child:
    """One child process of the demo, restartable."""

    def __init__(
        self, label: str, argv: list[str], env: dict[str, str], *, group: bool = False
    ) -> None:
        self.label = label
        self.argv = argv
        self.env = env
        # Signal its whole process group: runserver's autoreloader runs the server in
        # a child of its own, which must get the stop signal too.
        self.group = group
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        self.proc = subprocess.Popen(  # noqa: S603 - our own command lines
            self.argv, cwd=REPO, env=self.env, preexec_fn=_as_child
        )

    def exit_status(self) -> int | None:
        """None while it runs (or was never started)."""
        return self.proc.poll() if self.proc else None

    def signal(self, signum: int) -> None:
        if self.proc and self.proc.poll() is None:
            if self.group:
                try:
                    os.killpg(self.proc.pid, signum)  # its own group (_as_child)
                except ProcessLookupError:
                    pass
            else:
                self.proc.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL it (its whole group for a grouped child) and reap it."""
        if self.proc is None:
            return
        if self.group:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.kill()
        self.proc.wait()

    def how_it_ended(self) -> str:
        code = self.exit_status()
        if code is None:
            return "is running"
        if code < 0:
            return f"was killed by {signal.Signals(-code).name}"
        return f"exited with status {code}"


class Demo:
    """Set up, run and stop the demo; ``run()`` answers the exit status."""

    def __init__(
        self,
        port: int,
        *,
        started: float | None = None,
        out: TextIO = sys.stdout,
        concurrency: int = 4,
    ) -> None:
        self.port = port
        self.started = started if started is not None else time.time()
        self.out = out
        env = {**os.environ, "DEMO_PORT": str(port), "PYTHONUNBUFFERED": "1"}
        python = [sys.executable, MANAGE]
        # With runserver's autoreload (issue 16 item 9): a code change, a newly
        # declared job or task included, is served without restarting the demo.
        self.web = Child(
            "web server", [*python, "runserver", f"127.0.0.1:{port}"], env, group=True
        )
        self.worker = Child(
            "worker", [*python, "jobs_worker", "--concurrency", str(concurrency)], env
        )
        self.signals = 0
        self.worker_exits: list[float] = []

    # -- output ----------------------------------------------------------------------

    def say(self, text: str) -> None:
        self.out.write(f"==> {text}\n")
        self.out.flush()

    def shout(self, text: str) -> None:
        """A line nobody can miss: something went wrong while the demo ran."""
        self.out.write(f"\n!!! {text}\n\n")
        self.out.flush()

    # -- the demo --------------------------------------------------------------------

    def run(self) -> int:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self._on_signal)
        steps: list[tuple[str, Callable[[], object]]] = [
            ("migrating the database", lambda: call_command("migrate", verbosity=0)),
            ("seeding the demo's jobs", lambda: call_command("demo_seed")),
        ]
        for text, step in steps:
            self.say(text)
            try:
                step()
            except (Exception, SystemExit):
                traceback.print_exc()
                self.shout(f"{text} failed (above): stopping the demo")
                return self.stop(1)
            if self.signals:
                return self.stop(0)
        connections.close_all()  # the children have their own connections
        self.say(f"starting the web server on 127.0.0.1:{self.port}")
        self.web.start()
        if not self._wait_until_ready():
            return self.stop(0 if self.signals else 1)
        self.say("starting the worker")
        self.worker.start()
        self._wait_until_worker_settles()
        if self.signals:
            return self.stop(0)
        self._banner()
        return self._watch()

    def _wait_until_worker_settles(self) -> None:
        """Wait (at most SETTLE_TIMEOUT) until the worker is registered and has claimed
        the seeded jobs due now (in queues not paused), so its start-up lines come
        before the banner rather than scroll it away (issue 30)."""
        from django.utils import timezone

        from ultimate_jobs.models import Job, QueuePause, Worker

        alias = get_settings().DATABASE
        deadline = time.monotonic() + SETTLE_TIMEOUT
        try:
            while not self.signals and time.monotonic() < deadline:
                pid = self.worker.pid
                if pid is None or self.worker.exit_status() is not None:
                    return  # _watch restarts it and says so
                registered = Worker.objects.using(alias).filter(pid=pid)
                paused = QueuePause.objects.using(alias).values("queue")
                due = (
                    Job.objects.using(alias)
                    .filter(state="ready", run_at__lte=timezone.now())
                    .exclude(queue__in=paused)
                )
                if registered.exists() and not due.exists():
                    time.sleep(SETTLE_QUIET)  # the settle lines of the last claims
                    return
                time.sleep(0.2)
        finally:
            connections.close_all()

    def _wait_until_ready(self) -> bool:
        url = f"http://127.0.0.1:{self.port}/admin/login/"
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.signals:
            if self.web.exit_status() is not None:
                self.shout(
                    f"the web server {self.web.how_it_ended()} before the admin "
                    f"answered (is port {self.port} taken? DEMO_PORT=8001 picks "
                    "another): stopping the demo"
                )
                return False
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.shout(
                    f"the admin did not answer at {url} within {READY_TIMEOUT:.0f} s: "
                    "stopping the demo"
                )
                return False
            time.sleep(0.2)
        return False

    def _banner(self) -> None:
        base = f"http://127.0.0.1:{self.port}"
        self.out.write(
            "\n"
            f"  Dashboard: {base}/admin/ultimate_jobs/dashboard/\n"
            f"  Jobs:      {base}/admin/ultimate_jobs/job/   (finished ones move to "
            f"the archive: {base}/admin/ultimate_jobs/jobarchive/)\n"
            f"  Metrics:   {base}/metrics    Ready: {base}/health/ready\n"
            "  Enqueue more: .venv/bin/python manage.py demo_seed --count 20\n"
            "  Stop: Ctrl-C (the worker drains; Ctrl-C again stops it now)\n"
            "\n"
            f"  Log in at {base}/admin/   user: admin   password: admin\n\n"
        )
        self.say(f"ready in {time.time() - self.started:.0f} s")

    def _watch(self) -> int:
        while not self.signals:
            if self.web.exit_status() is not None:
                self.shout(
                    f"the web server (pid {self.web.pid}) {self.web.how_it_ended()}: "
                    "stopping the demo"
                )
                return self.stop(1)
            if self.worker.exit_status() is not None:
                if not self._restart_worker():
                    return self.stop(1)
            time.sleep(0.2)
        return self.stop(0)

    def _restart_worker(self) -> bool:
        now = time.monotonic()
        self.worker_exits = [
            t for t in self.worker_exits if now - t < WORKER_EXIT_WINDOW
        ] + [now]
        ended = f"the worker (pid {self.worker.pid}) {self.worker.how_it_ended()}"
        if len(self.worker_exits) >= WORKER_EXITS_TO_GIVE_UP:
            self.shout(
                f"{ended}, its {len(self.worker_exits)}th exit in "
                f"{WORKER_EXIT_WINDOW:.0f} s: stopping the demo"
            )
            return False
        self.worker.start()
        self.shout(
            f"{ended} while the demo runs: jobs would sit ready with nobody to run "
            f"them. Restarted it: pid {self.worker.pid}"
        )
        return True

    # -- stopping --------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1  # acted on by the loops, never here

    def stop(self, status: int) -> int:
        """Stop the children, then let go of the database; answer ``status``."""
        children = (self.worker, self.web)
        if any(child.proc for child in children):
            self.say("stopping: the worker drains, the web server stops")
        self.worker.signal(signal.SIGTERM)
        self.web.signal(signal.SIGINT)
        seen = self.signals
        timeout = get_settings().DRAIN_TIMEOUT + STOP_MARGIN
        deadline = time.monotonic() + timeout
        while any(c.proc and c.exit_status() is None for c in children):
            if self.signals > seen:  # another Ctrl-C: cut the worker's drain short
                seen = self.signals
                self.say("cutting the worker's drain short")
                self.worker.signal(signal.SIGTERM)
            if time.monotonic() > deadline:
                for child in children:
                    if child.exit_status() is None and child.proc:
                        self.shout(
                            f"the {child.label} (pid {child.pid}) did not stop "
                            f"within {timeout:.0f} s: killing it"
                        )
                        child.kill()
                break
            time.sleep(0.1)
        connections.close_all()
        stopped = release_embedded()
        if stopped is True:
            self.say("the embedded PostgreSQL stopped")
        elif stopped is False:
            self.say(
                f"the embedded PostgreSQL keeps running: processes {holders()} "
                "still use it (it stops when the last one exits)"
            )
        self.say(f"demo stopped (exit status {status})")
        return status
