"""Declaring jobs: J1-J7 and H4. Everything is refused where it is written."""

from __future__ import annotations

import pytest

from ultimate_jobs import (
    NO_TENANT,
    Concurrency,
    IdempotencyRequired,
    JobDeclarationInvalid,
    JobHandle,
    JobNameTaken,
    JobTenantRequired,
    Retry,
    job,
    registry,
)

pytestmark = pytest.mark.usefixtures("clean_registry")


def key(p):
    return "k"


def body(run, a: int = 0):
    pass


def other_body(run):
    pass


async def async_body(run):
    pass


def test_idempotency_key_is_required():
    with pytest.raises(IdempotencyRequired) as info:
        job(tenant=NO_TENANT)(body)
    assert info.value.code == "X_IDEMPOTENCY_REQUIRED"
    assert info.value.field == "idempotency_key"
    with pytest.raises(IdempotencyRequired):
        job(body)  # bare @job


def test_tenant_is_required():
    with pytest.raises(JobTenantRequired) as info:
        job(idempotency_key=key)(body)
    assert info.value.code == "X_JOB_TENANT_REQUIRED"
    with pytest.raises(JobTenantRequired):
        job(idempotency_key=key, tenant="acme")(body)  # type: ignore[call-overload]  # a string is not a function


def test_required_errors_are_declaration_errors():
    assert issubclass(IdempotencyRequired, JobDeclarationInvalid)
    assert issubclass(JobTenantRequired, JobDeclarationInvalid)


def test_default_name_is_module_and_function_outside_installed_apps():
    handle = job(idempotency_key=key, tenant=NO_TENANT)(body)
    assert isinstance(handle, JobHandle)
    assert handle.name == "tests.unit.test_declarations.body"
    assert registry.get(handle.name) is handle


def test_default_name_inside_an_installed_app_is_label_and_function():
    from tests.testapp.jobs import touch

    assert touch.name == "testapp.touch"


def test_an_explicit_name_wins_and_two_functions_cannot_share_it():
    handle = job(idempotency_key=key, tenant=NO_TENANT, name="billing.charge")(body)
    assert handle.name == "billing.charge"
    with pytest.raises(JobNameTaken) as info:
        job(idempotency_key=key, tenant=NO_TENANT, name="billing.charge")(other_body)
    assert info.value.code == "X_JOB_DUPLICATE"


def test_the_same_function_seen_twice_is_one_registration():
    first = job(idempotency_key=key, tenant=NO_TENANT, name="same.twice")(body)
    second = job(idempotency_key=key, tenant=NO_TENANT, name="same.twice")(body)
    assert second is first


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"timeout": 0}, "timeout"),
        ({"timeout": "-5s"}, "timeout"),
        ({"step_timeout": "soon"}, "step_timeout"),
        ({"event_poll": 0}, "event_poll"),
        ({"priority": 101}, "priority"),
        ({"priority": 1.5}, "priority"),
        ({"queue": "Not Valid"}, "queue"),
        ({"queue": "-leading-dash"}, "queue"),
        ({"description": "x" * 256}, "description"),
        ({"concurrency": 0}, "concurrency"),
        ({"retry": {"attempts": 3}}, "retry"),
        ({"dead_letter": "no"}, "dead_letter"),
        ({"retention": {"done": {"keep": 3}}}, "retention.done"),
        ({"retention": {"done": {"last": 0}}}, "retention.done.last"),
        ({"retention": {"running": False}}, "retention.running"),
        ({"on_settled": "notify"}, "on_settled"),
    ],
)
def test_bad_declarations_are_refused_naming_the_field(fields, field):
    with pytest.raises(JobDeclarationInvalid) as info:
        job(idempotency_key=key, tenant=NO_TENANT, name="bad.one", **fields)(body)
    assert info.value.field == field
    assert "bad.one" not in registry


def test_concurrency_is_checked_at_declaration():
    with pytest.raises(JobDeclarationInvalid):
        Concurrency(key=lambda p: "k", limit=0)
    with pytest.raises(JobDeclarationInvalid):
        Concurrency(key="account", limit=1)  # type: ignore[arg-type]
    with pytest.raises(JobDeclarationInvalid):
        Concurrency(key=lambda p: "k", when_busy="queue")  # type: ignore[arg-type]


def test_a_nested_function_needs_an_explicit_name():
    def local(run):
        pass

    with pytest.raises(JobDeclarationInvalid):
        job(idempotency_key=key, tenant=NO_TENANT)(local)
    assert (
        job(idempotency_key=key, tenant=NO_TENANT, name="local.ok")(local).name
        == "local.ok"
    )


def test_async_functions_are_supported():
    handle = job(idempotency_key=key, tenant=NO_TENANT, name="async.one")(async_body)
    assert handle.definition.is_async


def test_describe_answers_the_manifest():
    handle = job(
        idempotency_key=key,
        tenant=lambda p: "t",
        name="manifest.one",
        queue="emails",
        priority=5,
        description="Sends one email.",
        timeout="5m",
        retry=Retry(attempts=3, delay="2s"),
    )(body)
    manifest = handle.describe()
    assert manifest["name"] == "manifest.one"
    assert manifest["queue"] == "emails"
    assert manifest["timeout"] == 300.0
    assert manifest["retry"]["attempts"] == 3
    assert manifest["retry"]["delay"] == 2.0
    assert manifest["tenant"] == "per-input"
    assert manifest["input"] == {"a": {"type": "int", "required": False, "default": 0}}
    assert "manifest.one" in [entry["name"] for entry in registry.describe()]


def test_the_handle_is_not_an_execution_surface():
    handle = job(idempotency_key=key, tenant=NO_TENANT, name="no.inline")(body)
    assert not callable(handle)
    assert not hasattr(handle, "run_inline")


def test_registry_lists_declared_queues():
    job(idempotency_key=key, tenant=NO_TENANT, name="q.one", queue="reports")(body)
    assert "reports" in registry.queues()
