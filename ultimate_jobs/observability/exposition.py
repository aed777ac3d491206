"""Serving the metrics (M1): which registry a scrape reads, and the worker's port.

``jobs_worker --metrics-port PORT`` serves the registry on its own small HTTP server
(any path answers the metrics). ``--processes P`` uses prometheus_client's
multiprocess mode rather than one port per child:

* the supervisor makes a private directory and hands it to its children in
  ``PROMETHEUS_MULTIPROC_DIR`` before they start, so every child writes its counters
  and histograms to memory-mapped files there;
* the supervisor alone listens on PORT and answers a scrape by merging those files
  (``MultiProcessCollector``) and computing the queue gauges once;
* a child that dies and is restarted leaves its files behind, so its counts stay in
  the sums and no total goes backwards; the directory is removed when the supervisor
  exits.

Per-child ports were the alternative: P scrape targets to discover per host, each
child serving the queue gauges again (a ``sum()`` over targets would multiply them),
and a restarted child's counts lost. One port per host is what an operator expects.

No module here reads settings of this package; ``PROMETHEUS_MULTIPROC_DIR`` is
prometheus_client's own variable and is honoured when the operator sets it.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.db import close_old_connections
from prometheus_client import REGISTRY, CollectorRegistry, make_wsgi_app
from prometheus_client.multiprocess import MultiProcessCollector

from ultimate_jobs.ground import validate
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.observability.metrics import QUEUE_COLLECTOR

logger = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# A scraper on another host must reach the port, as with prometheus_client's server.
ALL_INTERFACES = "0.0.0.0"  # noqa: S104


def exposition_registry() -> CollectorRegistry:
    """The registry a scrape should read in this process.

    prometheus_client's default registry, unless ``PROMETHEUS_MULTIPROC_DIR`` is set
    (``jobs_worker --processes``, or gunicorn with several workers): then a fresh
    registry that merges every process's files and adds the queue gauges.
    """
    path = os.environ.get(MULTIPROC_ENV)
    if not path:
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
    registry.register(QUEUE_COLLECTOR)
    return registry


WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def metrics_app() -> WSGIApp:
    """A WSGI app answering the metrics, with Django's connection hygiene around each
    scrape (the queue gauges query the database from the server's thread)."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        close_old_connections()
        try:
            return make_wsgi_app(exposition_registry())(environ, start_response)
        finally:
            close_old_connections()

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class MetricsServer:
    """An HTTP server for the metrics on one daemon thread (scrapes are served in turn,
    so the thread keeps at most one database connection)."""

    def __init__(self, port: int, *, addr: str = ALL_INTERFACES) -> None:
        validate.whole(
            port,
            field="--metrics-port",
            most=65535,
            reason="a TCP port from 1 to 65535",
        )
        self.port = port
        try:
            self._server = make_server(
                addr,
                port,
                metrics_app(),
                server_class=WSGIServer,
                handler_class=_QuietHandler,
            )
        except OSError as exc:
            raise InvalidArgument(
                "--metrics-port", port, f"cannot listen: {exc.strerror or exc}"
            ) from exc
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="jobs-metrics", daemon=True
        )

    def start(self) -> MetricsServer:
        self._thread.start()
        logger.info("jobs.metrics.serving", extra={"port": self.port})
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def serve_worker_metrics(port: int, *, supervisor: bool = False) -> MetricsServer:
    """Serve the metrics on ``port`` for ``jobs_worker``.

    With ``supervisor`` (``--processes``), switch the children to multiprocess mode
    first: they inherit ``PROMETHEUS_MULTIPROC_DIR`` and must not listen themselves
    (the supervisor drops ``--metrics-port`` from their command line).
    """
    server = MetricsServer(port)  # bind first: a bad port changes nothing
    if supervisor and not os.environ.get(MULTIPROC_ENV):
        path = tempfile.mkdtemp(prefix="ultimate-jobs-metrics-")
        os.environ[MULTIPROC_ENV] = path
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return server.start()
