"""The parts of the step API that need no database: naming, JSON results, progress
throttling, reschedule checks, the worker's wake timer (S1-S7)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from ultimate_jobs import NO_TENANT, InvalidArgument, InvalidJobPayload, JobAborted
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.declaration.run import CancelToken, Run
from ultimate_jobs.durable.progress import Progress, encode_progress
from ultimate_jobs.durable.record import encode_output, sleep_name
from ultimate_jobs.durable.reschedule import reschedule_intent
from ultimate_jobs.ground.exceptions import InvalidDuration, RunSuspended
from ultimate_jobs.runtime.timers import WakeTimer


def test_run_suspended_is_not_an_exception():
    """S3: `except Exception` in a body cannot swallow a suspension."""
    assert issubclass(RunSuspended, BaseException)
    assert not issubclass(RunSuspended, Exception)


def test_sleep_names_derive_from_the_duration():
    assert sleep_name("3d") == "sleep:3d"
    assert sleep_name(90) == "sleep:90s"
    assert sleep_name(timedelta(minutes=2)) == "sleep:120s"
    with pytest.raises(InvalidDuration):
        sleep_name(-1)


def test_step_results_are_json_or_refused_naming_the_step():
    assert encode_output("j", "s", {"a": [1, 2.5, None, True]}) == (
        '{"a":[1,2.5,null,true]}'
    )
    with pytest.raises(InvalidArgument) as refused:
        encode_output("j", "load", datetime.now(UTC))
    assert refused.value.field == "result of step 'load'"
    with pytest.raises(InvalidArgument):
        encode_output("j", "nan", float("nan"))


def test_progress_writes_at_most_once_a_second_and_keeps_the_last():
    now = [100.0]
    written: list[str] = []
    progress = Progress(written.append, CancelToken(), clock=lambda: now[0])
    progress.report(1, 10)
    progress.report(2, 10)
    progress.report(3, 10, "three")
    assert len(written) == 1
    assert progress.unsaved() == '{"done": 3, "total": 10, "note": "three"}'
    now[0] += 1.0
    progress.report(4, 10)
    assert len(written) == 2
    assert progress.unsaved() is None


def test_progress_checks_its_values_and_refuses_after_the_cancel():
    for args, field in (((-1, 1), "done"), ((1, 0), "total"), ((True, 1), "done")):
        with pytest.raises(InvalidArgument) as refused:
            encode_progress(*args)
        assert refused.value.field == field
    with pytest.raises(InvalidArgument):
        encode_progress(1, 2, "x" * 501)
    token = CancelToken()
    token.cancel("TIMEOUT")
    with pytest.raises(JobAborted):
        Progress(lambda value: None, token).report(1, 2)


def test_reschedule_checks_the_stage_when_called(clean_registry):
    from ultimate_jobs import job

    @job(name="tests.staged", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def staged(run, stage: str = "a") -> None: ...

    definition = registry.get("tests.staged").definition
    row = '{"stage": "a"}'  # the run's stored input
    stage = reschedule_intent(definition, row, delay="1h", input={"stage": "b"})
    assert (stage.input, stage.delay, stage.run_at) == ('{"stage":"b"}', 3600.0, None)
    assert reschedule_intent(definition, row).input == '{"stage":"a"}'
    with pytest.raises(InvalidJobPayload):
        reschedule_intent(definition, row, input={"stage": 1})
    with pytest.raises(InvalidJobPayload):
        reschedule_intent(definition, row, input={"other": 1})
    with pytest.raises(InvalidArgument) as refused:
        reschedule_intent(definition, row, run_at=datetime(2030, 1, 1))
    assert refused.value.field == "run_at"
    with pytest.raises(InvalidArgument):
        reschedule_intent(
            definition, row, delay="1h", run_at=datetime(2030, 1, 1, tzinfo=UTC)
        )
    assert staged.name == "tests.staged"


def test_a_run_without_a_journal_refuses_steps():
    run = Run(
        job_id=None,  # type: ignore[arg-type]
        run_id=None,  # type: ignore[arg-type]
        name="x",
        input={},
        attempt=1,
        max_attempts=1,
        tenant_id=None,
    )
    with pytest.raises(RuntimeError, match="no journal"):
        run.step("a", lambda: 1)


def test_the_wake_timer_calls_wake_in_order_and_ignores_the_far_future():
    woken = threading.Event()
    calls = []

    def wake():
        calls.append(1)
        woken.set()

    timer = WakeTimer(wake, horizon=60)
    try:
        assert timer.wake_in(120) is False
        assert calls == []
        assert timer.wake_in(0.05) is True
        assert woken.wait(5)
    finally:
        timer.stop()
    assert timer.wake_in(0.01) is False  # stopped
