"""A webhook delivered by a real worker process to a real receiver in this process
(F5, B2): signed deliveries that verify, failures recorded in the database ledger, the
endpoint disabled after two and left alone, a person re-enabling it; the secret never in
the worker's log."""

from __future__ import annotations

import pytest

from tests.conftest import wait_for
from tests.http_receiver import Answer, serving
from tests.testapp.factory_jobs import PARTNER_SECRET, partner_webhook
from tests.testapp.models import Record
from ultimate_jobs import DatabaseWebhookLedger, api, verify_signature
from ultimate_jobs.models import Job, WebhookDelivery

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def state_of(answer):
    return Job.objects.values_list("state", "error_code").get(pk=answer.id)


def test_a_worker_delivers_disables_and_never_logs_the_secret(start_worker):
    with serving() as receiver:
        receiver.answer(Answer(500), Answer(503))
        Record.objects.create(key="endpoint:p1", event=receiver.url("/partner"))
        # B6: the receiver is on 127.0.0.1, which a worker refuses unless allowed.
        worker = start_worker(
            "--concurrency", "2", WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8"
        )
        first = partner_webhook.enqueue(
            endpoint_id="p1", event_id="evt_1", tenant_id="org-1"
        )
        wait_for(lambda: state_of(first)[0] == "dead")
        assert state_of(first) == ("dead", "X_WEBHOOK_ENDPOINT_DISABLED")
        assert len(receiver.requests) == 2
        ledger = DatabaseWebhookLedger()
        assert ledger.is_disabled("p1")

        second = partner_webhook.enqueue(
            endpoint_id="p1", event_id="evt_2", tenant_id="org-1"
        )
        wait_for(lambda: state_of(second)[0] == "dead")
        assert state_of(second) == ("dead", "X_WEBHOOK_ENDPOINT_DISABLED")
        assert len(receiver.requests) == 2  # disabled: no request at all

        ledger.enable("p1", by="ops")
        api.retry(second.id)
        wait_for(lambda: state_of(second)[0] == "done")
        assert len(receiver.requests) == 3
        delivered = receiver.requests[-1]
        verified = verify_signature(delivered.headers, delivered.body, PARTNER_SECRET)
        assert (verified.id, verified.topic) == ("evt_2", "orders.paid")
        assert list(
            WebhookDelivery.objects.order_by("id").values_list(
                "event_id", "ok", "status", "tenant_id"
            )
        ) == [
            ("evt_1", False, 500, "org-1"),
            ("evt_1", False, 503, "org-1"),
            ("evt_2", True, 200, "org-1"),
        ]
        log = worker.log()
        assert "jobs.webhook.failed" in log
        assert "jobs.webhook.disabled" in log
        assert PARTNER_SECRET not in log
        assert "process-secret" not in log
