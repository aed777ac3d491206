"""P4, N3: whether a completion is batched follows the job_settled receivers as they are
now: the executor's remembered answer (N2) changes when a receiver connects or goes."""

from __future__ import annotations

from typing import Any, cast

from tests.testapp.jobs import noop
from ultimate_jobs.ground.signals import job_settled
from ultimate_jobs.runtime.finish import _heard

ROW: Any = {"lease_key": None}


def _receiver(sender, **kwargs):
    pass


def test_a_receiver_connected_or_disconnected_between_jobs_is_followed():
    assert not job_settled.has_listeners(sender=noop)  # the test's premise
    assert _heard(noop, ROW) is False
    assert _heard(noop, ROW) is False  # remembered
    job_settled.connect(_receiver, sender=noop, dispatch_uid="t-heard")
    try:
        assert _heard(noop, ROW) is True
    finally:
        job_settled.disconnect(sender=noop, dispatch_uid="t-heard")
    assert _heard(noop, ROW) is False
    job_settled.connect(_receiver, dispatch_uid="t-heard-any")  # every sender
    try:
        assert _heard(noop, ROW) is True
    finally:
        job_settled.disconnect(dispatch_uid="t-heard-any")
    assert _heard(noop, ROW) is False


def test_a_receiver_of_another_sender_is_not_heard():
    other = object()
    job_settled.connect(_receiver, sender=other, dispatch_uid="t-heard-other")
    try:
        assert _heard(noop, ROW) is False
    finally:
        job_settled.disconnect(sender=other, dispatch_uid="t-heard-other")


def test_a_slot_to_free_is_always_heard():
    assert _heard(noop, cast("Any", {"lease_key": "k"})) is True
