"""HTTP views for the web process: ``/metrics`` (M1) and ``/health/ready`` (M3).

::

    from ultimate_jobs.views import metrics, readiness_view

    urlpatterns = [
        path("metrics", metrics),
        path("health/ready", readiness_view(max_depth=1000, max_lag="5m")),
    ]

Both read the database on each call (one grouped statement for the queues, one for
the workers) and are never cached. Neither checks permissions: expose them to the
scraper and the orchestrator, not to the internet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import timedelta

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client.exposition import choose_encoder

from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.health import Thresholds, check
from ultimate_jobs.observability.exposition import exposition_registry

View = Callable[[HttpRequest], HttpResponse]
logger = logging.getLogger(__name__)


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus exposition of this process: prometheus_client's default registry
    (the queue gauges, and whatever else the project registered), or every process's
    files in multiprocess mode."""
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(exposition_registry()), content_type=content_type)


def readiness_view(
    *,
    max_depth: int | None = None,
    max_lag: float | timedelta | str | None = None,
    min_workers: int = 1,
    queues: Sequence[str] | None = None,
) -> View:
    """A view answering 200 when ready and 503 when not, with the readings as JSON.

    The thresholds are checked now (a bad one raises at URL loading, naming it), and
    mean what they mean for ``ultimate_jobs.health.readiness``. A database that cannot
    be read answers 503 too, saying ``database: unavailable`` (the driver's error, which
    names hosts and ports, is logged and shown to staff users only).
    """
    thresholds = Thresholds.of(
        max_depth=max_depth, max_lag=max_lag, min_workers=min_workers, queues=queues
    )

    @never_cache
    @require_safe
    def ready(request: HttpRequest) -> HttpResponse:
        try:
            answer = check(thresholds)
        except QueryError as exc:
            # The driver's text names hosts, ports and users: logged here, shown to
            # staff only, never to an anonymous caller (issue 14).
            logger.error("jobs.health.database-error", extra={"error": str(exc)})
            user = getattr(request, "user", None)
            detail = str(exc) if getattr(user, "is_staff", False) else "unavailable"
            return JsonResponse(
                {"ready": False, "problems": [f"database: {detail}"]}, status=503
            )
        return JsonResponse(answer.as_dict(), status=200 if answer.ready else 503)

    return ready


ready = readiness_view()
"""``/health/ready`` with no queue thresholds: ready while a worker is alive."""
