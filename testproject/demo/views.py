"""The demo's webhook receiver: what an app that receives ultimate_jobs webhooks writes.

``demo.notify_receiver`` (testproject/demo/jobs.py) delivers to ``/demo/webhook`` with
this secret; the view answers 200 only to a delivery whose signature verifies (F5, B2).
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ultimate_jobs import WebhookSignatureInvalid, verify_webhook_signature

logger = logging.getLogger(__name__)

# A demo's secret; a real one comes from the settings or a secrets store.
RECEIVER_SECRET = "whsec_demo-receiver-not-a-real-secret"  # noqa: S105


@csrf_exempt
@require_POST
def receive_webhook(request: HttpRequest) -> HttpResponse:
    try:
        delivery = verify_webhook_signature(request, secret=RECEIVER_SECRET)
    except WebhookSignatureInvalid as exc:
        logger.warning("demo.webhook.refused", extra={"reason": str(exc)})
        return HttpResponse(status=400)
    # Deliveries are at least once: a real receiver deduplicates on delivery.id.
    logger.info(
        "demo.webhook.received",
        extra={"event_id": delivery.id, "topic": delivery.topic},
    )
    return HttpResponse(status=200)
